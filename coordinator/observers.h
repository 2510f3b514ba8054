// The JobObservers of `dsdoctor run`: the text printer (the ranks' lines with "[r] ", findings and
// notices on stdout) and the live stream (the event stream recorded to events.jsonl and served to
// `tui --attach` viewers, plus the log tails and snapshot the built-in TUI draws). Several observers
// are chained with FanOut. Not thread-safe: called from the coordinator's thread.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/job_coordinator.h"
#include "tui/live.h"
#include "tui/model.h"
#include "tui/stream.h"

namespace dsd::coordinator {

class FanOut final : public JobObserver {
 public:
  explicit FanOut(std::vector<JobObserver*> observers) : observers_(std::move(observers)) {}
  void OnLine(int rank, std::string_view line) override;
  void OnRankExit(const diagnosis::RankState& rank) override;
  void OnFinding(const diagnosis::Finding& finding) override;
  void OnNotice(const std::string& text) override;
  void OnTick(const diagnosis::JobState& job, const diagnosis::Diagnosis& current, int64_t start_ns) override;
  void OnEnd(const JobResult& result, int64_t start_ns) override;

 private:
  std::vector<JobObserver*> observers_;
};

// Prints to `out` (borrowed): with echo, every line as "[r] line" and every exit; always the
// findings and notices as "dsdoctor: …".
class TextPrinter final : public JobObserver {
 public:
  TextPrinter(std::FILE* out, bool echo) : out_(out), echo_(echo) {}
  void OnLine(int rank, std::string_view line) override;
  void OnRankExit(const diagnosis::RankState& rank) override;
  void OnFinding(const diagnosis::Finding& finding) override;
  void OnNotice(const std::string& text) override;
  void OnTick(const diagnosis::JobState&, const diagnosis::Diagnosis&, int64_t) override { std::fflush(out_); }

 private:
  std::FILE* out_;
  bool echo_;
};

// Steps per second of the slowest traced rank since the start (0 before any trace).
double StepRate(const diagnosis::JobState& job, int64_t now_ns, int64_t start_ns);

// The live view's event stream (docs/tui.md): a header, each tick's new lines and snapshot delta,
// the end. `publisher` (owned) records and serves it.
class LiveStream final : public JobObserver {
 public:
  LiveStream(std::unique_ptr<tui::Publisher> publisher, std::string job_text, int world, int64_t wall_ms);
  void OnLine(int rank, std::string_view line) override;
  void OnTick(const diagnosis::JobState& job, const diagnosis::Diagnosis& current, int64_t start_ns) override;
  void OnEnd(const JobResult& result, int64_t start_ns) override;

  const tui::LogTails& tails() const { return tails_; }
  const tui::Snapshot& snapshot() const { return snapshot_; }  // the newest tick's
  tui::Publisher* publisher() const { return publisher_.get(); }

 private:
  void FlushLines(double t);

  std::unique_ptr<tui::Publisher> publisher_;
  std::string job_text_;
  tui::StreamEncoder encoder_;
  tui::LogTails tails_;
  tui::Snapshot snapshot_;
  std::vector<std::vector<std::string>> new_lines_;
  std::vector<nlohmann::json> events_;  // this tick's
};

}  // namespace dsd::coordinator
