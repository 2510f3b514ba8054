#include "runtime/trace_clock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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
