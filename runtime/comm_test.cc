#include "runtime/comm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "runtime/store.h"
#include "runtime/testing.h"

namespace dsd::runtime {
namespace {

using testing::RunRanks;

// Real Gloo over loopback TCP, every rank a thread with its own World, over world sizes 1-4.
class GlooCollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooCollectivesTest, CollectivesComputeTheRightValues) {
  const int n = GetParam();
  RunRanks(n, [n](World& w) {
    ProcessGroup& g = w.group();
    const int r = g.rank();
    EXPECT_EQ(g.backend().name(), "gloo");
    EXPECT_EQ(g.size(), n);

    std::vector<float> f = {float(r + 1), float(10 * r), -float(r)};
    ASSERT_TRUE(AllReduce(g, f, ReduceOp::kSum, "test.sum").ok());
    EXPECT_FLOAT_EQ(f[0], n * (n + 1) / 2.0f);
    EXPECT_FLOAT_EQ(f[1], 10.0f * n * (n - 1) / 2);

    std::vector<float> m = {float(r), -float(r)};
    ASSERT_TRUE(AllReduce(g, m, ReduceOp::kMax, "test.max").ok());
    EXPECT_FLOAT_EQ(m[0], float(n - 1));
    EXPECT_FLOAT_EQ(m[1], 0.0f);

    std::vector<uint16_t> h = {FloatToHalf(0.5f * (r + 1)), FloatToHalf(1000.0f)};
    ASSERT_TRUE(AllReduce(g, h.data(), h.size(), DType::kFloat16, ReduceOp::kSum, "test.half").ok());
    EXPECT_FLOAT_EQ(HalfToFloat(h[0]), 0.5f * n * (n + 1) / 2);
    EXPECT_FLOAT_EQ(HalfToFloat(h[1]), 1000.0f * n);

    int32_t i = r + 1;
    ASSERT_TRUE(AllReduce(g, &i, 1, DType::kInt32, ReduceOp::kSum, "test.int").ok());
    EXPECT_EQ(i, n * (n + 1) / 2);

    std::vector<float> b = {r == n - 1 ? 42.0f : 0.0f, r == n - 1 ? 7.0f : 0.0f};
    ASSERT_TRUE(Broadcast(g, b.data(), b.size(), DType::kFloat32, n - 1, "test.bcast").ok());
    EXPECT_EQ(b, (std::vector<float>{42, 7}));

    std::vector<int64_t> mine = {r, 100 + r};
    std::vector<int64_t> all(2 * n);
    ASSERT_TRUE(AllGather(g, mine.data(), all.data(), 2, DType::kInt64, "test.gather").ok());
    for (int k = 0; k < n; ++k) {
      EXPECT_EQ(all[2 * k], k);
      EXPECT_EQ(all[2 * k + 1], 100 + k);
    }
    ASSERT_TRUE(Barrier(g, "test.barrier").ok());

    if (n >= 2) {  // a ring of sends
      int next = (r + 1) % n, prev = (r + n - 1) % n;
      float out = 1.5f * r, in = -1;
      if (r % 2 == 0) {
        ASSERT_TRUE(Send(g, &out, 1, DType::kFloat32, next, "test.ring").ok());
        ASSERT_TRUE(Recv(g, &in, 1, DType::kFloat32, prev, "test.ring").ok());
      } else {
        ASSERT_TRUE(Recv(g, &in, 1, DType::kFloat32, prev, "test.ring").ok());
        ASSERT_TRUE(Send(g, &out, 1, DType::kFloat32, next, "test.ring").ok());
      }
      EXPECT_FLOAT_EQ(in, 1.5f * prev);
    }
    // Collectives are numbered 1..7 on every rank (the rendezvous record is not a collective).
    EXPECT_EQ(g.collectives_issued(), 7u);
    auto cur = w.trace().Current();
    EXPECT_FALSE(cur.has_value());
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooCollectivesTest, ::testing::Values(1, 2, 3, 4));

TEST(CommTest, TracedCallsRecordSeqOpAndCallsite) {
  char tmpl[] = "/tmp/dsdcomm-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  RunRanks(2, [&](World& w) {
    std::vector<float> v(256, 1.0f);
    ASSERT_TRUE(AllReduce(w.group(), v, ReduceOp::kSum, "engine.step").ok());
    ASSERT_TRUE(Barrier(w.group(), "save_checkpoint").ok());
  }, [&](int r, auto& env) { env["DSDOCTOR_TRACE_DIR"] = dir; });
  for (int r = 0; r < 2; ++r) {
    auto s = ReadTrace(dir + "/rank-" + std::to_string(r) + ".trace");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_EQ(s->records.size(), 3u);
    EXPECT_EQ(s->records[0].op, Op::kRendezvous);
    EXPECT_EQ(s->records[0].callsite, "init_distributed");
    EXPECT_EQ(s->records[0].peer, 2);
    EXPECT_EQ(s->records[1].op, Op::kAllReduce);
    EXPECT_EQ(s->records[1].seq, 1u);
    EXPECT_EQ(s->records[1].count, 256u);
    EXPECT_EQ(s->records[1].bytes, 1024u);
    EXPECT_EQ(s->records[1].dtype, DType::kFloat32);
    EXPECT_EQ(s->records[1].reduce, ReduceOp::kSum);
    EXPECT_EQ(s->records[1].callsite, "engine.step");
    EXPECT_EQ(s->records[2].op, Op::kBarrier);
    EXPECT_EQ(s->records[2].seq, 2u);
    EXPECT_EQ(s->records[2].callsite, "save_checkpoint");
    for (const auto& rec : s->records) EXPECT_EQ(rec.state, RecordState::kCompleted);
    EXPECT_EQ(s->rank, r);
    EXPECT_EQ(s->phase, Phase::kFinished);
    EXPECT_TRUE(s->flags & kTraceFlagFinished);
  }
  std::system(("rm -rf " + dir).c_str());
}

TEST(CommTest, BadArgumentsAreRejectedBeforeTheBackend) {
  RunRanks(1, [](World& w) {
    float x = 0;
    EXPECT_EQ(Broadcast(w.group(), &x, 1, DType::kFloat32, 3, "t").code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(Send(w.group(), &x, 1, DType::kFloat32, 0, "t").code(), StatusCode::kInvalidArgument);
  });
}

TEST(HalfTest, ConversionsRoundAndOverflow) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f)), 1.0f);
  EXPECT_EQ(HalfToFloat(FloatToHalf(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(70000.0f))));
  EXPECT_NEAR(HalfToFloat(FloatToHalf(0.1f)), 0.1f, 1e-4);
  uint16_t a = FloatToHalf(60000.0f), b = FloatToHalf(60000.0f);
  ReduceInto(&a, &b, 1, DType::kFloat16, ReduceOp::kSum);  // the sum overflows half
  EXPECT_TRUE(std::isinf(HalfToFloat(a)));
}

TEST(TcpStoreTest, SetWaitAndMissingKeys) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto a = TcpStore::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5), std::chrono::seconds(5));
  auto b = TcpStore::Connect("127.0.0.1", (*server)->port(), std::chrono::seconds(5), std::chrono::seconds(5));
  ASSERT_TRUE(a.ok() && b.ok());
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (*a)->set("k", {'\0', 'x', '\xff'});
  });
  auto v = (*b)->get("k");  // waits for the other client's set
  later.join();
  EXPECT_EQ(v, (std::vector<char>{'\0', 'x', '\xff'}));
  std::vector<std::string> missing;
  auto r = (*b)->WaitGet({"k", "nope"}, std::chrono::milliseconds(100), &missing);
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_EQ(missing, std::vector<std::string>{"nope"});
}

TEST(TcpStoreTest, UnreachableStoreIsANamedError) {
  int port = testing::FreePort();
  auto c = TcpStore::Connect("127.0.0.1", port, std::chrono::milliseconds(300), std::chrono::seconds(1));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("MASTER_ADDR:MASTER_PORT=127.0.0.1:" + std::to_string(port)), std::string::npos)
      << c.status().message();
}

// Every rank agrees on WORLD_SIZE=3 but only two were started: both fail with the missing rank
// named, instead of hanging in the backend's rendezvous.
TEST(RendezvousTest, MissingRankIsNamed) {
  int port = testing::FreePort();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      DistributedOptions o;
      o.env = testing::RankEnvMap(r, 3, port);
      o.env["DSDOCTOR_RENDEZVOUS_TIMEOUT"] = "1";
      auto w = InitDistributed(o);
      errors[r] = w.ok() ? "ok" : w.status().message();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    EXPECT_NE(e.find("2 of 3 ranks joined"), std::string::npos) << e;
    EXPECT_NE(e.find("missing rank(s) 2"), std::string::npos) << e;
  }
}

TEST(RendezvousTest, DisagreeingWorldSizesAreNamed) {
  int port = testing::FreePort();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      DistributedOptions o;
      o.env = testing::RankEnvMap(r, 2, port);
      o.world_size = r == 1 ? 4 : 0;  // rank 1 hard-codes world_size=4
      o.env["DSDOCTOR_RENDEZVOUS_TIMEOUT"] = "5";
      auto w = InitDistributed(o);
      errors[r] = w.ok() ? "ok" : w.status().message();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_NE(e.find("rank 1 on"), std::string::npos) << e;
  EXPECT_NE(errors[0].find("says 4"), std::string::npos) << errors[0];
}

TEST(DistributedTest, BadEnvironmentIsANamedError) {
  DistributedOptions o;
  o.env = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "x"}};
  EXPECT_NE(InitDistributed(o).status().message().find("MASTER_PORT=x"), std::string::npos);
  o.env = {{"DSDOCTOR_BACKEND", "tpu"}, {"PATH", "/bin"}};
  EXPECT_NE(InitDistributed(o).status().message().find("\"tpu\""), std::string::npos);
  o.env = {{"DSDOCTOR_BACKEND", "mpi"}, {"PATH", "/bin"}};
  EXPECT_NE(InitDistributed(o).status().message().find("mpirun"), std::string::npos);
  o.env = {{"DSDOCTOR_TIMEOUT", "soon"}, {"PATH", "/bin"}};
  EXPECT_NE(InitDistributed(o).status().message().find("DSDOCTOR_TIMEOUT=soon"), std::string::npos);
}

// Without a GPU the NCCL backend fails with the CUDA runtime's own words (the GPU path itself
// runs in scripts/gpu_check.sh on a machine with GPUs).
TEST(DistributedTest, NcclWithoutGpuFailsPlainly) {
  DistributedOptions o;
  o.env = {{"DSDOCTOR_BACKEND", "nccl"}, {"PATH", "/bin"}};
  auto w = InitDistributed(o);
  ASSERT_FALSE(w.ok());
  const std::string& m = w.status().message();
  EXPECT_TRUE(m.find("cudaSetDevice") != std::string::npos || m.find("libcudart") != std::string::npos ||
              m.find("libnccl") != std::string::npos)
      << m;
}

TEST(DistributedTest, BindAddressFollowsTheRouteOrTheInterface) {
  auto a = ChooseBindAddress("", "127.0.0.1");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(*a, "127.0.0.1");
  EXPECT_EQ(*ChooseBindAddress("lo", "ignored"), "127.0.0.1");
  EXPECT_NE(ChooseBindAddress("nosuch0", "").status().message().find("GLOO_SOCKET_IFNAME=nosuch0"), std::string::npos);
}

}  // namespace
}  // namespace dsd::runtime
