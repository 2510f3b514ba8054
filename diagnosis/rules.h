// The rules of the run diagnosis engine, one file per family (internal to diagnosis/; the index of
// the rules, most decisive first, is engine.h):
//   rules_mismatch.cc   COLLECTIVE_MISMATCH from traces, across groups, from tracebacks
//   rules_exits.cc      RANK_EXITED (and whether a missing rank caused the failures)
//   rules_waits.cc      P2P_DEADLOCK, RANK_MISSING, COLLECTIVE_STALL (groups of ranks waiting together)
//   rules_progress.cc   init_distributed disagreements, STRAGGLER
//   rules_logs.cc       log events: WATCHDOG_TIMEOUT, the watchdog's and the store's culprits, the first
//                       failure of a combined log, NCCL/COMM/LOG errors
//   rules_nodes.cc      AGENT_LOST, LOG_DIR_FULL
//   rules_common.cc     the words and measures they share
// Each rule reads the JobState and adds findings to a Ctx; Diagnose (engine.cc) runs them in order.
// Pure; thread-compatible (a Ctx per Diagnose call).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "diagnosis/state.h"

namespace dsd::diagnosis::rules {

// A call that no rank has answered for this long, although another rank is provably elsewhere,
// is reported without waiting for hang_after_s: long enough that a message in transit has landed.
inline constexpr double kProofSettleS = 0.5;
// Traces beat every 100 ms, so a live rank's last beat may be up to a beat older than its end. A rank
// stopped before a collective only when its last beat is a beat and a margin older than the last
// waiter's arrival, and it stopped first only when its beat is older than every other rank's by
// several beats: a job killed whole (scancel, a time limit) ends every trace within one beat.
inline constexpr int64_t kStoppedBeforeNs = 150'000'000;
inline constexpr int64_t kStoppedFirstNs = 300'000'000;

// Seconds from since_ns to now_ns (0 when either is unknown or out of order).
double AgeS(int64_t now_ns, int64_t since_ns);
// The moment a rank's state was read: ages of its calls count to then, not to the coordinator's now.
int64_t SeenAt(const JobState& job, const RankState& r);
std::string Seconds(double s);                        // "1.5 s", "42 s"
std::string RankWord(const std::vector<int>& ranks);  // "rank 3", "ranks 0-2"
const char* SignalName(int sig);                      // "SIGSEGV"
std::vector<std::string> NodesOf(const JobState& job, const std::vector<int>& ranks);
std::string ProcWords(const ProcSample& p);  // "sleeping in futex_wait_queue, CPU flat for 3.0 s"
// Where a rank is when it is not in the call the others wait in.
std::string WhereIs(const JobState& job, const RankState& r);
bool Running(const RankState& r);
// Whether the rank's whole process tree is blocked: no CPU growth (above noise) for `for_s`.
bool Blocked(const RankState& r, double for_s);
// A call made from checkpoint code: on a tie between two sides, that side is the odd one.
bool InCheckpoint(const OpRecord& r);
std::string CheckpointRemedy(const char* which);
bool Failed(const RankState& r);  // exited with an error or a signal
extern const char* const kUnevenInputsRemedy;

struct Ctx {
  const JobState& job;
  Diagnosis out;
  std::set<int> explained;  // ranks already named as a culprit by a stronger rule
  std::set<std::pair<uint32_t, uint64_t>> mismatched;
  std::set<int> init_consequences;   // ranks that failed or wait in init because of a world-size disagreement
  std::set<int> traceback_mismatch;  // ranks whose traceback shows them in a mismatched collective  // (comm, seq) of
                                     // collectives found to differ
  // Log events explained by a culprit another rule named (watchdog reports of ranks that waited
  // for a missing rank; errors that followed the first failure): event → why.
  std::map<const LogEvent*, std::string> echoes;
  std::string first_failure;  // summary of the finding that holds the first failure, moved to the front
  // Log events a finding already gives as its cause (the launcher's refusal in "never started"):
  // Events() does not report them again.
  std::set<const LogEvent*> quoted;
  // `hang`: the finding says the job cannot go on. Only a proven one makes Diagnosis::hang (what
  // `--on-hang stop` acts on); a heuristic one is a warning that marks the job suspect.
  void Add(Finding f, bool hang) {
    if (!f.ranks.empty() || f.nodes.empty()) f.nodes = NodesOf(job, f.ranks);  // a node-only finding keeps its node
    if (f.proof == proof::kHeuristic) {
      if (f.severity == Severity::kError) f.severity = Severity::kWarning;
      out.suspect = out.suspect || hang;
    } else {
      out.hang = out.hang || hang;
    }
    out.findings.push_back(std::move(f));
  }
  bool HasCode(const char* code) const {
    return std::any_of(out.findings.begin(), out.findings.end(), [&](const Finding& f) { return f.code == code; });
  }
};

struct Group {
  uint32_t comm;
  uint64_t seq;
  const OpRecord* call;
  std::vector<int> ranks;
  int64_t last_arrival_ns = 0;  // the newest started_ns: how long the whole group has waited
  int64_t seen_ns = 0;          // the oldest moment one of its ranks was seen waiting
};

// The ranks waiting in each collective (by communicator and seq), largest group first.
std::vector<Group> WaitGroups(const JobState& job);
// Group membership and progress from a rank's own records.
bool MemberOf(const RankState& r, uint32_t comm);
bool Reached(const RankState& r, uint32_t comm, uint64_t seq);
std::string EventEvidence(const LogEvent& e);

// The rules, in the order Diagnose runs them.
void TraceMismatch(Ctx& c);
void CrossGroupMismatch(Ctx& c);
void TracebackMismatch(Ctx& c);
void Rendezvous(Ctx& c);
void Exits(Ctx& c);
void Deadlocks(Ctx& c);
void Missing(Ctx& c, const std::vector<Group>& groups);
void Stalls(Ctx& c, const std::vector<Group>& groups);
void Stragglers(Ctx& c);
void Watchdogs(Ctx& c);
void FlightRecorderAnalysis(Ctx& c);  // torchfrtrace's "Not all ranks joining collective" blocks
void WatchdogCulprits(Ctx& c);
void HorovodStalls(Ctx& c);  // Horovod's stall check: the missing ranks, or the complement of the ready ones
void DumpSignals(Ctx& c);    // ranks with nothing in flight when another's watchdog timed out
void InternalErrorsOfALostPeer(Ctx& c);  // ncclInternalError whose "Last error" is a closed socket
void StoreCulprits(Ctx& c);
void FirstFailure(Ctx& c);
void Events(Ctx& c);
void LostAgents(Ctx& c);
void LogDirFull(Ctx& c);
void PastFindings(Ctx& c);

}  // namespace dsd::diagnosis::rules
