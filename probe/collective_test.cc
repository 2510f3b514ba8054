#include "probe/collective.h"

#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include <thread>

#include "probe/gloo_comm.h"
#include "probe/gpu.h"
#include "probe/nccl_comm.h"

namespace dsd::probe {
namespace {

// A communicator of one rank whose sum is deliberately wrong, to prove #wrong counts.
class BrokenCommunicator final : public HostBufferCommunicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "broken"; }
  Status AllReduceSum(size_t count) override {
    if (count > 3) buffer_[3] += 1;
    return Status::Ok();
  }
  Status Barrier() override { return Status::Ok(); }
};

TEST(SweepTest, IterationsDependOnSizeOnly) {
  SweepOptions o;
  EXPECT_EQ(IterationsFor(8, o), 20);
  EXPECT_EQ(IterationsFor(16u << 20, o), 4);
  EXPECT_EQ(IterationsFor(64u << 20, o), 1);
  EXPECT_EQ(IterationsFor(1u << 30, o), 1);
}

TEST(SweepTest, WrongElementsAreCounted) {
  BrokenCommunicator c;
  FakeClock clock;
  auto r = RunAllReduceSweep(c, {16, 64}, {}, clock);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].wrong, 1);
  EXPECT_EQ((*r)[1].wrong, 1);
}

// Counts operations and checks that the first after each upload is the one read back.
class CountingCommunicator final : public HostBufferCommunicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "counting"; }
  Status AllReduceSum(size_t) override {
    ++ops;
    ++since_upload;
    return Status::Ok();
  }
  Status Barrier() override { return Status::Ok(); }
  Status Upload(const std::vector<float>& host, size_t count) override {
    since_upload = 0;
    return HostBufferCommunicator::Upload(host, count);
  }
  Status Download(std::vector<float>* host, size_t count) override {
    downloads_after.push_back(since_upload);
    return HostBufferCommunicator::Download(host, count);
  }
  int ops = 0, since_upload = 0;
  std::vector<int> downloads_after;
};

TEST(SweepTest, AFewTimedOperationsGetAsFewWarmUpsAndTheFirstIsChecked) {
  SweepOptions o;
  o.warmup = 2;
  o.max_iters = 20;
  o.bytes_budget = 64;  // 64 B: 1 timed operation, 16 B: 4, 4 B: 16
  FakeClock clock;
  for (auto [bytes, ops] : {std::pair<size_t, int>{64, 1 + 1}, {16, 2 + 4}, {4, 2 + 16}}) {
    CountingCommunicator c;
    auto r = RunAllReduceSweep(c, {bytes}, o, clock);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(c.ops, ops) << bytes << " B";
    EXPECT_EQ(c.downloads_after, std::vector<int>{1}) << "the result read is one sum of fresh data";
    EXPECT_EQ((*r)[0].wrong, 0);
  }
}

// The benchmark's side-by-side use: two communicators prepared once, measured size by size in turn.
// Each measurement starts again from the pattern, so one's result never leaks into the other's check.
TEST(SweepTest, TwoCommunicatorsCanAlternateSizeBySizeOnOnePattern) {
  CountingCommunicator a;
  BrokenCommunicator b;
  ASSERT_TRUE(a.Prepare(16).ok());
  ASSERT_TRUE(b.Prepare(16).ok());
  const auto pattern = AllReducePattern(0, 64);
  ASSERT_EQ(pattern.size(), 16u);
  EXPECT_EQ(pattern[14], PatternValue(0, 14));
  FakeClock clock;
  for (size_t bytes : {16u, 64u}) {
    auto ra = MeasureAllReduce(a, bytes, pattern, {}, clock);
    auto rb = MeasureAllReduce(b, bytes, pattern, {}, clock);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(ra->bytes, bytes);
    EXPECT_EQ(ra->wrong, 0) << bytes << " B";
    EXPECT_EQ(rb->wrong, 1) << bytes << " B";
  }
  EXPECT_EQ(a.downloads_after, (std::vector<int>{1, 1}));
  auto beyond = MeasureAllReduce(a, 128, pattern, {}, clock);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("128"), std::string::npos) << beyond.status().message();
  EXPECT_FALSE(MeasureAllReduce(a, 2, pattern, {}, clock).ok()) << "below one float";
}

TEST(SweepTest, CombineTakesTheSlowestRankAndSumsWrong) {
  auto rows = CombineRanks({{{1000000, 100.0, 0}}, {{1000000, 400.0, 2}}}, 2);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].time_us, 400.0);
  EXPECT_EQ(rows[0].wrong, 2);
  EXPECT_DOUBLE_EQ(rows[0].algbw, 2.5);
  EXPECT_DOUBLE_EQ(rows[0].busbw, 2.5);  // factor 2(n-1)/n = 1 for n = 2
}

// Real Gloo over TCP on loopback, one thread per rank, rendezvous through a HashStore; world size
// × busy-polling. The sizes cross every path of the synchronous algorithm: one float, recursive
// doubling up to its limit, halving-doubling just past it with an odd element count, a size whose
// halves take one piece one way and two the other (2·64Ki+1 floats: the turn-around step on 2-3
// ranks, a halving and a gathering exchange on 4-8), a size of several pieces whose last is short,
// and that size again after another (an instance's second use is checked too). 7 and 8 ranks have
// three steps, so a middle halving and gathering step; 7 also folds three pairs.
class GlooSweepTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(GlooSweepTest, AllRanksGetExactSums) {
  // Not a structured binding: the rank threads capture these, which clang before 16 refuses.
  const int n = std::get<0>(GetParam());
  const bool busy_poll = std::get<1>(GetParam());
  const std::vector<size_t> sizes = {
      4, 4096,          kGlooRecursiveDoublingMaxBytes, kGlooRecursiveDoublingMaxBytes + 4, 524292, (1 << 20) + 12,
      4, (1 << 20) + 12};
  gloo::rendezvous::HashStore store;
  std::vector<std::vector<RankSizeResult>> per_rank(n);
  std::vector<Status> status(n);
  std::vector<std::string> modes(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      GlooProbeOptions o;
      o.busy_poll = busy_poll;
      auto comm = CreateGlooCommunicator(r, n, store, "127.0.0.1", std::chrono::seconds(30), o);
      if (!comm.ok()) {
        status[r] = comm.status();
        return;
      }
      modes[r] = (*comm)->mode();
      SweepOptions sweep;
      sweep.max_iters = 3;
      auto res = RunAllReduceSweep(**comm, sizes, sweep, RealClock::Instance());
      if (res.ok())
        per_rank[r] = *res;
      else
        status[r] = res.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].ToString();
  EXPECT_EQ(modes[0], busy_poll ? "synchronous pairs, busy-polling" : "synchronous pairs, blocking reads");
  auto rows = CombineRanks(per_rank, n);
  ASSERT_EQ(rows.size(), sizes.size());
  for (const auto& row : rows) {
    EXPECT_EQ(row.wrong, 0) << row.bytes;
    EXPECT_GT(row.time_us, 0);
    EXPECT_GT(row.algbw, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooSweepTest,
                         ::testing::Values(std::make_tuple(1, false), std::make_tuple(2, false),
                                           std::make_tuple(3, false), std::make_tuple(4, false),
                                           std::make_tuple(5, false), std::make_tuple(6, false),
                                           std::make_tuple(7, false), std::make_tuple(8, false),
                                           std::make_tuple(2, true)));

// A rank that leaves after connecting: the survivors' sweeps end with an error naming Gloo (the
// peer's socket closed), not a hang.
TEST(GlooSweepTest, SurvivorsOfADepartedRankGetAnError) {
  const int n = 3;
  gloo::rendezvous::HashStore store;
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto comm = CreateGlooCommunicator(r, n, store, "127.0.0.1", std::chrono::seconds(20));
      if (!comm.ok() || r == n - 1) {
        status[r] = comm.status();
        return;  // the last rank's communicator (and sockets) go away here
      }
      auto res = RunAllReduceSweep(**comm, {4096, 1 << 20}, {}, RealClock::Instance());
      status[r] = res.status();
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(status[n - 1].ok()) << status[n - 1].ToString();
  for (int r = 0; r < n - 1; ++r) {
    ASSERT_FALSE(status[r].ok()) << "rank " << r;
    EXPECT_EQ(status[r].code(), StatusCode::kUnavailable) << status[r].ToString();
    EXPECT_NE(status[r].message().find("gloo"), std::string::npos) << status[r].ToString();
  }
}

TEST(GlooBusyPollTest, OnlyWhereEveryRankOnAHostHasACore) {
  EXPECT_EQ(GlooBusyPollPerRank({{"a", 8}, {"b", 8}}), (std::vector<bool>{true, true}));
  // Four ranks on a two-core host: none spins; a lone rank on its own host does.
  EXPECT_EQ(GlooBusyPollPerRank({{"a", 2}, {"a", 2}, {"a", 2}, {"a", 2}, {"b", 2}}),
            (std::vector<bool>{false, false, false, false, true}));
  EXPECT_EQ(GlooBusyPollPerRank({{"a", 2}, {"a", 2}}), (std::vector<bool>{true, true}));
  // Unknown host or CPU count: never.
  EXPECT_EQ(GlooBusyPollPerRank({{"", 64}, {"c", 0}}), (std::vector<bool>{false, false}));
}

// The NCCL backend is real code over dlopen'd NCCL and cudart. Without a GPU it must fail
// plainly with CUDA's own words; with one (scripts/gpu_check.sh) it must sum exactly.
TEST(NcclCommunicatorTest, RunsOnAGpuOrSaysWhyNot) {
  gloo::rendezvous::HashStore store;
  auto comm = CreateNcclCommunicator(0, 1, 0, store);
  CudaInfo cuda = InspectCuda();
  if (!cuda.runtime_found) {
    ASSERT_FALSE(comm.ok());
    EXPECT_NE(comm.status().message().find("CUDA runtime"), std::string::npos) << comm.status().message();
    return;
  }
  if (cuda.device_count == 0) {
    ASSERT_FALSE(comm.ok());
    EXPECT_NE(comm.status().message().find("cudaSetDevice(0): " + cuda.device_error_text), std::string::npos)
        << comm.status().message();
    return;
  }
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  auto r = RunAllReduceSweep(**comm, {4096, 1 << 20}, {}, RealClock::Instance());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const auto& row : *r) EXPECT_EQ(row.wrong, 0);
}

}  // namespace
}  // namespace dsd::probe
