#include "common/clock.h"

#include <thread>

namespace dsd {

void RealClock::Sleep(Duration d) { std::this_thread::sleep_for(d); }

RealClock& RealClock::Instance() {
  static RealClock clock;
  return clock;
}

// Starts at a fixed, recognisable instant so tests can assert exact timestamps.
FakeClock::FakeClock()
    : mono_(MonoTime(std::chrono::seconds(1000))),
      wall_(WallTime(std::chrono::seconds(1'800'000'000))) {}

MonoTime FakeClock::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mono_;
}

WallTime FakeClock::WallNow() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wall_;
}

void FakeClock::Advance(Duration d) {
  std::lock_guard<std::mutex> lock(mu_);
  mono_ += d;
  wall_ += std::chrono::duration_cast<WallTime::duration>(d);
}

}  // namespace dsd
