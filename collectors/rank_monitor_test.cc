#include "collectors/rank_monitor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "common/file.h"
#include "common/temp_dirs_testing.h"
#include "runtime/trace.h"

namespace dsd::collectors {
namespace {

std::string MonitorDir(const std::string& name) { return testing::TempDir("monitor", name); }

// Ticks for `seconds` at 100 ms, returning everything the rank printed.
std::string TickFor(RankMonitor& m, double seconds) {
  std::string out;
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    m.Tick(runtime::TraceNowNs(), &out);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return out;
}

// Each watched rank holds three descriptors: the limit is raised for them, and a limit the hard
// cap keeps too low is named (the real process's limits).
TEST(RankMonitorTest, TheOpenFileLimitIsRaisedForTheRanksOrNamed) {
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
  EXPECT_EQ(RaiseOpenFileLimitFor(8), "");
  rlimit now{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_GE(now.rlim_cur, 3u * 8 + 64);
  if (before.rlim_max != RLIM_INFINITY && before.rlim_max < (RLIM_INFINITY - 64) / 3) {
    const size_t too_many = before.rlim_max;  // 3 descriptors each: past the hard limit
    const std::string low = RaiseOpenFileLimitFor(too_many);
    EXPECT_NE(low.find(std::to_string(too_many) + " ranks want about"), std::string::npos) << low;
    EXPECT_NE(low.find("(ulimit -n)"), std::string::npos) << low;
  }
}

// A running rank's output is read 4 MiB a tick at most; once it has exited, all that is left is
// read in the tick that sees the exit, so nothing it wrote is missing when its exit is reported.
TEST(RankMonitorTest, EverythingARankWroteIsReadByTheTickThatSeesItExit) {
  std::string d = MonitorDir("tail");
  RankMonitor m(0, 0, "n", RunDir(d));
  const size_t bytes = 9u << 20;
  ASSERT_TRUE(m.Start({"/bin/sh", "-c", "head -c " + std::to_string(bytes) + " /dev/zero | tr '\\0' x"}, {}, "").ok());
  std::string out;
  for (int i = 0; i < 400 && m.state().status == diagnosis::RankStatus::kRunning; ++i) {
    m.Tick(runtime::TraceNowNs(), &out);
    if (m.state().status == diagnosis::RankStatus::kRunning) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(m.state().status, diagnosis::RankStatus::kExited);
  EXPECT_EQ(out.size(), bytes);
}

TEST(RankMonitorTest, TellsSpinningFromBlocked) {
  std::string d = MonitorDir("cpu");
  RankMonitor spin(0, 0, "n", RunDir(d));
  RankMonitor block(1, 1, "n", RunDir(d));
  ASSERT_TRUE(spin.Start({"/bin/sh", "-c", "while :; do :; done"}, {}, "").ok());
  ASSERT_TRUE(block.Start({"/bin/sh", "-c", "echo waiting; exec sleep 30"}, {}, "").ok());
  std::string out_spin, out_block;
  // Until the blocked one has been flat for a second (at most 20 s): on a busy machine the spinning
  // one gets less than a core, but never so little that its CPU time stops growing.
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    spin.Tick(runtime::TraceNowNs(), &out_spin);
    block.Tick(runtime::TraceNowNs(), &out_block);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < end && !(block.state().proc.flat_for_s > 1.0));
  EXPECT_TRUE(spin.state().proc.valid);
  EXPECT_GT(spin.state().proc.cpu_fraction, 0.05) << "above the flatness threshold (5 % of a core)";
  EXPECT_LT(spin.state().proc.flat_for_s, 0.5);
  EXPECT_EQ(block.state().proc.state, 'S');
  EXPECT_LT(block.state().proc.cpu_fraction, 0.05);
  EXPECT_GT(block.state().proc.flat_for_s, 1.0);
  EXPECT_EQ(out_block, "waiting\n");
  EXPECT_FALSE(block.state().has_trace) << "no trace file: not the bundled runtime";
  spin.Signal(SIGKILL);
  block.Signal(SIGTERM);
  TickFor(spin, 0.3);
  TickFor(block, 0.3);
  EXPECT_EQ(spin.state().status, diagnosis::RankStatus::kExited);
  EXPECT_EQ(spin.state().signal, SIGKILL);
  EXPECT_EQ(block.state().signal, SIGTERM);
  auto exit_file = ReadFile(d + "/rank-0.exit");
  ASSERT_TRUE(exit_file.ok());
  EXPECT_EQ(*exit_file, "137\n");
  std::filesystem::remove_all(d);
}

TEST(RankMonitorTest, LogIsCompleteOnDiskAndStreamedOnce) {
  std::string d = MonitorDir("log");
  RankMonitor m(3, 0, "n", RunDir(d));
  ASSERT_TRUE(
      m.Start({"/bin/sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.1; done; printf '\\377 bad byte'; exit 4"},
              {{"FOO", "bar"}}, "")
          .ok());
  std::string streamed = TickFor(m, 1.0);
  EXPECT_EQ(m.state().status, diagnosis::RankStatus::kExited);
  EXPECT_EQ(m.state().exit_code, 4);
  auto on_disk = ReadFile(d + "/rank-3.log");
  ASSERT_TRUE(on_disk.ok());
  EXPECT_EQ(*on_disk, "line 1\nline 2\nline 3\n\377 bad byte");
  EXPECT_EQ(streamed, *on_disk) << "each byte streamed exactly once";
  EXPECT_EQ(SanitizeForStream(streamed), "line 1\nline 2\nline 3\n? bad byte");
  std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace dsd::collectors
