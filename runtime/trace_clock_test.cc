#include "runtime/trace_clock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

namespace dsd::runtime {
namespace {

// Readings bracketed by clock_gettime: however the machine schedules the test, a reading lies
// between the two bracketing reads, give or take the fitted line's error.
void ExpectBracketed(TraceClock& clock, int64_t slack_ns) {
  const int64_t before = RealtimeNs();
  const int64_t now = clock.Now();
  const int64_t after = RealtimeNs();
  EXPECT_GE(now, before - slack_ns);
  EXPECT_LE(now, after + slack_ns);
}

TEST(TraceClockTest, RealtimeSourceIsClockGettime) {
  TraceClock clock(TraceClock::Source::kRealtime);
  for (int i = 0; i < 1000; ++i) ExpectBracketed(clock, 0);
  EXPECT_FALSE(clock.fitted());
}

TEST(TraceClockTest, CounterReadingsFollowTheSystemClockOnceFitted) {
  if (TraceClock::Probe() != TraceClock::Source::kTsc) GTEST_SKIP() << "no usable time-stamp counter here";
  TraceClock clock(TraceClock::Source::kTsc);
  // Before the first fit the clock is clock_gettime itself.
  ExpectBracketed(clock, 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(350);
  int samples = 0;
  while (std::chrono::steady_clock::now() < until) {
    // 20 µs: the line's error after a 10 ms first fit is a few ns per ms; NTP's slew is far less.
    ExpectBracketed(clock, 20'000);
    ++samples;
    if (samples % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_TRUE(clock.fitted());
  EXPECT_GT(samples, 100);
}

TEST(TraceClockTest, ThreadsReadingWhileTheLineIsRefittedStayBracketed) {
  if (TraceClock::Probe() != TraceClock::Source::kTsc) GTEST_SKIP() << "no usable time-stamp counter here";
  TraceClock clock(TraceClock::Source::kTsc);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
      while (std::chrono::steady_clock::now() < until) {
        const int64_t before = RealtimeNs();
        const int64_t now = clock.Now();
        const int64_t after = RealtimeNs();
        if (now < before - 20'000 || now > after + 20'000) bad.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(clock.fitted());
}

// A fake counter at 3 GHz of the real clock, which a test can set back (a reset on resume).
std::atomic<int64_t> g_fake_origin{0};
uint64_t FakeTicks() { return static_cast<uint64_t>((RealtimeNs() - g_fake_origin.load()) * 3); }

TEST(TraceClockTest, ACounterThatWentBackIsNotTrustedUntilRefitted) {
  g_fake_origin = RealtimeNs() - 3'600'000'000'000;  // an hour of counting before the test
  TraceClock clock(TraceClock::Source::kTsc, &FakeTicks);
  auto run = [&](int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) ExpectBracketed(clock, 20'000);
  };
  run(150);
  EXPECT_TRUE(clock.fitted());
  g_fake_origin = RealtimeNs();  // the counter starts again from 0
  run(150);                      // every reading stays the real time, through the refit
  EXPECT_TRUE(clock.fitted());
}

TEST(TraceClockTest, AForkedChildReadsTheTimeToo) {
  TraceClock& clock = TraceClock::Get();
  ExpectBracketed(clock, 20'000);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int bad = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
    while (std::chrono::steady_clock::now() < until) {
      const int64_t before = RealtimeNs(), now = clock.Now(), after = RealtimeNs();
      bad += now < before - 20'000 || now > after + 20'000;
    }
    ::_exit(bad == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(TraceClockTest, EnvironmentChoosesClockGettime) {
  const char* old = std::getenv("DSDOCTOR_TRACE_CLOCK");
  std::string saved = old ? old : "";
  ::setenv("DSDOCTOR_TRACE_CLOCK", "realtime", 1);
  const char* why = nullptr;
  EXPECT_EQ(TraceClock::Probe(&why), TraceClock::Source::kRealtime);
  EXPECT_STREQ(why, "DSDOCTOR_TRACE_CLOCK=realtime");
  if (old)
    ::setenv("DSDOCTOR_TRACE_CLOCK", saved.c_str(), 1);
  else
    ::unsetenv("DSDOCTOR_TRACE_CLOCK");
}

}  // namespace
}  // namespace dsd::runtime
