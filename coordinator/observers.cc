#include "coordinator/observers.h"

#include <cstring>

#include "common/run_files.h"
#include "diagnosis/report.h"

namespace dsd::coordinator {

void FanOut::OnLine(int rank, std::string_view line) {
  for (auto* o : observers_) o->OnLine(rank, line);
}
void FanOut::OnRankExit(const diagnosis::RankState& rank) {
  for (auto* o : observers_) o->OnRankExit(rank);
}
void FanOut::OnFinding(const diagnosis::Finding& finding) {
  for (auto* o : observers_) o->OnFinding(finding);
}
void FanOut::OnNotice(const std::string& text) {
  for (auto* o : observers_) o->OnNotice(text);
}
void FanOut::OnTick(const diagnosis::JobState& job, const diagnosis::Diagnosis& current, int64_t start_ns) {
  for (auto* o : observers_) o->OnTick(job, current, start_ns);
}
void FanOut::OnEnd(const JobResult& result, int64_t start_ns) {
  for (auto* o : observers_) o->OnEnd(result, start_ns);
}

void TextPrinter::OnLine(int rank, std::string_view line) {
  if (echo_) std::fprintf(out_, "[%d] %.*s\n", rank, static_cast<int>(line.size()), line.data());
}

void TextPrinter::OnRankExit(const diagnosis::RankState& r) {
  if (!echo_) return;
  if (r.signal)
    std::fprintf(out_, "dsdoctor: rank %d signal %d (%s)\n", r.rank, r.signal, strsignal(r.signal));
  else
    std::fprintf(out_, "dsdoctor: rank %d exit %d\n", r.rank, r.exit_code);
}

void TextPrinter::OnFinding(const diagnosis::Finding& f) {
  std::fprintf(out_, "dsdoctor: %s %s: %s\n", diagnosis::SeverityName(f.severity), f.code.c_str(), f.summary.c_str());
}

void TextPrinter::OnNotice(const std::string& text) { std::fprintf(out_, "dsdoctor: %s\n", text.c_str()); }

double StepRate(const diagnosis::JobState& job, int64_t now, int64_t start_ns) {
  uint64_t step = UINT64_MAX;
  for (const auto& r : job.ranks)
    if (r.has_trace) step = std::min<uint64_t>(step, r.step);
  return step != UINT64_MAX && now > start_ns ? step / ((now - start_ns) / 1e9) : 0;
}

LiveStream::LiveStream(std::unique_ptr<tui::Publisher> publisher, std::string job_text, int world, int64_t wall_ms)
    : publisher_(std::move(publisher)), job_text_(std::move(job_text)), new_lines_(world) {
  events_.push_back(tui::HeaderEvent(job_text_, world, wall_ms));
}

void LiveStream::OnLine(int r, std::string_view line) {
  tails_.Append(r, line);
  if (r < 0 || r >= static_cast<int>(new_lines_.size())) return;
  auto& lines = new_lines_[r];
  if (lines.size() < tui::kMaxLogLinesPerEvent)
    lines.emplace_back(line);
  else if (lines.size() == tui::kMaxLogLinesPerEvent)
    lines.push_back("[dsdoctor: more lines in this tick are in " + RankFileName(r, RankFile::kLog) + " only]");
}

void LiveStream::FlushLines(double t) {
  for (size_t r = 0; r < new_lines_.size(); ++r)
    if (!new_lines_[r].empty()) {
      events_.push_back(tui::LogEvent(t, static_cast<int>(r), new_lines_[r]));
      new_lines_[r].clear();
    }
}

void LiveStream::OnTick(const diagnosis::JobState& job, const diagnosis::Diagnosis& current, int64_t start_ns) {
  snapshot_ = tui::BuildSnapshot(job, current, {job_text_, start_ns, StepRate(job, job.now_ns, start_ns)});
  FlushLines(snapshot_.elapsed_s);
  events_.push_back(encoder_.Tick(snapshot_));
  if (publisher_) publisher_->Publish(events_);
  events_.clear();
}

void LiveStream::OnEnd(const JobResult& result, int64_t start_ns) {
  // The recording ends with what the report says (rank times as the report has them).
  tui::Snapshot snap = tui::BuildSnapshot(result.job, result.diagnosis,
                                          {job_text_, start_ns, StepRate(result.job, result.job.now_ns, start_ns)});
  snap.elapsed_s = snapshot_.elapsed_s > snap.elapsed_s ? snapshot_.elapsed_s : snap.elapsed_s;
  FlushLines(snap.elapsed_s);
  events_.push_back(encoder_.Tick(snap, /*last=*/true));
  events_.push_back(tui::EndEvent(snap.elapsed_s, result.exit_code));
  if (publisher_) publisher_->Publish(events_);
  events_.clear();
  publisher_.reset();
}

}  // namespace dsd::coordinator
