// The trace's time base: CLOCK_REALTIME in nanoseconds, read cheaply.
//
// A traced call reads the clock twice (begin, end), and on virtual machines the vDSO's
// clock_gettime costs ~23 ns, a third of a record's cost. Where the kernel itself keeps time with
// the CPU's time-stamp counter (clocksource "tsc", invariant), TraceClock reads the counter (~8 ns)
// and scales it to CLOCK_REALTIME with a line fitted between two clock_gettime samples, refitted
// every 100 ms by whichever caller passes that mark.
// - Error against clock_gettime: the kernel's own NTP slew over one interval (at most 50 µs at NTP's
//   500 ppm limit, a few ns usually).
// - A step of the system clock is followed within 100 ms (a stepped interval keeps the old slope).
// - A counter that went back (reset on resume, a restored virtual machine), a clock stepped back and
//   a refit overdue while another thread does it: clock_gettime serves until a line holds again.
// - A forked child starts afresh (no refit in progress, no torn line).
// Elsewhere (another clocksource, other CPUs, DSDOCTOR_TRACE_CLOCK=realtime) it is
// clock_gettime(CLOCK_REALTIME).
//
// Thread-safety: Now() is safe from any thread; the fit is published under a sequence lock and a
// reader that races a refit reads clock_gettime instead.
#pragma once

#include <atomic>
#include <cstdint>

namespace dsd::runtime {

class TraceClock {
 public:
  enum class Source { kRealtime, kTsc };

  // The process's clock (made on first use; the source is chosen then).
  static TraceClock& Get();

  // Which source `Get()` would use on this machine, and why not the counter when it would not.
  static Source Probe(const char** why = nullptr);

  // The counter read (tests pass a fake one; the real one is the CPU's time-stamp counter).
  using TickSource = uint64_t (*)();
  explicit TraceClock(Source source, TickSource ticks = nullptr);
  TraceClock(const TraceClock&) = delete;
  TraceClock& operator=(const TraceClock&) = delete;

  int64_t Now();
  Source source() const { return source_; }
  // Whether counter readings are scaled yet (the first fit needs two samples 10 ms apart).
  bool fitted() const { return mult_.load(std::memory_order_acquire) != 0; }

 private:
  void Refit(uint64_t tsc);
  // Publishes a line (mult 0: none; readers use clock_gettime) under the sequence lock.
  void Publish(uint64_t base_tsc, int64_t base_ns, uint64_t mult);
  // In a forked child: no refit in progress, no torn line.
  void AfterFork();

  const Source source_;
  uint64_t ReadTicks() const;

  const TickSource ticks_;            // nullptr: the CPU's counter
  std::atomic<uint64_t> version_{0};  // sequence lock of base_tsc_, base_ns_, mult_: odd while refitting
  std::atomic<uint64_t> base_tsc_{0};
  std::atomic<int64_t> base_ns_{0};
  std::atomic<uint64_t> mult_{0};  // nanoseconds per tick << 32; 0: not fitted yet
  std::atomic<uint64_t> next_fit_tsc_{0};
  std::atomic<bool> fitting_{false};  // one refitting thread at a time
  uint64_t anchor_tsc_ = 0;           // the previous sample (fitting_ holder only)
  int64_t anchor_ns_ = 0;
  uint64_t pending_mult_ = 0;  // a slope one interval disagreed on (fitting_ holder only)
};

// clock_gettime(CLOCK_REALTIME) in nanoseconds.
int64_t RealtimeNs();

}  // namespace dsd::runtime
