#include "runtime/trace_clock.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace dsd::runtime {
namespace {

constexpr int64_t kFirstFitNs = 10'000'000;  // the first line needs samples this far apart
constexpr int64_t kRefitNs = 100'000'000;
// A refit is due at most 100 ms of counting ahead (about 5e8 ticks at 5 GHz): one due this far ahead
// means the counter went back (reset on resume from suspend, a virtual machine restored).
constexpr uint64_t kCounterWentBack = 4'000'000'000;

uint64_t Ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

}  // namespace

int64_t RealtimeNs() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

TraceClock::Source TraceClock::Probe(const char** why) {
  const char* unused;
  if (!why) why = &unused;
  if (const char* env = std::getenv("DSDOCTOR_TRACE_CLOCK"); env && std::strcmp(env, "realtime") == 0) {
    *why = "DSDOCTOR_TRACE_CLOCK=realtime";
    return Source::kRealtime;
  }
#if defined(__x86_64__)
  unsigned a, b, c, d;
  // CPUID 0x80000007 EDX bit 8: the counter ticks at one rate in every P- and C-state.
  if (!__get_cpuid(0x80000007, &a, &b, &c, &d) || !(d & (1u << 8))) {
    *why = "the CPU's time-stamp counter is not invariant";
    return Source::kRealtime;
  }
  // The kernel keeps time with the counter only when it found it synchronised across CPUs.
  char text[32] = {};
  int fd = ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : ::read(fd, text, sizeof text - 1);
  if (fd >= 0) ::close(fd);
  if (n < 3 || std::strncmp(text, "tsc", 3) != 0 || (n > 3 && text[3] != '\n')) {
    *why = "the kernel's clocksource is not tsc";
    return Source::kRealtime;
  }
  *why = "";
  return Source::kTsc;
#else
  *why = "no time-stamp counter reader for this CPU";
  return Source::kRealtime;
#endif
}

TraceClock& TraceClock::Get() {
  static TraceClock* clock = [] {
    auto* c = new TraceClock(Probe());  // leaked: used by threads that outlive statics
    // A child forked while another thread refitted would keep fitting_ (or an odd version) for good.
    ::pthread_atfork(nullptr, nullptr, [] { Get().AfterFork(); });
    return c;
  }();
  return *clock;
}

void TraceClock::AfterFork() {
  if (const uint64_t v = version_.load(std::memory_order_relaxed); v & 1) {  // torn mid-refit
    mult_.store(0, std::memory_order_relaxed);
    version_.store(v + 1, std::memory_order_release);
  }
  anchor_ns_ = 0;
  anchor_tsc_ = 0;
  pending_mult_ = 0;
  next_fit_tsc_.store(0, std::memory_order_relaxed);
  fitting_.store(false, std::memory_order_release);
}

TraceClock::TraceClock(Source source, TickSource ticks) : source_(source), ticks_(ticks) {}

// The real counter is read inline (an indirect call was a tenth of a reading's cost).
uint64_t TraceClock::ReadTicks() const { return ticks_ ? ticks_() : Ticks(); }

int64_t TraceClock::Now() {
  if (source_ == Source::kRealtime) return RealtimeNs();
  const uint64_t tsc = ReadTicks();
  const uint64_t due = next_fit_tsc_.load(std::memory_order_relaxed);
  if (tsc >= due) {
    // Overdue: the line may miss a step of the clock. Another thread refitting it: the clock itself.
    if (fitting_.exchange(true, std::memory_order_acquire)) return RealtimeNs();
    Refit(tsc);
    fitting_.store(false, std::memory_order_release);
  } else if (due - tsc > kCounterWentBack) {
    next_fit_tsc_.store(0, std::memory_order_relaxed);  // the next reading refits (and drops the line)
    return RealtimeNs();
  }
  const uint64_t v = version_.load(std::memory_order_acquire);
  const uint64_t base_tsc = base_tsc_.load(std::memory_order_relaxed);
  const int64_t base_ns = base_ns_.load(std::memory_order_relaxed);
  const uint64_t mult = mult_.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if ((v & 1) || mult == 0 || version_.load(std::memory_order_relaxed) != v) return RealtimeNs();
  // Signed: another thread may have refitted from a sample taken after this thread's reading.
  const auto ticks = static_cast<int64_t>(tsc - base_tsc);
  return base_ns + static_cast<int64_t>((static_cast<__int128>(ticks) * mult) >> 32);
}

void TraceClock::Refit(uint64_t tsc) {
  // A pair read close together: the clock between two counter readings, the counter at their
  // middle; the tightest of a few tries, since a thread preempted between the reads skews its pair.
  uint64_t at = 0, width = UINT64_MAX;
  int64_t ns = 0;
  for (int i = 0; i < 4; ++i) {
    const uint64_t before = ReadTicks();
    const int64_t clock = RealtimeNs();
    const uint64_t after = ReadTicks();
    if (after - before < width) {
      width = after - before;
      at = before + width / 2;
      ns = clock;
    }
  }
  const int64_t since = ns - anchor_ns_;
  if (anchor_ns_ == 0 || since < 0 || at <= anchor_tsc_) {
    // The first sample; or the clock stepped back, or the counter did: the line no longer holds, and
    // readers use the clock itself until a new one is fitted.
    if (anchor_ns_ != 0) Publish(0, 0, 0);
    pending_mult_ = 0;
    anchor_tsc_ = at;
    anchor_ns_ = ns;
    next_fit_tsc_.store(tsc + 10'000'000, std::memory_order_relaxed);
    return;
  }
  if (since < kFirstFitNs) {  // not far enough apart yet: look again after ~10 ms of a 1–5 GHz counter
    next_fit_tsc_.store(tsc + 10'000'000, std::memory_order_relaxed);
    return;
  }
  uint64_t mult = (static_cast<unsigned __int128>(since) << 32) / (at - anchor_tsc_);
  // 0.1 to 20 ns per tick (10 GHz to 50 MHz); anything else is a clock step: sample afresh.
  if (mult < (uint64_t{1} << 32) / 10 || mult > (uint64_t{20} << 32)) {
    Publish(0, 0, 0);
    pending_mult_ = 0;
    anchor_tsc_ = at;
    anchor_ns_ = ns;
    next_fit_tsc_.store(tsc + 10'000'000, std::memory_order_relaxed);
    return;
  }
  // NTP slews the clock by at most 500 ppm: a slope further than 0.1 % from the current one means
  // the clock was stepped inside the interval. The line is moved to the new sample and keeps its
  // slope, unless two intervals in a row agree on the new one (the first fit was the one stepped).
  if (const uint64_t current = mult_.load(std::memory_order_relaxed); current != 0) {
    auto near = [](uint64_t x, uint64_t y) { return (x > y ? x - y : y - x) <= y / 1000; };
    if (!near(mult, current)) {
      const bool confirmed = pending_mult_ != 0 && near(mult, pending_mult_);
      pending_mult_ = confirmed ? 0 : mult;
      if (!confirmed) mult = current;
    } else {
      pending_mult_ = 0;
    }
  }
  Publish(at, ns, mult);
  anchor_tsc_ = at;
  anchor_ns_ = ns;
  next_fit_tsc_.store(at + ((static_cast<unsigned __int128>(kRefitNs) << 32) / mult), std::memory_order_relaxed);
}

void TraceClock::Publish(uint64_t base_tsc, int64_t base_ns, uint64_t mult) {
  const uint64_t v = version_.load(std::memory_order_relaxed);
  version_.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  base_tsc_.store(base_tsc, std::memory_order_relaxed);
  base_ns_.store(base_ns, std::memory_order_relaxed);
  mult_.store(mult, std::memory_order_relaxed);
  version_.store(v + 2, std::memory_order_release);
}

}  // namespace dsd::runtime
