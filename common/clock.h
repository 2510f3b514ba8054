// Clock: the one way code reads time or sleeps, so tests can drive time with FakeClock.
// RealClock is stateless and thread-safe. FakeClock is thread-safe (its time is guarded by a
// mutex); Sleep on a FakeClock advances its time instead of blocking.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace dsd {

using Duration = std::chrono::nanoseconds;
using MonoTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual MonoTime Now() const = 0;       // monotonic: for timeouts and ages
  virtual WallTime WallNow() const = 0;   // calendar: for timestamps shown to people
  virtual void Sleep(Duration d) = 0;
};

class RealClock final : public Clock {
 public:
  MonoTime Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
  void Sleep(Duration d) override;
  // A process-wide instance; RealClock has no state, so sharing it is safe.
  static RealClock& Instance();
};

class FakeClock final : public Clock {
 public:
  FakeClock();
  MonoTime Now() const override;
  WallTime WallNow() const override;
  void Sleep(Duration d) override { Advance(d); }
  void Advance(Duration d);

 private:
  mutable std::mutex mu_;
  MonoTime mono_;
  WallTime wall_;
};

// Milliseconds as a double, for reports.
inline double ToMillis(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace dsd
