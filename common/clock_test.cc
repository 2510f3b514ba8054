#include "common/clock.h"

#include <gtest/gtest.h>

namespace dsd {
namespace {

TEST(ClockTest, FakeClockAdvancesOnlyWhenTold) {
  FakeClock clock;
  MonoTime t0 = clock.Now();
  WallTime w0 = clock.WallNow();
  EXPECT_EQ(clock.Now(), t0);
  clock.Sleep(std::chrono::seconds(5));
  EXPECT_EQ(clock.Now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(clock.WallNow() - w0, std::chrono::seconds(5));
  EXPECT_DOUBLE_EQ(ToMillis(clock.Now() - t0), 5000.0);
}

TEST(ClockTest, RealClockIsMonotonic) {
  auto& c = RealClock::Instance();
  MonoTime a = c.Now();
  c.Sleep(std::chrono::milliseconds(2));
  EXPECT_GT(c.Now(), a);
}

}  // namespace
}  // namespace dsd
