// The job coordinator of `dsdoctor run` (docs/run.md): every tick it samples the ranks through a
// RankSource, feeds their new lines to the log classifiers, runs the pure diagnosis engine, and
// acts: stacks on a suspicion, a stop on a proven hang (--on-hang stop), a fail-fast stop after
// a rank failed, SIGKILL when SIGTERM was not enough. It reports through a JobObserver (the text
// printer, the events.jsonl recorder and live view) and never touches the terminal itself.
//
// Time comes from a Clock, so tests drive a whole job (hang → stacks → stop → report) with a
// FakeClock and a fake RankSource. Not thread-safe: one thread calls Tick, RequestStop, Finish.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "collectors/log_classifier.h"
#include "collectors/node_ranks.h"
#include "common/clock.h"
#include "common/run_files.h"
#include "coordinator/plan.h"
#include "coordinator/rank_source.h"
#include "diagnosis/state.h"

namespace dsd::coordinator {

struct JobOptions {
  std::vector<std::string> command;
  bool python = false;  // the command runs Python (stacks need py-spy)
  // Its ranks have the tracer: on a hang or a suspicion, each torch rank is asked for its Flight
  // Recorder dump too (one folder per incident, a few incidents at most).
  bool flight_recorder = false;
  RunDir run_dir;                 // rank-<r>.trace are read at the end; run.json is written there
  double timeout_s = 60;          // the stall threshold (run --timeout)
  double hang_after_s = 5;        // the missing-rank threshold (run --hang-after)
  bool stop_on_hang = true;       // --on-hang stop; false: report the hang and keep watching
  double fail_fast_grace_s = 10;  // like torchrun: a failed rank stops the others after this
  Duration stop_escalation = collectors::kStopEscalation;  // SIGTERM, then SIGKILL after this
  // A lost agent's ranks are given up on this long after every other rank exited.
  Duration lost_give_up = std::chrono::seconds(30);
  // mpirun started the ranks (an MPI program): it tears the job down when one fails
  // (JobState::launcher_teardown).
  bool launcher_teardown = false;
};

// Whether dsdoctor ended the ranks (run.json "stopped_by_dsdoctor"): `analyze` then describes
// them as they were before our signal and never blames the signal on them.
struct StopRecord {
  bool stopped = false;
  std::string reason;  // "hang" | "failed" | "interrupt" | "viewer"
  int64_t at_ns = 0;
};

struct JobResult {
  diagnosis::JobState job;
  diagnosis::Diagnosis diagnosis;
  int exit_code = 0;  // docs/run.md "Exit code"
  StopRecord stop;
};

// What the coordinator tells the outside; every method has an empty default.
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void OnLine(int rank, std::string_view line) {}       // a complete line a rank printed
  virtual void OnRankExit(const diagnosis::RankState& rank) {}  // a rank was seen exiting
  virtual void OnFinding(const diagnosis::Finding& finding) {}  // a finding first seen
  virtual void OnNotice(const std::string& text) {}             // "stopping every rank", …
  // After each tick: the job, what the live view should show, and the job's start time.
  virtual void OnTick(const diagnosis::JobState& job, const diagnosis::Diagnosis& current, int64_t start_ns) {}
  virtual void OnEnd(const JobResult& result, int64_t start_ns) {}
};

class JobCoordinator {
 public:
  // `source`, `clock` and `observer` are borrowed and must outlive the coordinator.
  JobCoordinator(JobOptions options, const std::vector<RankLaunch>& ranks, RankSource* source, Clock* clock,
                 JobObserver* observer);

  // One look at the job; false once it is over (no rank runs any more, or only ranks of agents
  // given up on). Call every sample period.
  bool Tick();
  // Ctrl-C (interrupt_signal: its number, the exit code is 128 + it) or q in the TUI ("viewer").
  void RequestStop(const std::string& reason, int interrupt_signal = 0);
  // A signal that arrived as the job ended by itself: the exit code is still 128 + it.
  void NoteInterrupt(int interrupt_signal);
  bool stopping() const { return stop_deadline_ns_ != 0 || stopped_by_us_; }
  // The final look and report; writes run.json. Call once, after Tick returned false.
  JobResult Finish();

  const diagnosis::JobState& job() const { return job_; }
  const diagnosis::Diagnosis& current() const { return current_; }

 private:
  int64_t NowNs() const;
  void FeedLogs(bool final);
  void StopAll(int sig);
  void Announce(const diagnosis::Diagnosis& d);
  void TakeStacks(const diagnosis::Diagnosis& d, int64_t now);
  void UpdateAgents();
  void WriteManifest(const diagnosis::JobState& job, const diagnosis::Diagnosis& d, const StopRecord& stop) const;
  // Keeps the live findings of `d`; those that cleared (gone while no error stands: not superseded
  // by a proof) become JobState::past warnings with how long they lasted.
  void RememberLive(const diagnosis::Diagnosis& d, int64_t now);

  JobOptions options_;
  RankSource* source_;
  Clock* clock_;
  JobObserver* observer_;
  diagnosis::JobState job_;
  diagnosis::Diagnosis current_;
  std::vector<collectors::LogClassifier> classifiers_;
  std::vector<std::string> partial_, fresh_;
  std::set<std::string> announced_;
  bool hang_reported_ = false, stopped_by_us_ = false, suspect_said_ = false;
  int64_t start_ns_ = 0, next_stacks_ns_ = 0, first_failure_ns_ = 0, stop_ns_ = 0, hang_ns_ = 0, stop_deadline_ns_ = 0;
  int64_t all_observed_exited_ns_ = 0;
  int interrupt_signal_ = 0;
  std::string stop_reason_;
  diagnosis::JobState stack_job_;        // the ranks when stacks were last taken
  int flight_recorder_incidents_ = 0;    // Flight Recorder dumps asked for so far
  diagnosis::Diagnosis hang_diagnosis_;  // what proved the hang we acted on
  std::vector<diagnosis::RankState> at_hang_;
  bool said_no_py_spy_ = false;
  std::map<std::string, double> agent_gaps_;     // node → longest silence so far of a lost agent
  std::vector<diagnosis::AgentLoss> recovered_;  // agents that were lost and came back
  std::set<int> gone_;                           // ranks whose agent's connection closed
  struct Seen {
    diagnosis::Finding finding;  // as last seen
    int64_t first_ns = 0, last_ns = 0;
  };
  std::map<std::string, Seen> live_;  // FindingKey → a live finding not (yet) cleared
  std::set<std::string> past_keys_;   // findings that cleared (in job_.past)
};

// Ranks that moved between two looks (a new or finished trace record, a new step or exit; with
// `cpu`, also CPU growth outside a blocking call): a rank that moved is not hung.
std::vector<int> MovedSince(const diagnosis::JobState& before, const diagnosis::JobState& after, bool cpu);

}  // namespace dsd::coordinator
