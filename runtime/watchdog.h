// The collective watchdog of a rank: a thread that refreshes the trace's heartbeat and, when the
// call in flight (a collective, barrier or p2p) has been running longer than the timeout, logs one
// line naming rank, op, seq, callsite and age, marks the trace (watchdog flag, record index, last
// error) and applies the policy: warn (keep waiting) or abort (end the rank with SIGABRT, as
// torch's NCCL watchdog does). It fires once per call.
// Thread-safe: Configure/Stop from any thread; the check runs on the watchdog's own thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "runtime/config.h"
#include "runtime/trace.h"

namespace dsd::runtime {

struct WatchdogOptions {
  Duration timeout = std::chrono::seconds(600);  // zero disables
  WatchdogPolicy policy = WatchdogPolicy::kWarn;
  Duration tick = std::chrono::milliseconds(100);
};

class Watchdog {
 public:
  // `abort_action` runs after the abort line is logged; the default is std::abort().
  Watchdog(std::shared_ptr<TraceWriter> trace, int rank, std::function<void()> abort_action = {});
  ~Watchdog();
  void Configure(const WatchdogOptions& options);
  WatchdogOptions options() const;
  void Start();
  void Stop();
  // One check at `now_ns` (CLOCK_REALTIME ns): the line it logged, if it fired. The thread calls it
  // every tick; tests call it directly.
  std::optional<std::string> CheckOnce(int64_t now_ns);

 private:
  void Loop();

  std::shared_ptr<TraceWriter> trace_;
  int rank_;
  std::function<void()> abort_action_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  WatchdogOptions options_;
  bool stop_ = false;
  uint64_t fired_plus1_ = 0;  // index + 1 of the last record fired on
  std::thread thread_;
};

// The watchdog's line for a call in flight, e.g. "rank 1: all_reduce#42 float32 x1024 (4 KiB) sum
// @engine.step [started] in flight for 5.0 s (timeout 5.0 s); policy warn".
std::string WatchdogMessage(int rank, const TraceRecord& r, double age_s, double timeout_s, WatchdogPolicy policy);

}  // namespace dsd::runtime
