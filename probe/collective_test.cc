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
  EXPECT_EQ(IterationsFor(64u << 20, o), 4);
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

TEST(SweepTest, CombineTakesTheSlowestRankAndSumsWrong) {
  auto rows = CombineRanks({{{1000000, 100.0, 0}}, {{1000000, 400.0, 2}}}, 2);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].time_us, 400.0);
  EXPECT_EQ(rows[0].wrong, 2);
  EXPECT_DOUBLE_EQ(rows[0].algbw, 2.5);
  EXPECT_DOUBLE_EQ(rows[0].busbw, 2.5);  // factor 2(n-1)/n = 1 for n = 2
}

// Real Gloo over TCP on loopback, one thread per rank, rendezvous through a HashStore.
class GlooSweepTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooSweepTest, AllRanksGetExactSums) {
  int n = GetParam();
  gloo::rendezvous::HashStore store;
  std::vector<std::vector<RankSizeResult>> per_rank(n);
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto comm = CreateGlooCommunicator(r, n, store, "127.0.0.1", std::chrono::seconds(30));
      if (!comm.ok()) {
        status[r] = comm.status();
        return;
      }
      auto res = RunAllReduceSweep(**comm, {4, 4096, 1 << 20}, {}, RealClock::Instance());
      if (res.ok()) per_rank[r] = *res;
      else status[r] = res.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].ToString();
  auto rows = CombineRanks(per_rank, n);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows) {
    EXPECT_EQ(row.wrong, 0) << row.bytes;
    EXPECT_GT(row.time_us, 0);
    EXPECT_GT(row.algbw, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooSweepTest, ::testing::Values(2, 3, 4));

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
