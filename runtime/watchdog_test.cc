#include "runtime/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace dsd::runtime {
namespace {

std::shared_ptr<TraceWriter> Trace() { return std::shared_ptr<TraceWriter>(TraceWriter::Create("", {2, 4, 0, "h", "gloo"}, 16).value().release()); }

TEST(WatchdogTest, FiresOnceWhenACallOutlivesTheTimeout) {
  auto trace = Trace();
  int aborts = 0;
  Watchdog w(trace, 2, [&] { ++aborts; });
  w.Configure({std::chrono::seconds(5), WatchdogPolicy::kWarn});
  uint64_t i = trace->Begin({Op::kAllReduce, DType::kFloat32, ReduceOp::kSum, 42, 1024, 4096, -1, 0, "engine.step"});
  int64_t started = trace->Current()->record.started_ns;
  EXPECT_FALSE(w.CheckOnce(started + 4'900'000'000).has_value());
  auto line = w.CheckOnce(started + 5'000'000'000);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line,
            "watchdog: rank 2: all_reduce#42 float32 x1024 (4 KiB) sum @engine.step [started] in flight for 5.0 s "
            "(timeout 5.0 s); policy warn");
  EXPECT_FALSE(w.CheckOnce(started + 9'000'000'000).has_value());  // once per call
  EXPECT_EQ(aborts, 0);
  trace->Complete(i);
  EXPECT_FALSE(w.CheckOnce(started + 20'000'000'000).has_value());
}

TEST(WatchdogTest, AbortPolicyMarksTheTraceAndRunsTheAction) {
  char tmpl[] = "/tmp/dsdwd-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string path = dir + "/rank-2.trace";
  auto trace = std::shared_ptr<TraceWriter>(TraceWriter::Create(path, {2, 4, 0, "h", "gloo"}, 16).value().release());
  std::atomic<int> aborts{0};
  Watchdog w(trace, 2, [&] { ++aborts; });
  w.Configure({std::chrono::milliseconds(200), WatchdogPolicy::kAbort, std::chrono::milliseconds(20)});
  w.Start();
  trace->Begin({Op::kBarrier, DType::kNone, ReduceOp::kNone, 7, 0, 0, -1, 0, "save_checkpoint"});
  for (int k = 0; k < 200 && aborts == 0; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  w.Stop();
  EXPECT_EQ(aborts, 1);
  auto s = ReadTrace(path);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->flags & kTraceFlagWatchdogFired);
  EXPECT_TRUE(s->flags & kTraceFlagAborted);
  EXPECT_EQ(s->watchdog_index, 0u);
  EXPECT_NE(s->last_error.find("barrier#7 @save_checkpoint [started] in flight"), std::string::npos) << s->last_error;
  EXPECT_GT(s->heartbeat_ns, s->created_ns);
  std::system(("rm -rf " + dir).c_str());
}

TEST(WatchdogTest, ZeroTimeoutDisables) {
  auto trace = Trace();
  Watchdog w(trace, 0, [] {});
  w.Configure({Duration::zero(), WatchdogPolicy::kAbort});
  trace->Begin({Op::kBarrier, DType::kNone, ReduceOp::kNone, 1, 0, 0, -1, 0, "x"});
  EXPECT_FALSE(w.CheckOnce(trace->Current()->record.started_ns + 1'000'000'000'000).has_value());
}

}  // namespace
}  // namespace dsd::runtime
