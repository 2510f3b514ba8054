#include <string.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "common/strings.h"
#include "diagnosis/rules.h"

namespace dsd::diagnosis::rules {

// A call that no rank has answered for this long, although another rank is provably elsewhere,
// is reported without waiting for hang_after_s: long enough that a message in transit has landed.

double AgeS(int64_t now_ns, int64_t since_ns) {
  return since_ns > 0 && now_ns > since_ns ? static_cast<double>(now_ns - since_ns) / 1e9 : 0.0;
}

// The moment a rank's state was read: ages of its calls count to then, not to the coordinator's
// now, so a sample that arrived late (a lagging node, a coordinator that was paused) never makes a
// rank look stuck for longer than it was seen stuck.
int64_t SeenAt(const JobState& job, const RankState& r) {
  return r.sample_ns > 0 ? std::min(r.sample_ns, job.now_ns) : job.now_ns;
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1f s" : "%.0f s", s);
  return buf;
}

std::string RankWord(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + FormatRanks(ranks);
}

const char* SignalName(int sig) {
  switch (sig) {
    case 1:
      return "SIGHUP";
    case 2:
      return "SIGINT";
    case 6:
      return "SIGABRT";
    case 7:
      return "SIGBUS";
    case 8:
      return "SIGFPE";
    case 9:
      return "SIGKILL";
    case 11:
      return "SIGSEGV";
    case 13:
      return "SIGPIPE";
    case 15:
      return "SIGTERM";
    default:
      return "signal";
  }
}

std::vector<std::string> NodesOf(const JobState& job, const std::vector<int>& ranks) {
  std::set<std::string> nodes;
  for (int r : ranks)
    if (r >= 0 && r < static_cast<int>(job.ranks.size()) && !job.ranks[r].node.empty()) nodes.insert(job.ranks[r].node);
  return {nodes.begin(), nodes.end()};
}

std::string ProcWords(const ProcSample& p) {
  if (!p.valid) return "";
  std::string s;
  switch (p.state) {
    case 'R':
      s = "running";
      break;
    case 'S':
      s = "sleeping";
      break;
    case 'D':
      s = "in uninterruptible I/O";
      break;
    case 'T':
    case 't':
      s = "stopped";
      break;
    case 'Z':
      s = "zombie";
      break;
    default:
      s = std::string("state ") + p.state;
  }
  if (!p.wchan.empty() && p.wchan != "0") s += " in " + p.wchan;
  char buf[64];
  if (p.cpu_fraction >= 0.5) {
    std::snprintf(buf, sizeof buf, ", spinning (CPU %.0f%%)", p.cpu_fraction * 100);
    s += buf;
  } else if (p.flat_for_s > 0) {
    s += ", CPU flat for " + Seconds(p.flat_for_s);
  }
  return s;
}

// Where a rank is when it is not in the call the others wait in.
std::string WhereIs(const JobState& job, const RankState& r) {
  std::string s;
  if (r.status == RankStatus::kNotStarted) return "not started";
  if (r.status == RankStatus::kExited)
    return r.signal ? std::string("killed by ") + SignalName(r.signal)
                    : "exited with code " + std::to_string(r.exit_code);
  if (!r.has_trace) {
    s = "no trace (it never reached init_distributed, or the program does not use the bundled runtime)";
  } else if (r.in_flight) {
    double age = AgeS(SeenAt(job, r), r.in_flight->started_ns);
    s = r.in_flight->async
            ? "not blocked in a call; its asynchronous " + r.in_flight->Describe() + " unfinished for " + Seconds(age)
            : "in " + r.in_flight->Describe() + " for " + Seconds(age);
  } else {
    s = "outside any collective";
    if (!r.phase.empty())
      s += ", phase " + r.phase + (r.phase_ns ? " for " + Seconds(AgeS(SeenAt(job, r), r.phase_ns)) : "");
    if (r.last) s += ", last call " + r.last->Describe() + " (" + r.last->state + ")";
  }
  std::string proc = ProcWords(r.proc);
  if (!proc.empty()) s += "; " + proc;
  if (!r.stack.empty()) s += "; stack: " + r.stack;
  return s;
}

bool Running(const RankState& r) { return r.status == RankStatus::kRunning; }

// Whether the rank's whole process tree is blocked: no CPU growth (above noise) for `for_s`.
bool Blocked(const RankState& r, double for_s) {
  return r.proc.valid && r.proc.state != 'R' && r.proc.cpu_fraction < 0.05 && r.proc.flat_for_s >= for_s;
}

// A call made from checkpoint code: on a tie between two sides, that side is the odd one (rank
// guards creep in around checkpoints; training code calls its collectives on every rank).
bool InCheckpoint(const OpRecord& r) { return r.callsite.find("checkpoint") != std::string::npos; }

std::string CheckpointRemedy(const char* which) {
  return std::string(which) +
         " makes collectives (a barrier, a gather of shards), so every rank must call it: DeepSpeed's engine." + which +
         "() saves each rank's own (ZeRO) shard and they agree before `latest` moves. Remove the `if rank == 0:` "
         "guard around the call; inside your own function, keep the collectives on every rank and guard only the "
         "file write (`if dist.get_rank() == 0: torch.save(...)`).";
}

extern const char* const kUnevenInputsRemedy;
const char* const kUnevenInputsRemedy =
    "Some ranks are in DDP's gradient all-reduce (backward of another step) while the others already left the training "
    "loop or do something else: the ranks ran different numbers of iterations (uneven inputs). Give every rank "
    "the same number of batches (DistributedSampler(drop_last=True), or pad the shards), or run the loop inside "
    "DDP's join() context manager (torch.distributed.algorithms.Join) so finished ranks shadow the others.";
bool Failed(const RankState& r) { return r.status == RankStatus::kExited && (r.signal != 0 || r.exit_code != 0); }

}  // namespace dsd::diagnosis::rules
