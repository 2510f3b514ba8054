#include "runtime/watchdog.h"

#include <cstdlib>

#include <fmt/format.h>

#include "common/log.h"

namespace dsd::runtime {

std::string WatchdogMessage(int rank, const TraceRecord& r, double age_s, double timeout_s, WatchdogPolicy policy) {
  return fmt::format("watchdog: rank {}: {} in flight for {:.1f} s (timeout {:.1f} s); policy {}", rank,
                     DescribeRecord(r), age_s, timeout_s, WatchdogPolicyName(policy));
}

Watchdog::Watchdog(std::shared_ptr<TraceWriter> trace, int rank, std::function<void()> abort_action)
    : trace_(std::move(trace)), rank_(rank), abort_action_(std::move(abort_action)) {
  if (!abort_action_) abort_action_ = [] { std::abort(); };
}

Watchdog::~Watchdog() { Stop(); }

void Watchdog::Configure(const WatchdogOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  options_ = options;
  cv_.notify_all();
}

WatchdogOptions Watchdog::options() const {
  std::lock_guard<std::mutex> lock(mu_);
  return options_;
}

void Watchdog::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Watchdog::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    Duration tick = options_.tick;
    lock.unlock();
    trace_->Heartbeat();
    CheckOnce(TraceNowNs());
    lock.lock();
    cv_.wait_for(lock, tick, [&] { return stop_; });
  }
}

std::optional<std::string> Watchdog::CheckOnce(int64_t now_ns) {
  WatchdogOptions o;
  {
    std::lock_guard<std::mutex> lock(mu_);
    o = options_;
  }
  if (o.timeout <= Duration::zero()) return std::nullopt;
  auto current = trace_->Current();
  if (!current) return std::nullopt;
  const TraceRecord& r = current->record;
  double age_s = static_cast<double>(now_ns - r.started_ns) / 1e9;
  double timeout_s = std::chrono::duration<double>(o.timeout).count();
  if (age_s < timeout_s) return std::nullopt;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fired_plus1_ == r.index + 1) return std::nullopt;
    fired_plus1_ = r.index + 1;
  }
  std::string line = WatchdogMessage(rank_, r, age_s, timeout_s, o.policy);
  trace_->MarkWatchdog(r.index);
  trace_->SetLastError(line);
  auto log = log::Get("runtime");
  log->error("{}", line);
  if (o.policy == WatchdogPolicy::kAbort) {
    trace_->SetFlags(kTraceFlagAborted);
    log->flush();
    abort_action_();
  }
  return line;
}

}  // namespace dsd::runtime
