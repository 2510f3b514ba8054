#include "coordinator/job_coordinator.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "collectors/rank_monitor.h"
#include "collectors/run_dir.h"
#include "collectors/stack.h"
#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"
#include "diagnosis/engine.h"
#include "diagnosis/report.h"
#include "runtime/trace.h"

namespace dsd::coordinator {
namespace {

constexpr int kExitProblems = 1;  // docs/run.md "Exit code"
// Flight Recorder incidents one run asks for at most (each dump is a few MB per rank).
constexpr int kMaxFlightRecorderIncidents = 3;

std::string FindingKey(const diagnosis::Finding& f) { return f.code + ":" + diagnosis::FormatRanks(f.ranks); }

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

std::vector<int> MovedSince(const diagnosis::JobState& before, const diagnosis::JobState& after, bool cpu) {
  auto key = [](const diagnosis::RankState& r) {
    std::string k = diagnosis::RankStatusName(r.status);
    if (r.last)
      k += "|" + std::to_string(r.last->comm) + ":" + r.last->op + "#" + std::to_string(r.last->seq) + ":" +
           r.last->state;
    if (r.in_flight) k += "|" + r.in_flight->op + "#" + std::to_string(r.in_flight->seq);
    return k + "|" + std::to_string(r.step) + "|" + std::to_string(r.recent.size());
  };
  std::vector<int> moved;
  for (size_t r = 0; r < before.ranks.size() && r < after.ranks.size(); ++r) {
    const auto& b = before.ranks[r];
    const auto& a = after.ranks[r];
    bool cpu_grew = cpu && a.status == diagnosis::RankStatus::kRunning && a.proc.valid && b.proc.valid &&
                    !(a.in_flight && a.in_flight->blocking()) && a.proc.flat_for_s + 1e-9 < b.proc.flat_for_s;
    if (cpu_grew || key(b) != key(a)) moved.push_back(static_cast<int>(r));
  }
  return moved;
}

JobCoordinator::JobCoordinator(JobOptions options, const std::vector<RankLaunch>& ranks, RankSource* source,
                               Clock* clock, JobObserver* observer)
    : options_(std::move(options)), source_(source), clock_(clock), observer_(observer) {
  const int world = static_cast<int>(ranks.size());
  job_.world_size = world;
  job_.stall_after_s = options_.timeout_s;
  job_.hang_after_s = options_.hang_after_s;
  job_.launcher_teardown = options_.launcher_teardown;
  job_.ranks.resize(world);
  for (const auto& l : ranks) {
    auto& r = job_.ranks[l.rank];
    r.rank = l.rank;
    r.node = l.node;
    r.local_rank = l.local_rank;
    r.status = diagnosis::RankStatus::kRunning;
  }
  for (int r = 0; r < world; ++r) classifiers_.emplace_back(r);
  partial_.resize(world);
  fresh_.resize(world);
  start_ns_ = NowNs();
}

int64_t JobCoordinator::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_->WallNow().time_since_epoch()).count();
}

void JobCoordinator::FeedLogs(bool final) {
  for (size_t r = 0; r < partial_.size(); ++r) {
    partial_[r] += fresh_[r];
    fresh_[r].clear();
    size_t start = 0;
    for (size_t nl; (nl = partial_[r].find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(partial_[r].data() + start, nl - start);
      observer_->OnLine(static_cast<int>(r), collectors::SanitizeForStream(line));  // for a terminal and JSON
      for (auto& e : classifiers_[r].Feed(line)) job_.events.push_back(std::move(e));
    }
    partial_[r].erase(0, start);
    if (final) {
      if (!partial_[r].empty()) {
        observer_->OnLine(static_cast<int>(r), collectors::SanitizeForStream(partial_[r]));
        for (auto& e : classifiers_[r].Feed(partial_[r])) job_.events.push_back(std::move(e));
        partial_[r].clear();
      }
      for (auto& e : classifiers_[r].Finish()) job_.events.push_back(std::move(e));
    }
  }
}

void JobCoordinator::StopAll(int sig) {
  if (!stopped_by_us_) {
    stop_ns_ = NowNs();
    at_hang_ = job_.ranks;  // the last states before our signal: what the final report describes
    hang_ns_ = stop_ns_;
  }
  stopped_by_us_ = true;
  source_->Signal(sig);
}

void JobCoordinator::RequestStop(const std::string& reason, int interrupt_signal) {
  if (interrupt_signal) interrupt_signal_ = interrupt_signal;
  if (stop_deadline_ns_) return;
  observer_->OnNotice(interrupt_signal ? std::string(strsignal(interrupt_signal)) + ": stopping every rank"
                                       : "stopping every rank (" + reason + ")");
  StopAll(SIGTERM);
  stop_deadline_ns_ = NowNs() + options_.stop_escalation.count();
}

void JobCoordinator::NoteInterrupt(int interrupt_signal) {
  if (interrupt_signal) interrupt_signal_ = interrupt_signal;
}

void JobCoordinator::Announce(const diagnosis::Diagnosis& d) {
  for (const auto& f : d.findings)
    if (announced_.insert(FindingKey(f)).second) observer_->OnFinding(f);
}

// Which agents are lost, from the source's view of them: their running ranks become unobserved
// (their last state stays, no exit is assumed), and an agent that comes back is remembered.
void JobCoordinator::UpdateAgents() {
  std::vector<diagnosis::AgentLoss> lost;
  for (const auto& h : source_->Health()) {
    bool is_lost = h.lost;
    diagnosis::AgentLoss loss{
        h.node, {}, h.connected ? "no frame from the agent for " + Seconds(h.silent_s) : h.why, h.silent_s, false};
    for (int r : h.ranks) {
      if (r < 0 || r >= static_cast<int>(job_.ranks.size())) continue;
      auto& rank = job_.ranks[r];
      rank.unobserved = is_lost && rank.status == diagnosis::RankStatus::kRunning;
      if (rank.unobserved) loss.ranks.push_back(r);
      // A rank dies with its agent (PR_SET_PDEATHSIG): once the agent's address refuses
      // connections, nothing of the node's runs any more. A link that merely broke is a partition
      // that may heal: the agent keeps its ranks running and the source connects again.
      if (rank.unobserved && h.gone) gone_.insert(r);
    }
    auto was = agent_gaps_.find(h.node);
    if (is_lost) {
      if (was == agent_gaps_.end()) {
        observer_->OnNotice("agent on " + h.node + " lost (" + loss.why + "); its ranks are no longer observed");
        was = agent_gaps_.emplace(h.node, 0).first;
      }
      was->second = std::max(was->second, h.silent_s);
      lost.push_back(std::move(loss));
    } else if (was != agent_gaps_.end()) {
      observer_->OnNotice("agent on " + h.node + " is back after " + Seconds(was->second));
      recovered_.push_back({h.node, h.ranks, "silent for " + Seconds(was->second) + ", then back", was->second, true});
      agent_gaps_.erase(was);
    }
  }
  job_.agents_lost = recovered_;
  job_.agents_lost.insert(job_.agents_lost.end(), lost.begin(), lost.end());
  job_.log_dirs = source_->LogDirs();
}

void JobCoordinator::TakeStacks(const diagnosis::Diagnosis& d, int64_t now) {
  // One stack per class of hung ranks (a few attaches, not one per rank). Untraced ranks look
  // alike from outside, so each gets its own stack (up to 64); traced ranks are told apart by
  // their calls, so one stack per class (up to 8) is enough.
  std::vector<int> reps;
  std::map<int, std::vector<int>> class_of;  // representative → its class
  for (const auto& cl : d.classes) {
    for (int r : cl.ranks) {
      if (job_.ranks[r].status != diagnosis::RankStatus::kRunning || job_.ranks[r].unobserved) continue;
      bool own = !job_.ranks[r].has_trace;
      if (own ? reps.size() >= 64 : (class_of.size() >= 8 || r != cl.ranks.front())) continue;
      reps.push_back(r);
      class_of[r] = own ? std::vector<int>{r} : cl.ranks;
    }
  }
  const diagnosis::JobState before_job = job_;
  // PyTorch's own record of every rank's collectives, taken at the same moment on every rank (torch
  // 2.x ranks; others have no recorder and write nothing). A few incidents per run: the first
  // suspicion, and the proof if it comes later.
  int incident = 0;
  if (options_.flight_recorder && (d.hang || d.suspect) && flight_recorder_incidents_ < kMaxFlightRecorderIncidents)
    incident = ++flight_recorder_incidents_;
  auto stacks = source_->Stacks(reps, incident);
  if (incident > 0) {
    std::error_code ec;
    const std::string dir = options_.run_dir.FlightRecorderIncident(incident);
    size_t dumps = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      dumps += e.path().filename().string().rfind(RunDir::kFlightRecorderDumpPrefix, 0) == 0;
    if (dumps > 0)
      observer_->OnNotice("PyTorch Flight Recorder: " + std::to_string(dumps) + " of " +
                          std::to_string(job_.ranks.size()) + " ranks dumped their collectives into " + dir +
                          " (dsdoctor analyze " + dir + ")");
  }
  for (const auto& [rep, members] : class_of)
    if (auto it = stacks.find(rep); it != stacks.end())
      for (int r : members) job_.ranks[r].stack = it->second;
  if (options_.python && !said_no_py_spy_ && !collectors::PySpyAvailable()) {
    said_no_py_spy_ = true;
    observer_->OnNotice(
        "py-spy is not installed, so Python ranks show native stacks only (no Python frames): "
        "`pip install py-spy`, or set DSDOCTOR_PY_SPY to its path");
  }
  // Samples that arrived while the stacks were taken (another node's agent may lag a tick), and
  // which agents were lost meanwhile: a lost agent's ranks are never proof of a hang.
  source_->Tick(NowNs(), job_.ranks, fresh_);
  FeedLogs(false);
  UpdateAgents();
  // Before acting, check that nothing moved while we looked: a new or finished call, CPU growth
  // anywhere in a rank's process tree. A rank that moved is not hung. CPU growth matters to
  // proofs that rest on stacks; trace proofs only need the records still.
  bool trace_proof_only = d.hang && std::none_of(d.findings.begin(), d.findings.end(), [](const diagnosis::Finding& f) {
                            return f.proof == diagnosis::proof::kStacks || f.proof == diagnosis::proof::kHeuristic;
                          });
  std::vector<int> moved = MovedSince(before_job, job_, /*cpu=*/!trace_proof_only);
  for (int r : moved) job_.ranks[r].stack.clear();
  int64_t t = NowNs();
  job_.now_ns = t;
  // The stacks may say more (Python ranks inside different collectives, a blocked rank's frame).
  diagnosis::Diagnosis with_stacks = diagnosis::Diagnose(job_);
  Announce(with_stacks);
  current_ = with_stacks;
  stack_job_ = job_;
  if (with_stacks.hang && moved.empty() && source_->CaughtUp()) {
    hang_reported_ = true;
    hang_ns_ = t;
    at_hang_ = job_.ranks;
    hang_diagnosis_ = with_stacks;
    WriteManifest(job_, with_stacks, {});
    observer_->OnNotice(options_.stop_on_hang ? "the job is hung; stopping every rank (report below)"
                                              : "the job is hung; watching on (--on-hang wait)");
    if (options_.stop_on_hang) {
      StopAll(SIGTERM);
      stop_deadline_ns_ = now + options_.stop_escalation.count();
    }
    return;
  }
  if (!moved.empty()) {
    log::Get("run")->debug("{} moved while their stacks were taken: not hung; watching on",
                           diagnosis::FormatRanks(moved));
  } else if (!suspect_said_ && with_stacks.suspect) {
    observer_->OnNotice("a rank may be stuck (a suspicion, not proof: the job goes on)");
    suspect_said_ = true;
  }
  // Look again in a while, sooner when something moved.
  next_stacks_ns_ = NowNs() + (moved.empty() ? 15'000'000'000LL : 3'000'000'000LL);
}

bool JobCoordinator::Tick() {
  int64_t now = NowNs();
  job_.now_ns = now;
  std::vector<diagnosis::RankStatus> before;
  for (const auto& r : job_.ranks) before.push_back(r.status);
  source_->Tick(now, job_.ranks, fresh_);
  FeedLogs(false);
  UpdateAgents();
  bool any_running = false, lost_running = false;
  const bool starts_pending = source_->StartsPending();
  for (auto& r : job_.ranks) {
    if (before[r.rank] == diagnosis::RankStatus::kRunning && r.status == diagnosis::RankStatus::kExited)
      observer_->OnRankExit(r);
    bool running = r.status == diagnosis::RankStatus::kRunning;
    any_running |= (running && !r.unobserved) || (r.status == diagnosis::RankStatus::kNotStarted && starts_pending);
    lost_running |= running && r.unobserved && !gone_.count(r.rank);
  }
  if (!any_running) {
    // Every rank we can see has exited. A lost agent's ranks may still come back (a partition
    // heals); they get lost_give_up before the job is declared over without them.
    if (!lost_running) return false;
    if (!all_observed_exited_ns_) all_observed_exited_ns_ = now;
    if (now - all_observed_exited_ns_ > options_.lost_give_up.count()) return false;
  } else {
    all_observed_exited_ns_ = 0;
  }
  // Like torchrun and the deepspeed launcher, a failed rank ends the job: the others are stopped
  // once they had fail_fast_grace_s to print their own errors (their tracebacks are evidence). A
  // node whose agent is gone lost its ranks with it, which fails the job the same way (with no
  // exit code made up for them).
  if (!stopped_by_us_ && !first_failure_ns_) {
    for (const auto& r : job_.ranks)
      if (r.status == diagnosis::RankStatus::kExited && (r.signal || r.exit_code)) first_failure_ns_ = now;
    if (!gone_.empty()) first_failure_ns_ = now;
  }
  if (!stopped_by_us_ && first_failure_ns_ &&
      now - first_failure_ns_ > static_cast<int64_t>(options_.fail_fast_grace_s * 1e9) && !stop_deadline_ns_) {
    observer_->OnNotice(std::string(gone_.empty() ? "a rank failed " : "a node's agent was lost with its ranks ") +
                        Seconds(options_.fail_fast_grace_s) + " ago; stopping the remaining ranks (as torchrun does)");
    StopAll(SIGTERM);
    stop_reason_ = "failed";
    stop_deadline_ns_ = now + options_.stop_escalation.count();
  }
  if (stop_deadline_ns_ && now > stop_deadline_ns_) {
    StopAll(SIGKILL);
    stop_deadline_ns_ = now + options_.stop_escalation.count();
  }
  if (stopped_by_us_) {
    current_ = diagnosis::Diagnose(job_);  // ranks leaving
  } else if (!source_->CaughtUp()) {
    // Stale samples (we were stopped or slow): show them, but diagnose nothing until every agent
    // is heard from live again.
  } else {
    diagnosis::Diagnosis d = diagnosis::Diagnose(job_);
    current_ = d;
    Announce(d);
    // Stacks are taken on a proven hang (for the report) and on a suspicion (they may prove it,
    // or show the rank is busy elsewhere); a suspicion never stops the job by itself.
    if ((d.hang || d.suspect || d.look) && !hang_reported_ && now >= next_stacks_ns_) TakeStacks(d, now);
    // Stacks describe a rank only while it stays where it was.
    if (!stack_job_.ranks.empty())
      for (int r : MovedSince(stack_job_, job_, /*cpu=*/true)) job_.ranks[r].stack.clear();
    RememberLive(current_, NowNs());
  }
  observer_->OnTick(job_, current_, start_ns_);
  return true;
}

// How long a live finding must have lasted to stay in the record once it cleared.
constexpr int64_t kMinPastNs = 3'000'000'000;
// Ticks are 200 ms apart: a longer gap between two sightings breaks a finding's lasting.
constexpr int64_t kMaxSightingGapNs = 2'000'000'000;

void JobCoordinator::RememberLive(const diagnosis::Diagnosis& d, int64_t now) {
  std::set<std::string> keys;
  bool error = false;
  for (const auto& f : d.findings) {
    std::string key = FindingKey(f);
    if (past_keys_.count(key)) continue;  // a past one, or the same again: it stays as it was kept
    keys.insert(key);
    error |= f.severity == diagnosis::Severity::kError;
    auto [it, fresh] = live_.try_emplace(key);
    // Seen again after a gap (the coordinator was stopped, or stale samples were not diagnosed): a new
    // sighting, not one that lasted through the gap.
    if (fresh || now - it->second.last_ns > kMaxSightingGapNs) it->second.first_ns = now;
    it->second.finding = f;
    it->second.last_ns = now;
  }
  if (error) return;  // a suspicion that gave way to a proof did not clear: the proof says more
  for (auto it = live_.begin(); it != live_.end();) {
    if (keys.count(it->first)) {
      ++it;
      continue;
    }
    // A suspicion that cleared within a few seconds (ranks asleep between short steps at start-up)
    // is noise; one the user sat through stays.
    if (it->second.last_ns - it->second.first_ns < kMinPastNs) {
      it = live_.erase(it);
      continue;
    }
    diagnosis::Finding f = it->second.finding;
    f.severity = diagnosis::Severity::kWarning;
    f.summary += " (seen live for " + Seconds((it->second.last_ns - it->second.first_ns) / 1e9) +
                 ", then it cleared and the job went on)";
    f.evidence.push_back("seen live from " + Seconds((it->second.first_ns - start_ns_) / 1e9) + " to " +
                         Seconds((it->second.last_ns - start_ns_) / 1e9) + " after the start");
    job_.past.push_back(std::move(f));
    past_keys_.insert(it->first);
    it = live_.erase(it);
  }
}

JobResult JobCoordinator::Finish() {
  // Final report: everything the logs said, through to their last line, and whole trace rings (a
  // completed mismatch, such as a different reduce op, may lie far back).
  source_->Tick(NowNs(), job_.ranks, fresh_);
  FeedLogs(true);
  UpdateAgents();
  // The rings are in the run dir on every node's behalf: written there by the ranks, or by the
  // coordinator from what a node that does not share it sent (RunDirMirror). A traced rank whose
  // ring cannot be read is said in the report: its findings rest on less than the others'.
  if (!options_.run_dir.empty())
    for (auto& r : job_.ranks) {
      if (r.unobserved) continue;
      auto t = runtime::ReadTrace(options_.run_dir.RankTrace(r.rank));
      if (t.ok())
        collectors::ApplyTrace(*t, &r, t->records.size());
      else if (r.has_trace)
        job_.evidence_missing.push_back(RankFileName(r.rank, RankFile::kTrace) + ": " + t.status().message() +
                                        " (the final report has only the last 64 records of rank " +
                                        std::to_string(r.rank) + ")");
    }
  // What the tool that started the agents said (srun: a step killed for memory, a task killed).
  if (!options_.run_dir.empty()) {
    const std::string launcher_log = options_.run_dir.LauncherLog();
    if (struct stat st; ::stat(launcher_log.c_str(), &st) == 0 && st.st_size > 0)
      if (Status s = collectors::AddCombinedLogs({launcher_log}, &job_, nullptr); !s.ok())
        job_.evidence_missing.push_back(launcher_log + ": " + s.message());
  }
  job_.now_ns = NowNs();
  job_.job_ended = true;
  // The job's code is the first failure's (torchrun's "first observed failure"). Nodes report
  // exits on their own ticks, so a rank killed by a signal within 0.5 s of the first exit counts
  // as first: its peers failed because it vanished (SIGPIPE is such a peer: it wrote to the dead
  // rank's connection). Exits we caused by stopping, and those of a launcher that tore the job down
  // after a failure (mpirun's SIGTERM and SIGKILL: diagnosis::EndedByTeardown), do not count.
  int job_code = 0;
  {
    const diagnosis::RankState* first = nullptr;
    for (const auto& r : job_.ranks) {
      bool failed = r.status == diagnosis::RankStatus::kExited && (r.signal || r.exit_code) &&
                    (!stopped_by_us_ || r.exit_ns < stop_ns_) && !diagnosis::EndedByTeardown(job_, r);
      if (failed && (!first || r.exit_ns < first->exit_ns)) first = &r;
    }
    if (first) {
      for (const auto& r : job_.ranks)
        if (r.status == diagnosis::RankStatus::kExited && r.signal && r.signal != SIGPIPE &&
            (!first->signal || first->signal == SIGPIPE) && r.exit_ns <= first->exit_ns + 500'000'000LL &&
            (!stopped_by_us_ || r.exit_ns < stop_ns_) && !diagnosis::EndedByTeardown(job_, r))
          first = &r;
      job_code = first->signal ? 128 + first->signal : first->exit_code;
    }
  }
  if (stopped_by_us_ && !at_hang_.empty()) {
    // We ended the hung ranks: diagnose them as they were, not the exits we caused.
    for (auto& r : job_.ranks)
      if (at_hang_[r.rank].status == diagnosis::RankStatus::kRunning) {
        bool unobserved = r.unobserved;
        r = at_hang_[r.rank];
        r.unobserved = unobserved;
      }
    job_.now_ns = hang_ns_;
    job_.job_ended = false;
    // A launcher's line about the exit of a rank we stopped ("mpirun noticed that process rank 3
    // … exited on signal 15") tells of our stop, not of a failure.
    std::erase_if(job_.events, [&](const diagnosis::LogEvent& e) {
      return e.code == diagnosis::codes::kRankExited && e.subject_rank >= 0 &&
             static_cast<size_t>(e.subject_rank) < at_hang_.size() &&
             at_hang_[e.subject_rank].status == diagnosis::RankStatus::kRunning;
    });
  }
  diagnosis::Diagnosis final_d = diagnosis::Diagnose(job_);
  if (hang_reported_) {
    // The report says what the live output said: the proven findings we acted on stay, even if
    // the final look (stacks gone, logs of the ranks' ends) would rank them differently.
    std::set<std::string> have;
    for (const auto& f : final_d.findings) have.insert(FindingKey(f));
    for (const auto& f : hang_diagnosis_.findings)
      if (!have.count(FindingKey(f)) && f.proof != diagnosis::proof::kHeuristic) final_d.findings.push_back(f);
    final_d.hang = true;
    diagnosis::SortBySeverity(final_d.findings);
  }
  JobResult result;
  if (stopped_by_us_)
    result.stop = {true,
                   interrupt_signal_       ? "interrupt"
                   : hang_reported_        ? "hang"
                   : !stop_reason_.empty() ? stop_reason_
                                           : "viewer",
                   stop_ns_};
  WriteManifest(job_, final_d, result.stop);
  // Ranks whose agent never came back ended we do not know how, and ranks that never started
  // (their launcher failed) never ran: neither is a success.
  bool unresolved = std::any_of(job_.ranks.begin(), job_.ranks.end(), [](const diagnosis::RankState& r) {
    return (r.unobserved && r.status == diagnosis::RankStatus::kRunning) ||
           (!r.unobserved && r.status == diagnosis::RankStatus::kNotStarted);
  });
  int code = interrupt_signal_                ? 128 + interrupt_signal_
             : final_d.hang || hang_reported_ ? (job_code ? job_code : kExitProblems)
                                              : job_code;
  if (code == 0 && unresolved) code = kExitProblems;
  result.job = job_;
  result.diagnosis = std::move(final_d);
  result.exit_code = code;
  observer_->OnEnd(result, start_ns_);
  return result;
}

void JobCoordinator::WriteManifest(const diagnosis::JobState& job, const diagnosis::Diagnosis& d,
                                   const StopRecord& stop) const {
  if (options_.run_dir.empty()) return;
  nlohmann::json j = diagnosis::RunJson(job, d);
  j["command"] = options_.command;
  j["stall_after_s"] = job.stall_after_s;
  j["hang_after_s"] = job.hang_after_s;
  if (job.launcher_teardown) j["launcher_teardown"] = true;
  j["now_ns"] = job.now_ns;
  if (stop.stopped) j["stopped_by_dsdoctor"] = {{"reason", stop.reason}, {"at_ns", stop.at_ns}};
  auto st = WriteFileAtomic(options_.run_dir.Manifest(),
                            j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  if (!st.ok()) log::Get("run")->warn("cannot write {}: {}", options_.run_dir.Manifest(), st.message());
}

}  // namespace dsd::coordinator
