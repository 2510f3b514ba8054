#include "collectors/proc_stat.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/file.h"
#include "common/strings.h"

namespace dsd::collectors {
namespace {

TEST(ProcStatTest, ParsesCommWithSpacesAndParens) {
  auto s = ParseProcStat(
      "4242 (my (weird) rank) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 5 0 0 20 0 3 0 "
      "1000 1000 100 18446744073709551615");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->comm, "my (weird) rank");
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->ppid, 1);
  EXPECT_EQ(s->utime_ticks, 37u);
  EXPECT_EQ(s->stime_ticks, 5u);
  EXPECT_EQ(s->num_threads, 3u);
}

TEST(ProcStatTest, NumThreadsOfThisProcessSeesAnotherThread) {
  auto before = ReadProcStat(::getpid(), /*with_wchan=*/false);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_GE(before->num_threads, 1u);
  std::atomic<bool> go{false};
  std::thread t([&go] {
    while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  auto during = ReadProcStat(::getpid(), false);
  ASSERT_TRUE(during.ok());
  EXPECT_EQ(during->num_threads, before->num_threads + 1);
  go = true;
  t.join();
}

TEST(ProcStatTest, RejectsGarbage) {
  EXPECT_FALSE(ParseProcStat("").ok());
  EXPECT_FALSE(ParseProcStat("12 (x) S 1").ok());
  EXPECT_FALSE(ParseProcStat("12 (x) S one 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18").ok());
}

TEST(ProcStatTest, SeesARealChildSleepThenStop) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  auto wait_for_state = [&](char want) {
    for (int i = 0; i < 200; ++i) {
      auto s = ReadProcStat(child);
      if (s.ok() && s->state == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  EXPECT_TRUE(wait_for_state('S'));
  ::kill(child, SIGSTOP);
  EXPECT_TRUE(wait_for_state('T'));
  EXPECT_STREQ(DescribeProcState('T'), "stopped");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(ReadProcStat(child).status().code(), StatusCode::kNotFound);
}

// A rank that only waits for its worker (a DataLoader main process) uses no CPU of its own; the
// worker's CPU is counted through the process tree.
TEST(ProcStatTest, DescendantsCpuTicksCountsAGrandchildThatSpins) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pid_t worker = ::fork();
    if (worker == 0) {
      volatile uint64_t spin = 0;
      for (;;) spin = spin + 1;
    }
    ::waitpid(worker, nullptr, 0);
    ::_exit(0);
  }
  // 20 ticks (0.2 s of CPU) of the grandchild; the child spends only its fork (a few ticks under ASan).
  uint64_t descendants = 0;
  for (int i = 0; i < 500 && descendants < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    descendants = DescendantsCpuTicks(child);
  }
  auto own = ReadProcStat(child);
  ASSERT_TRUE(own.ok());
  EXPECT_GE(descendants, 20u) << "the spinning grandchild's CPU is not counted";
  EXPECT_LE(own->cpu_ticks() * 4, descendants) << "the waiting child itself stays (nearly) idle";
  // End the grandchild (the child's only child), then the child: both ours, by pid.
  auto kids = ReadFile("/proc/" + std::to_string(child) + "/task/" + std::to_string(child) + "/children");
  if (kids.ok())
    for (const auto& k : SplitWhitespace(*kids)) ::kill(static_cast<pid_t>(std::stol(k)), SIGKILL);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

// A child started by another thread than the main one (a compile worker pool, a loader thread) is
// listed under that thread: every thread's list is read.
TEST(ProcStatTest, DescendantsCpuTicksFindsAChildOfAnotherThread) {
  std::atomic<pid_t> worker{-1};
  std::thread starter([&] {
    worker = ::fork();
    if (worker.load() == 0) {
      volatile uint64_t spin = 0;
      for (;;) spin = spin + 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // the thread lives while we look
  });
  uint64_t descendants = 0;
  for (int i = 0; i < 250 && descendants == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    descendants = DescendantsCpuTicks(::getpid());
  }
  EXPECT_GT(descendants, 0u) << "the spinning child of the second thread is not counted";
  if (worker > 0) {
    ::kill(worker, SIGKILL);
    ::waitpid(worker, nullptr, 0);
  }
  starter.join();
}

}  // namespace
}  // namespace dsd::collectors
