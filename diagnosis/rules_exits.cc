#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "common/strings.h"
#include "diagnosis/engine.h"
#include "diagnosis/rules.h"

namespace dsd::diagnosis::rules {

// ---- RANK_EXITED ---------------------------------------------------------------------------------

namespace {
bool HasCommEvent(const JobState& job, int rank) {
  for (const LogEvent& e : job.events)
    if (e.rank == rank && (e.code == codes::kCommError || e.code == codes::kNcclError)) return true;
  return false;
}

// A rank whose own log says it failed (an exception, an error line): from logs alone its fate is
// unknown, but it did not sit out a collective; it is not "missing".
bool FailedInItsLog(const JobState& job, int rank) {
  for (const LogEvent& e : job.events)
    if ((e.rank == rank || e.subject_rank == rank) && !e.code.empty() && e.code != codes::kRankExited) return true;
  return false;
}

std::string FirstErrorEvent(const JobState& job, int rank) {
  for (const LogEvent& e : job.events)
    if (e.rank == rank && e.severity == Severity::kError) return e.Where() + ": " + e.summary;
  return "";
}

std::string ExitRemedy(const RankState& r) {
  switch (r.signal) {
    case 9:
      return "SIGKILL comes from outside the program: the kernel's OOM killer (look for 'Out of memory: Killed "
             "process' in dmesg on its node), the scheduler (time or memory limit) or a person. Check the node's "
             "memory and the job's limits.";
    case 11:
    case 7:
      return "A crash in native code: read the rank's log for the faulting frame, run it under gdb, and check for "
             "mismatched CUDA/NCCL/PyTorch builds across nodes.";
    case 6:
      return "abort(): an assertion failed or a C++ exception was not caught (the log lines just before it say which).";
    case 13:
      return "SIGPIPE: the rank wrote to a connection its peer had closed; the peer that went first is the cause.";
    case 15:
    case 2:
      return "The rank was asked to stop (SIGTERM/SIGINT): by a person, the scheduler or a launcher that saw another "
             "rank fail.";
    default:
      break;
  }
  if (r.signal) return "The rank was killed by a signal: see its log and its node's kernel log.";
  if (r.exit_code == 0)
    return "The rank left while the others still expect it in collectives: it ran fewer iterations (uneven inputs: its "
           "data shard was shorter) or returned early. Give every rank the same number of batches "
           "(DistributedSampler(drop_last=True), or pad), or run the loop inside DDP's join() context manager "
           "(torch.distributed.algorithms.Join) so a finished rank shadows the others' collectives.";
  return "The program failed on this rank: its log shows the error (the traceback or last error line).";
}

// Every failed rank failed with a communication error or timeout inside a collective: if a live
// rank never reached that collective, it is the culprit (the others timed out waiting for it), not
// whoever exited first. Reports that and returns true.
bool MissingRankCausedTheFailures(Ctx& c, const std::vector<const RankState*>& failed) {
  const OpRecord* call = nullptr;
  for (const RankState* r : failed) {
    const OpRecord* at = r->in_flight ? &*r->in_flight : r->last && r->last->state == "failed" ? &*r->last : nullptr;
    if (at && at->collective() && at->op != "rendezvous" && (!call || at->seq < call->seq)) call = at;
  }
  std::vector<int> missing, failed_ranks;
  for (const RankState* r : failed) failed_ranks.push_back(r->rank);
  Finding f;
  for (const RankState& r : c.job.ranks) {
    if (!Running(r)) continue;
    if (c.job.logs_only && FailedInItsLog(c.job, r.rank)) continue;
    // A traced failing call: the live ranks that never reached it. An untraced one (a collective
    // DDP issues from C++): the live ranks that are in no call at all, while the others timed out.
    if (call ? (!MemberOf(r, call->comm) || Reached(r, call->comm, call->seq))
             : (r.in_flight && r.in_flight->blocking()))
      continue;
    missing.push_back(r.rank);
    f.evidence.push_back("rank " + std::to_string(r.rank) + (r.node.empty() ? "" : " (" + r.node + ")") + ": " +
                         WhereIs(c.job, r));
  }
  if (missing.empty()) return false;
  f.code = codes::kRankMissing;
  f.ranks = missing;
  f.summary = call ? RankWord(missing) + " never joined " + call->Describe() + ": " + RankWord(failed_ranks) +
                         " timed out or lost the connection waiting for it and exited"
                   : RankWord(missing) + " was in no collective while " + RankWord(failed_ranks) +
                         " timed out or lost the connection inside one and exited: the missing rank is where to look";
  for (const RankState* r : failed) {
    std::string ev = FirstErrorEvent(c.job, r->rank);
    if (!ev.empty()) f.evidence.push_back("rank " + std::to_string(r->rank) + " " + ev);
  }
  f.remedy =
      "The failed ranks are the consequence: they waited in the collective until their timeout. The missing rank is "
      "where its state and stack above say (a data loader, a lock, I/O, a different code path); every rank must make "
      "the same collective calls in the same order.";
  f.proof = call ? proof::kTrace : proof::kLog;
  for (int r : missing) c.explained.insert(r);
  for (int r : failed_ranks) c.explained.insert(r);
  c.Add(std::move(f), false);
  Finding e;
  e.code = codes::kRankExited;
  e.severity = Severity::kWarning;
  e.ranks = failed_ranks;
  e.summary =
      RankWord(failed_ranks) + " exited with an error after waiting for " + RankWord(missing) + " (a consequence)";
  e.remedy = "Fix the missing rank above; these ranks failed because it never came.";
  e.proof = proof::kExit;
  c.Add(std::move(e), false);
  return true;
}
}  // namespace

// The job ended and these ranks never ran: their launcher (the MPI ranks' mpirun) failed before it
// started them or handed them over. Never a clean run: no rank of theirs was ever watched.
void NeverStarted(Ctx& c) {
  if (!c.job.job_ended) return;
  std::vector<int> never;
  for (const RankState& r : c.job.ranks)
    if (r.status == RankStatus::kNotStarted && !r.unobserved) never.push_back(r.rank);
  if (never.empty()) return;
  Finding f;
  f.code = codes::kLaunchError;
  f.ranks = never;
  f.summary = RankWord(never) + " never started: the job ended before " +
              (never.size() == 1 ? std::string("it was") : std::string("they were")) + " launched";
  // The launcher's own error, when the log catalogue knows it (an option mpirun refuses, a node it
  // cannot reach), is the cause: its words and remedy lead, and Events() does not repeat it.
  const LogEvent* cause = nullptr;
  for (const LogEvent& e : c.job.events) {
    if (e.code != codes::kLaunchError) continue;
    if (!cause && e.severity == Severity::kError && !e.consequence && !e.remedy.empty()) cause = &e;
    if (f.evidence.size() < 6) f.evidence.push_back(EventEvidence(e));
  }
  if (cause) {
    f.summary = RankWord(never) + " never started: " + cause->summary;
    c.quoted.insert(cause);
  }
  f.remedy = (cause ? cause->remedy + " " : std::string()) +
             "Their launcher failed before starting them: read its own output (launcher.log in the run dir; for an "
             "MPI program, mpirun's). Usual causes: an option mpirun refuses (--mpirun-opts), a node it cannot "
             "reach, the program or dsdoctor missing on a node.";
  f.proof = proof::kExit;
  for (int r : never) c.explained.insert(r);
  c.Add(std::move(f), false);
}

void Exits(Ctx& c) {
  NeverStarted(c);
  std::vector<const RankState*> failed, early_zero;
  uint64_t max_waiting_seq = 0;
  for (const RankState& r : c.job.ranks)
    if (Running(r) && r.in_flight && r.in_flight->collective())
      max_waiting_seq = std::max(max_waiting_seq, r.in_flight->seq);
  for (const RankState& r : c.job.ranks) {
    // The runtime's watchdog ended this rank on purpose (abort policy): the hang is the cause.
    if (r.watchdog_fired && r.signal == 6) continue;
    // Died inside a collective the ranks disagree on (Gloo aborts on a size mismatch): a consequence.
    if (r.in_flight && c.mismatched.count({r.in_flight->comm, r.in_flight->seq})) continue;
    if (r.last && r.last->state == "failed" && c.mismatched.count({r.last->comm, r.last->seq})) continue;
    if (c.traceback_mismatch.count(r.rank)) continue;  // it timed out waiting in the mismatched call
    if (c.init_consequences.count(r.rank)) continue;   // init failed because the ranks disagree on the world size
    if (Failed(r) && EndedByTeardown(c.job, r)) continue;
    if (Failed(r)) failed.push_back(&r);
    // Exit 0 is a problem only when others wait in a collective it never reached.
    else if (r.status == RankStatus::kExited && max_waiting_seq > 0 &&
             (!r.last || r.last->seq < max_waiting_seq || !r.last->collective()))
      early_zero.push_back(&r);
  }
  std::vector<const RankState*> all = failed;
  all.insert(all.end(), early_zero.begin(), early_zero.end());
  if (all.empty()) return;
  // Culprits: ranks that went without a communication error of their own (the others failed
  // because a peer vanished); if every one saw such an error, the first to exit.
  std::vector<const RankState*> culprits, consequences;
  // SIGPIPE means the rank wrote to a connection its peer had closed: a consequence too. So is SIGABRT
  // after a communication error of its own: the error was raised and not caught (C++ terminate, or
  // torch's watchdog taking the process down), which aborts the process.
  for (const RankState* r : all)
    ((HasCommEvent(c.job, r->rank) && (r->signal == 0 || r->signal == 6)) || r->signal == 13 ? consequences : culprits)
        .push_back(r);
  // Every failure is a lost peer, and a rank had left cleanly before the first of them: it left while
  // the others still expected it (its loop ended early), whatever they were in (DDP's untraced C++
  // all-reduce on torch 1.13 leaves no record to compare). When a rank left is when its program
  // finished (a traced rank's phase "finished", set as its interpreter begins to exit) or, untraced,
  // its exit: the process exit of a Python rank comes later (its teardown closes the connections
  // the others then fail on), and agents sample exits a tick apart.
  auto left_ns = [](const RankState& r) {
    int64_t at = r.exit_ns > 0 ? r.exit_ns : INT64_MAX;
    if (r.phase == "finished" && r.phase_ns > 0) at = std::min(at, r.phase_ns);
    return at;
  };
  bool left_first = false;
  if (culprits.empty() && !consequences.empty()) {
    int64_t first_failure = INT64_MAX;
    for (const RankState* r : consequences) first_failure = std::min(first_failure, left_ns(*r));
    for (const RankState& r : c.job.ranks)
      if (r.status == RankStatus::kExited && r.exit_code == 0 && r.signal == 0 && left_ns(r) < first_failure &&
          std::find(all.begin(), all.end(), &r) == all.end())
        culprits.push_back(&r);
    left_first = !culprits.empty();
  }
  if (culprits.empty() && MissingRankCausedTheFailures(c, consequences)) return;
  if (culprits.empty()) {
    auto first = std::min_element(all.begin(), all.end(), [](auto* a, auto* b) { return a->exit_ns < b->exit_ns; });
    culprits.push_back(*first);
    consequences.erase(std::remove(consequences.begin(), consequences.end(), *first), consequences.end());
  }
  std::sort(culprits.begin(), culprits.end(), [](auto* a, auto* b) {
    if (a->exit_ns != b->exit_ns) return a->exit_ns < b->exit_ns;
    if ((a->signal != 0) != (b->signal != 0)) return a->signal != 0;  // same tick: the signal went first
    return a->rank < b->rank;
  });
  bool others_wait =
      std::any_of(c.job.ranks.begin(), c.job.ranks.end(), [](const RankState& r) { return Running(r) && r.in_flight; });
  std::vector<int> consequence_ranks;
  for (auto* r : consequences) consequence_ranks.push_back(r->rank);
  for (const RankState* r : culprits) {
    Finding f;
    f.code = codes::kRankExited;
    f.ranks = {r->rank};
    std::string how = r->signal ? std::string("was killed by ") + SignalName(r->signal) + " (signal " +
                                      std::to_string(r->signal) + ")"
                                : "exited with code " + std::to_string(r->exit_code);
    f.summary = "rank " + std::to_string(r->rank) + (r->node.empty() ? "" : " (" + r->node + ")") + " " + how;
    const OpRecord* at = r->in_flight ? &*r->in_flight : r->last ? &*r->last : nullptr;
    if (at) f.summary += (r->in_flight ? " in " : " after ") + at->Describe();
    if (r->exit_code == 0 && !r->signal && left_first)
      f.summary +=
          " before the other ranks failed for want of it (" + RankWord(consequence_ranks) + ": communication errors)";
    else if (r->exit_code == 0 && !r->signal)
      f.summary += " while other ranks still wait in collective #" + std::to_string(max_waiting_seq);
    if (at) f.evidence.push_back("last traced call: " + at->Describe() + " [" + at->state + "]");
    if (!r->phase.empty()) f.evidence.push_back("phase " + r->phase + ", step " + std::to_string(r->step));
    if (!r->last_error.empty()) f.evidence.push_back("last error: " + r->last_error);
    std::string ev = FirstErrorEvent(c.job, r->rank);
    if (!ev.empty()) f.evidence.push_back(ev);
    // A launcher's line that reported the exit (analyze of logs).
    for (const LogEvent& e : c.job.events)
      if (e.code == codes::kRankExited && e.subject_rank == r->rank && f.evidence.size() < 6)
        f.evidence.push_back(EventEvidence(e));
    if (!consequence_ranks.empty())
      f.evidence.push_back(RankWord(consequence_ranks) + " failed after it with communication errors (a consequence)");
    if (others_wait) {
      std::vector<int> waiting;
      for (const RankState& o : c.job.ranks)
        if (Running(o) && o.in_flight) waiting.push_back(o.rank);
      f.evidence.push_back(RankWord(waiting) + " still wait for it");
    }
    f.remedy = ExitRemedy(*r);
    f.proof = proof::kExit;
    c.explained.insert(r->rank);
    c.Add(std::move(f), others_wait);
  }
}

}  // namespace dsd::diagnosis::rules

namespace dsd::diagnosis {

// A launcher that tears the job down once a rank failed (mpirun) ends the others with SIGTERM, then
// SIGKILL; only in such a job (elsewhere the agents' ticks order exits too coarsely to tell). Such an end after a
// failure of another cause is the launcher's doing, not a cause; a peer's consequence (a communication error, SIGPIPE)
// causes no teardown. At the same sampling tick, only a failure that was no such kill either counts.
bool EndedByTeardown(const JobState& job, const RankState& r) {
  if (!job.launcher_teardown || (r.signal != SIGTERM && r.signal != SIGKILL)) return false;
  for (const RankState& o : job.ranks) {
    if (&o == &r || !rules::Failed(o) || o.signal == SIGPIPE || (o.signal == 0 && rules::HasCommEvent(job, o.rank)))
      continue;
    if (o.exit_ns < r.exit_ns) return true;
    if (o.exit_ns == r.exit_ns && o.signal != SIGTERM && o.signal != SIGKILL) return true;
  }
  return false;
}

}  // namespace dsd::diagnosis
