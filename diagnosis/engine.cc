#include "diagnosis/engine.h"

#include <string.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "common/strings.h"

namespace dsd::diagnosis {

// Group membership and progress from a rank's own records (defined with the RANK_MISSING rules).
bool MemberOf(const RankState& r, uint32_t comm);
bool Reached(const RankState& r, uint32_t comm, uint64_t seq);

namespace {

// A call that no rank has answered for this long, although another rank is provably elsewhere,
// is reported without waiting for hang_after_s: long enough that a message in transit has landed.
constexpr double kProofSettleS = 0.5;

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

const char* const kUnevenInputsRemedy =
    "Some ranks are in DDP's gradient all-reduce (backward of another step) while the others already left the training "
    "loop or do something else: the ranks ran different numbers of iterations (uneven inputs). Give every rank "
    "the same number of batches (DistributedSampler(drop_last=True), or pad the shards), or run the loop inside "
    "DDP's join() context manager (torch.distributed.algorithms.Join) so finished ranks shadow the others.";
bool Failed(const RankState& r) { return r.status == RankStatus::kExited && (r.signal != 0 || r.exit_code != 0); }

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

// ---- COLLECTIVE_MISMATCH from traces ------------------------------------------------------------

struct Entry {
  uint32_t comm;
  uint64_t seq;
  int rank;
  const OpRecord* rec;
};

std::string MismatchRemedy(const std::vector<const OpRecord*>& sides) {
  bool some_ckpt = false, all_ckpt = true, op_differs = false, size_differs = false, dtype_differs = false,
       reduce_differs = false;
  for (const OpRecord* s : sides) {
    bool ckpt = s->callsite.find("save_checkpoint") != std::string::npos ||
                s->callsite.find("load_checkpoint") != std::string::npos;
    some_ckpt |= ckpt;
    all_ckpt &= ckpt;
    op_differs |= s->op != sides[0]->op;
    size_differs |= s->count != sides[0]->count;
    dtype_differs |= s->dtype != sides[0]->dtype;
    reduce_differs |= s->reduce != sides[0]->reduce;
  }
  if (some_ckpt && !all_ckpt) {
    const char* which = "save_checkpoint";
    for (const OpRecord* s : sides)
      if (s->callsite.find("load_checkpoint") != std::string::npos) which = "load_checkpoint";
    return CheckpointRemedy(which);
  }
  bool some_ddp = false, all_ddp = true, root_differs = false;
  for (const OpRecord* s : sides) {
    bool ddp = s->callsite.find("ddp.bucket") != std::string::npos;
    some_ddp |= ddp;
    all_ddp &= ddp;
    root_differs |= s->rooted() && sides[0]->rooted() && s->peer != sides[0]->peer;
  }
  if (some_ddp && !all_ddp) return kUnevenInputsRemedy;
  if (op_differs) {
    return "The ranks reached different code: every rank must issue the same collectives in the same order. Look for "
           "a rank-dependent branch, an early return or a caught exception between the callsites named above.";
  }
  if (size_differs || dtype_differs) {
    return "The same collective with a different element count or dtype: tensor shapes or precision differ between "
           "ranks (data-dependent shapes, a different config or model on some ranks, fp16 enabled on only some). Make "
           "them identical on every rank, or pad to a common size.";
  }
  if (root_differs) {
    return "The ranks name different root ranks (src/dst) for the same call: it pairs the wrong data or waits for a "
           "root that is not sending. Compute the root the same way on every rank (a global rank, not a local one).";
  }
  if (reduce_differs) {
    return "The ranks reduce with different operations: the collective completes but every result is silently wrong. "
           "Use the same reduce op on every rank.";
  }
  return "Every rank must issue the same collectives with the same arguments in the same order.";
}

void TraceMismatch(Ctx& c) {
  // Group the records by (communicator, seq) with a hash map rather than sorting them all: every
  // rank's window holds the same few seqs, so there are few groups of many entries.
  std::unordered_map<uint64_t, size_t> group_of;
  std::vector<std::vector<Entry>> groups;
  for (const RankState& r : c.job.ranks) {
    for (const OpRecord& rec : r.recent) {
      if (rec.seq == 0 || !rec.collective() || rec.op == "rendezvous") continue;
      uint64_t key = (static_cast<uint64_t>(rec.comm) << 48) ^ rec.seq;
      auto [it, inserted] = group_of.emplace(key, groups.size());
      if (inserted) groups.emplace_back();
      groups[it->second].push_back({rec.comm, rec.seq, r.rank, &rec});
    }
  }
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a[0].comm != b[0].comm ? a[0].comm < b[0].comm : a[0].seq < b[0].seq;
  });
  std::vector<Entry> entries;
  entries.reserve(group_of.size());
  // Groups whose calls all agree need no further look (the common case): check that cheaply,
  // integers before strings.
  auto same = [](const OpRecord& a, const OpRecord& b) {
    return a.count == b.count && a.peer == b.peer && a.SameCall(b) && a.callsite == b.callsite;
  };
  for (auto& g : groups) {
    bool agree = true;
    for (size_t k = 1; k < g.size() && agree; ++k) agree = same(*g[0].rec, *g[k].rec);
    if (agree) continue;
    entries.insert(entries.end(), g.begin(), g.end());
  }
  std::set<uint32_t> reported_comm;
  for (size_t i = 0; i < entries.size();) {
    size_t j = i;
    while (j < entries.size() && entries[j].comm == entries[i].comm && entries[j].seq == entries[i].seq) ++j;
    if (!reported_comm.count(entries[i].comm)) {
      // Sides: one per distinct call (and callsite, which says where in the program it was made).
      std::vector<const OpRecord*> sides;
      std::vector<std::vector<int>> side_ranks;
      bool in_flight = false;
      for (size_t k = i; k < j; ++k) {
        const OpRecord* rec = entries[k].rec;
        in_flight |= rec->in_flight();
        size_t s = 0;
        while (s < sides.size() && !(sides[s]->SameCall(*rec) && sides[s]->callsite == rec->callsite)) ++s;
        if (s == sides.size()) {
          sides.push_back(rec);
          side_ranks.emplace_back();
        }
        side_ranks[s].push_back(entries[k].rank);
      }
      bool calls_differ = false;
      for (const OpRecord* s : sides) calls_differ |= !s->SameCall(*sides[0]);
      if (calls_differ) {
        reported_comm.insert(entries[i].comm);
        c.mismatched.insert({entries[i].comm, entries[i].seq});
        // The culprits are every side but the largest (all of them when sizes tie).
        size_t largest = 0;
        for (size_t s = 1; s < sides.size(); ++s)
          if (side_ranks[s].size() > side_ranks[largest].size()) largest = s;
        bool tie = false;
        for (size_t s = 0; s < sides.size(); ++s)
          if (s != largest && side_ranks[s].size() == side_ranks[largest].size()) tie = true;
        // On a tie (two ranks, say) a checkpoint callsite is the odd one out: training code calls
        // the step collectives on every rank, and checkpoints are where rank guards creep in.
        if (tie && sides.size() == 2 && InCheckpoint(*sides[0]) != InCheckpoint(*sides[1])) {
          tie = false;
          largest = InCheckpoint(*sides[0]) ? 1 : 0;
        }
        Finding f;
        f.code = codes::kCollectiveMismatch;
        f.severity = Severity::kError;
        std::vector<std::string> parts;
        for (size_t s = 0; s < sides.size(); ++s) {
          if (!tie && s != largest) f.ranks.insert(f.ranks.end(), side_ranks[s].begin(), side_ranks[s].end());
          if (tie) f.ranks.insert(f.ranks.end(), side_ranks[s].begin(), side_ranks[s].end());
          parts.push_back(RankWord(side_ranks[s]) + " called " + sides[s]->Describe());
          std::string ev = RankWord(side_ranks[s]) + ": " + sides[s]->Describe() + " [" + sides[s]->state + "]";
          if (sides[s]->in_flight()) ev += " for " + Seconds(AgeS(c.job.now_ns, sides[s]->started_ns));
          f.evidence.push_back(ev);
        }
        std::sort(f.ranks.begin(), f.ranks.end());
        f.summary = "collective #" + std::to_string(entries[i].seq) +
                    (entries[i].comm ? " of group " + std::to_string(entries[i].comm) : "") +
                    " differs between ranks: " + Join(parts, "; ") +
                    (in_flight ? "" : " (it completed: results are wrong)");
        f.remedy = MismatchRemedy(sides);
        f.proof = proof::kTrace;
        for (int r : f.ranks) c.explained.insert(r);
        c.Add(std::move(f), in_flight);
      }
    }
    i = j;
  }
}

// ---- COLLECTIVE_MISMATCH across groups ------------------------------------------------------------

// Ranks blocked in collectives of different groups that need each other: rank 0 in a barrier on
// the world while rank 1 waits in an all-reduce on a data-parallel group made of the same ranks.
// Neither (group, seq) pair differs within a group, so the per-group comparison cannot see it: a
// wait-for graph over the blocked calls can. A cycle is proven by the traces.
void CrossGroupMismatch(Ctx& c) {
  struct Call {
    const OpRecord* rec = nullptr;
    std::vector<int> ranks;
  };
  std::map<std::pair<uint32_t, uint64_t>, Call> calls;
  std::vector<const std::pair<const std::pair<uint32_t, uint64_t>, Call>*> of_rank(c.job.ranks.size(), nullptr);
  for (const RankState& r : c.job.ranks) {
    if (!Running(r) || !r.in_flight || !r.in_flight->blocking() || !r.in_flight->collective() ||
        r.in_flight->op == "rendezvous")
      continue;
    if (AgeS(SeenAt(c.job, r), r.in_flight->started_ns) < kProofSettleS) continue;
    auto& call = calls[{r.in_flight->comm, r.in_flight->seq}];
    if (!call.rec) call.rec = &*r.in_flight;
    call.ranks.push_back(r.rank);
  }
  if (calls.size() < 2) return;
  for (auto& kv : calls)
    for (int r : kv.second.ranks) of_rank[r] = &kv;
  // Edges between calls: a member a call needs is blocked in the other call.
  std::map<std::pair<uint32_t, uint64_t>, std::set<std::pair<uint32_t, uint64_t>>> needs;
  for (auto& [key, call] : calls) {
    for (const RankState& s : c.job.ranks) {
      if (!of_rank[s.rank] || of_rank[s.rank]->first == key) continue;
      if (!MemberOf(s, key.first) || Reached(s, key.first, key.second)) continue;
      needs[key].insert(of_rank[s.rank]->first);
    }
  }
  for (auto& [a, outs] : needs) {
    for (const auto& b : outs) {
      if (!(a < b) || !needs.count(b) || !needs[b].count(a)) continue;
      if (c.mismatched.count(a) || c.mismatched.count(b)) continue;
      const Call& ca = calls[a];
      const Call& cb = calls[b];
      std::vector<const OpRecord*> sides = {ca.rec, cb.rec};
      int odd = ca.ranks.size() < cb.ranks.size()                ? 0
                : cb.ranks.size() < ca.ranks.size()              ? 1
                : InCheckpoint(*ca.rec) != InCheckpoint(*cb.rec) ? (InCheckpoint(*ca.rec) ? 0 : 1)
                                                                 : -1;
      Finding f;
      f.code = codes::kCollectiveMismatch;
      if (odd != 1) f.ranks.insert(f.ranks.end(), ca.ranks.begin(), ca.ranks.end());
      if (odd != 0) f.ranks.insert(f.ranks.end(), cb.ranks.begin(), cb.ranks.end());
      std::sort(f.ranks.begin(), f.ranks.end());
      auto group = [](uint32_t comm) {
        return comm ? "group " + std::to_string(comm) : std::string("the world group");
      };
      f.summary = "ranks wait in collectives of different groups that need each other: " + RankWord(ca.ranks) + " in " +
                  ca.rec->Describe() + " on " + group(a.first) + "; " + RankWord(cb.ranks) + " in " +
                  cb.rec->Describe() + " on " + group(b.first);
      f.evidence.push_back(RankWord(ca.ranks) + ": " + ca.rec->Describe() + " [started] for " +
                           Seconds(AgeS(c.job.now_ns, ca.rec->started_ns)));
      f.evidence.push_back(RankWord(cb.ranks) + ": " + cb.rec->Describe() + " [started] for " +
                           Seconds(AgeS(c.job.now_ns, cb.rec->started_ns)));
      f.remedy = MismatchRemedy(sides);
      f.proof = proof::kTrace;
      c.mismatched.insert(a);
      c.mismatched.insert(b);
      for (int r : f.ranks) c.explained.insert(r);
      c.Add(std::move(f), true);
    }
  }
}

// ---- COLLECTIVE_MISMATCH from Python tracebacks (programs without a trace) -----------------------

void TracebackMismatch(Ctx& c) {
  // The traces already proved a mismatch: stacks of the same ranks would only repeat it, less precisely.
  for (const Finding& f : c.out.findings)
    if (f.code == codes::kCollectiveMismatch && f.proof == proof::kTrace) return;
  // Where each rank is inside torch.distributed: a live Python stack (py-spy) first, else the
  // traceback it died with.
  struct Where {
    int rank;
    std::string collective, location, summary;
  };
  std::vector<Where> wheres;
  std::set<int> seen;
  bool live = false;
  for (const RankState& r : c.job.ranks) {
    Where w{r.rank, "", "", ""};
    if (!Running(r) || r.stack.empty()) continue;
    if (StackCollective(r.stack, &w.collective, &w.location) ||
        // DDP's gradient all-reduce runs in C++: a rank blocked in backward() waits in it.
        (Blocked(r, kLookS) && StackInDdpBackward(r.stack, &w.location) &&
         (w.collective = "all_reduce (DDP gradients)", true))) {
      w.summary = "waiting there now (stack: " + r.stack + ")";
      wheres.push_back(w);
      seen.insert(r.rank);
      live = true;
    }
  }
  const int nranks = static_cast<int>(c.job.ranks.size());
  for (const LogEvent& e : c.job.events) {
    if (e.collective.empty() || e.rank < 0 || e.rank >= nranks || seen.count(e.rank)) continue;
    seen.insert(e.rank);
    wheres.push_back({e.rank, e.collective, e.location, e.summary});
  }
  struct Ev {
    int rank;
    std::string location, summary;
  };
  std::map<std::string, std::vector<Ev>> by_call;  // collective → ranks in it
  for (const Where& w : wheres) by_call[w.collective].push_back({w.rank, w.location, w.summary});
  if (by_call.size() < 2) return;
  size_t largest = 0;
  std::string largest_name;
  for (auto& [name, evs] : by_call)
    if (evs.size() > largest) largest = evs.size(), largest_name = name;
  Finding f;
  f.code = codes::kCollectiveMismatch;
  std::vector<std::string> parts;
  bool tie = std::count_if(by_call.begin(), by_call.end(), [&](auto& kv) { return kv.second.size() == largest; }) > 1;
  for (auto& [name, evs] : by_call) {
    std::vector<int> ranks;
    std::set<std::string> where;
    for (const Ev& e : evs) {
      ranks.push_back(e.rank);
      if (!e.location.empty()) where.insert(e.location);
      if (tie || name != largest_name) f.ranks.push_back(e.rank);
    }
    std::string at = where.empty() ? "" : " at " + Join({where.begin(), where.end()}, ", ");
    std::string call =
        name.find(' ') == std::string::npos ? name + "()" : name;  // "barrier()", "all_reduce (DDP gradients)"
    parts.push_back(RankWord(ranks) + " in " + call + at);
    f.evidence.push_back(RankWord(ranks) + ": " + call + at + ": " + evs[0].summary);
  }
  // On a tie of two, a side whose traced call is in checkpoint code is the odd one (rank guards
  // creep in there), as in the trace rule.
  auto in_ckpt = [&](const std::vector<Ev>& evs) {
    return std::any_of(evs.begin(), evs.end(), [&](const Ev& e) {
      const RankState& r = c.job.ranks[e.rank];
      return r.in_flight && InCheckpoint(*r.in_flight);
    });
  };
  if (tie && by_call.size() == 2 && in_ckpt(by_call.begin()->second) != in_ckpt(std::next(by_call.begin())->second)) {
    f.ranks.clear();
    for (auto& [name, evs] : by_call)
      if (in_ckpt(evs))
        for (const Ev& e : evs) f.ranks.push_back(e.rank);
  }
  std::sort(f.ranks.begin(), f.ranks.end());
  f.summary =
      std::string(live ? "ranks wait inside different collectives: " : "ranks failed inside different collectives: ") +
      Join(parts, "; ");
  bool ckpt = false, ddp = false;
  for (auto& [name, evs] : by_call) {
    ckpt |= in_ckpt(evs);
    ddp |= name.find("DDP gradients") != std::string::npos;
  }
  f.remedy =
      ckpt  ? CheckpointRemedy("save_checkpoint")
      : ddp ? kUnevenInputsRemedy
            : "Every rank must call the same collectives in the same order: the call sites above are reached by some "
              "ranks only (a rank-dependent branch such as `if rank != 0:` around a barrier, or an early return).";
  f.proof = live ? proof::kStacks : proof::kLog;
  for (int r : f.ranks) c.explained.insert(r);
  for (auto& [name, evs] : by_call)
    for (const Ev& e : evs) c.traceback_mismatch.insert(e.rank);
  c.Add(std::move(f), live);
}

// ---- RANK_EXITED ---------------------------------------------------------------------------------

std::string EventEvidence(const LogEvent& e);

bool HasCommEvent(const JobState& job, int rank) {
  for (const LogEvent& e : job.events)
    if (e.rank == rank && (e.code == codes::kCommError || e.code == codes::kNcclError)) return true;
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

void Exits(Ctx& c) {
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
  // SIGPIPE means the rank wrote to a connection its peer had closed: a consequence too.
  for (const RankState* r : all)
    ((HasCommEvent(c.job, r->rank) && r->signal == 0) || r->signal == 13 ? consequences : culprits).push_back(r);
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
    if (r->exit_code == 0 && !r->signal)
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

// ---- RANK_MISSING, P2P_DEADLOCK, COLLECTIVE_STALL -------------------------------------------------

struct Group {
  uint32_t comm;
  uint64_t seq;
  const OpRecord* call;
  std::vector<int> ranks;
  int64_t last_arrival_ns = 0;  // the newest started_ns: how long the whole group has waited
  int64_t seen_ns = 0;          // the oldest moment one of its ranks was seen waiting
};

std::vector<Group> WaitGroups(const JobState& job) {
  std::map<std::pair<uint32_t, uint64_t>, Group> groups;
  for (const RankState& r : job.ranks) {
    if (!Running(r) || !r.in_flight || !r.in_flight->collective() || r.in_flight->op == "rendezvous") continue;
    auto& g = groups[{r.in_flight->comm, r.in_flight->seq}];
    g.comm = r.in_flight->comm;
    g.seq = r.in_flight->seq;
    if (!g.call) g.call = &*r.in_flight;
    g.ranks.push_back(r.rank);
    g.last_arrival_ns = std::max(g.last_arrival_ns, r.in_flight->started_ns);
    int64_t seen = SeenAt(job, r);
    g.seen_ns = g.seen_ns ? std::min(g.seen_ns, seen) : seen;
  }
  std::vector<Group> out;
  for (auto& [k, g] : groups) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(), [](const Group& a, const Group& b) { return a.ranks.size() > b.ranks.size(); });
  return out;
}

}  // namespace

// A rank is in a communicator's group when it is the world's (0) or its records name the group:
// members of a subgroup made with new_group are known from what they called on it.
bool MemberOf(const RankState& r, uint32_t comm) {
  if (comm == 0) return true;
  if (r.in_flight && r.in_flight->comm == comm) return true;
  return std::any_of(r.recent.begin(), r.recent.end(),
                     [&](const OpRecord& o) { return o.comm == comm && o.collective(); });
}

// The rank already made its seq-th call on this communicator (the same call, or a different one
// that the mismatch rule reports): it is not missing from that call.
bool Reached(const RankState& r, uint32_t comm, uint64_t seq) {
  if (r.in_flight && r.in_flight->collective() && r.in_flight->comm == comm && r.in_flight->seq >= seq) return true;
  for (const OpRecord& o : r.recent)
    if (o.collective() && o.comm == comm && o.seq >= seq && o.op != "rendezvous") return true;
  return false;
}

namespace {

void Deadlocks(Ctx& c) {
  // Wait-for edges from ranks blocked in send/recv to their peer, unless the peer has the
  // matching call in flight (synchronous or not: an isend the peer issued earlier matches a recv).
  // Every rank has at most one outgoing edge, so cycles are found by following pointers.
  const int n = static_cast<int>(c.job.ranks.size());
  std::vector<int> next(n, -1);
  auto has_matching = [&](const RankState& p, const OpRecord& mine, int me) {
    auto matches = [&](const OpRecord& o) {
      return o.in_flight() && !o.collective() && o.peer == me && o.op != mine.op;
    };
    if (p.in_flight && matches(*p.in_flight)) return true;
    return std::any_of(p.recent.begin(), p.recent.end(), matches);
  };
  for (const RankState& r : c.job.ranks) {
    if (!Running(r) || !r.in_flight || r.in_flight->collective() || !r.in_flight->blocking()) continue;
    if (AgeS(SeenAt(c.job, r), r.in_flight->started_ns) < kProofSettleS) continue;
    int peer = r.in_flight->peer;
    if (peer < 0 || peer >= n) continue;
    const RankState& p = c.job.ranks[peer];
    if (!(Running(p) && has_matching(p, *r.in_flight, r.rank))) next[r.rank] = peer;
  }
  std::vector<int> color(n, 0);  // 0 new, 1 on the current path, 2 done
  for (int start = 0; start < n; ++start) {
    if (color[start] || next[start] < 0) continue;
    std::vector<int> path;
    int v = start;
    while (v >= 0 && color[v] == 0) {
      color[v] = 1;
      path.push_back(v);
      v = next[v];
    }
    if (v >= 0 && color[v] == 1) {
      std::vector<int> cycle(std::find(path.begin(), path.end(), v), path.end());
      // Every rank of the cycle must be seen blocked in its call after the others started theirs.
      bool settled = true;
      for (int r : cycle) {
        const RankState& rs = c.job.ranks[r];
        const RankState& ps = c.job.ranks[next[r]];
        if (SeenAt(c.job, rs) < ps.in_flight->started_ns) settled = false;
      }
      if (settled) {
        Finding f;
        f.code = codes::kP2pDeadlock;
        f.ranks = cycle;
        std::sort(f.ranks.begin(), f.ranks.end());
        std::vector<std::string> chain;
        for (int r : cycle) {
          chain.push_back(std::to_string(r));
          f.evidence.push_back("rank " + std::to_string(r) + ": " + WhereIs(c.job, c.job.ranks[r]));
        }
        chain.push_back(std::to_string(cycle.front()));
        f.summary = "point-to-point deadlock: ranks " + Join(chain, " → ") + " each wait for the next";
        bool all_recv = true, all_send = true;
        for (int r : cycle) {
          all_recv &= c.job.ranks[r].in_flight->op == "recv";
          all_send &= c.job.ranks[r].in_flight->op == "send";
        }
        f.remedy =
            std::string(all_recv ? "Every rank of the cycle receives first, so no one sends. "
                        : all_send
                            ? "Every rank of the cycle sends first with a blocking send (large messages do not fit the "
                              "transport's buffer), so no one receives. "
                            : "Each rank waits on a peer that waits on another. ") +
            "Order the calls so one side receives first (even ranks send, odd ranks receive), or post both with "
            "isend/irecv (torch.distributed.batch_isend_irecv) and wait on them together.";
        f.proof = proof::kTrace;
        for (int r : cycle) c.explained.insert(r);
        c.Add(std::move(f), true);
      }
    }
    for (int p : path) color[p] = 2;
  }
}

// Whether a rank's own blocking call needs one of the group's waiting ranks to finish: a
// collective on a communicator one of them belongs to, or a send/recv with one of them.
bool WaitsOnGroup(const JobState& job, const OpRecord& call, const Group& g) {
  for (int w : g.ranks) {
    if (call.collective() ? MemberOf(job.ranks[w], call.comm) : call.peer == w) return true;
  }
  return false;
}

void Missing(Ctx& c, const std::vector<Group>& groups) {
  std::set<int> reported;
  for (const Group& g : groups) {
    // Missing ranks by how sure we are where they are.
    std::vector<int> proven, suspected;
    std::vector<std::string> evidence;
    double waited_max = 0;
    bool blocked_elsewhere = false;
    for (const RankState& r : c.job.ranks) {
      if (std::binary_search(g.ranks.begin(), g.ranks.end(), r.rank) || r.status == RankStatus::kExited) continue;
      if (c.explained.count(r.rank) || reported.count(r.rank) || !MemberOf(r, g.comm)) continue;
      if (Reached(r, g.comm, g.seq)) continue;  // it made that call (a stale sample, or it differs: the mismatch rule)
      // How long the group has waited while this rank was seen elsewhere: measured to the older of
      // the two sightings.
      double waited = AgeS(std::min(g.seen_ns, SeenAt(c.job, r)), g.last_arrival_ns);
      if (waited >= kLookS && !(r.in_flight && r.in_flight->blocking()) && Blocked(r, kLookS)) c.out.look = true;
      if (waited < c.job.hang_after_s) continue;
      waited_max = std::max(waited_max, waited);
      // Proof needs a cycle: the rank blocked in a call of its own that needs some of the waiting
      // ranks. A rank outside any collective, even blocked with flat CPU and a stack that says
      // where (an evaluation waiting on the GPU, a slow read), may still come: a suspicion.
      bool cycle = r.in_flight && r.in_flight->blocking() &&
                   AgeS(SeenAt(c.job, r), r.in_flight->started_ns) >= c.job.hang_after_s &&
                   WaitsOnGroup(c.job, *r.in_flight, g);
      (cycle ? proven : suspected).push_back(r.rank);
      if (!cycle && Blocked(r, c.job.hang_after_s)) blocked_elsewhere = true;
      std::string node = r.node.empty() ? "" : " (" + r.node + ")";
      evidence.push_back("rank " + std::to_string(r.rank) + node + ": " + WhereIs(c.job, r));
    }
    std::vector<int> all = proven;
    all.insert(all.end(), suspected.begin(), suspected.end());
    if (all.empty()) continue;
    std::sort(all.begin(), all.end());
    for (int r : all) reported.insert(r);
    Finding f;
    f.code = codes::kRankMissing;
    f.ranks = all;
    f.evidence = evidence;
    f.summary = RankWord(all) + " never joined " + g.call->Describe() + " that " + RankWord(g.ranks) +
                " have waited in for " + Seconds(waited_max);
    if (!proven.empty()) {
      f.proof = proof::kTrace;
      f.summary += " (blocked in another call of their own that needs the waiting ranks: a deadlock)";
      f.remedy = "The waiting ranks cannot finish " + g.call->op +
                 " until every rank calls it, and the missing rank is blocked in a "
                 "different call (above) that needs them: the ranks issue collectives in different orders or on "
                 "different groups. "
                 "Every rank must make the same collective calls in the same order.";
      for (int r : proven) c.explained.insert(r);
    } else {
      f.proof = proof::kHeuristic;
      f.summary +=
          blocked_elsewhere ? " (blocked outside any collective: its stack says where)" : " (it is still computing)";
      f.remedy =
          "If that rank does extra work on purpose (evaluation, logging or checkpoint I/O on rank 0), the others "
          "simply wait and this resolves itself; if it never ends, the missing rank's stack (above, or py-spy dump "
          "--pid) says where it is stuck: a data loader whose workers died or hang, a lock, I/O, input(). dsdoctor "
          "does not stop a job for this; torch's process-group timeout will. Every rank must make the same collective "
          "calls in the same order.";
    }
    c.Add(f, true);
  }
}

void Stalls(Ctx& c, const std::vector<Group>& groups) {
  int running = 0;
  for (const RankState& r : c.job.ranks) running += Running(r);
  if (running == 0) return;
  if (groups.size() == 1 && static_cast<int>(groups[0].ranks.size()) == running &&
      static_cast<int>(c.job.ranks.size()) == running) {
    const Group& g = groups[0];
    double waited = AgeS(g.seen_ns, g.last_arrival_ns);
    if (waited < c.job.stall_after_s) return;
    Finding f;
    f.code = codes::kCollectiveStall;
    f.ranks = g.ranks;
    f.summary = "all " + std::to_string(running) + " ranks have been in " + g.call->Describe() + " for " +
                Seconds(waited) + " (threshold " + Seconds(c.job.stall_after_s) +
                "): they agree on the call but it does not finish";
    int spinning = 0;
    for (int r : g.ranks) spinning += c.job.ranks[r].proc.valid && c.job.ranks[r].proc.cpu_fraction >= 0.5;
    if (spinning)
      f.evidence.push_back(std::to_string(spinning) +
                           " ranks spin (CPU busy): the transport is polling for data that never arrives");
    for (const LogEvent& e : c.job.events)
      if (e.code == codes::kCommError || e.code == codes::kNcclError) {
        f.evidence.push_back("rank " + std::to_string(e.rank) + " log line " + std::to_string(e.line) + ": " +
                             e.summary);
        if (f.evidence.size() > 6) break;
      }
    for (const Finding& n : c.job.network) f.evidence.push_back("network: " + n.code + ": " + n.summary);
    f.remedy =
        "A collective every rank entered is stuck in the transport: a firewall dropping the NCCL/Gloo ports between "
        "some nodes, the wrong NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME, or a dead link. Run `dsdoctor check` on these "
        "nodes and rerun with NCCL_DEBUG=INFO.";
    f.proof = proof::kTrace;
    c.Add(std::move(f), true);
    return;
  }
  // Untraced programs (run --no-trace, or not Python): every rank blocked, with flat CPU in its
  // whole process tree and no output (a rank that never printed counts as silent), for hang_after_s.
  // Ranks in no traced call that blocks them count as untraced here: a Python rank blocked in a
  // collective DDP issues from C++ (backward), or in its data loader.
  bool blocked_in_traced_call = std::any_of(c.job.ranks.begin(), c.job.ranks.end(), [](const RankState& r) {
    return Running(r) && r.in_flight && r.in_flight->blocking();
  });
  if (blocked_in_traced_call || static_cast<int>(c.job.ranks.size()) != running ||
      c.HasCode(codes::kCollectiveMismatch))
    return;
  std::vector<int> ranks;
  double min_flat = 1e18;
  for (const RankState& r : c.job.ranks) {
    bool silent = r.last_output_ns == 0 || AgeS(SeenAt(c.job, r), r.last_output_ns) >= c.job.hang_after_s;
    if (!Blocked(r, c.job.hang_after_s) || !silent) return;
    ranks.push_back(r.rank);
    min_flat = std::min(min_flat, r.proc.flat_for_s);
  }
  // Their stacks, when captured, say where each waits.
  std::map<std::string, std::vector<int>> in_collective;  // torch.distributed function → ranks
  std::vector<int> elsewhere, unknown;
  for (const RankState& r : c.job.ranks) {
    std::string collective, location;
    if (r.stack.empty())
      unknown.push_back(r.rank);
    else if (StackCollective(r.stack, &collective, &location))
      in_collective[collective].push_back(r.rank);
    else if (StackInDdpBackward(r.stack, &location))
      in_collective["all_reduce (DDP gradients)"].push_back(r.rank);
    else
      elsewhere.push_back(r.rank);
  }
  Finding f;
  if (unknown.empty() && !in_collective.empty() && !elsewhere.empty()) {
    f.code = codes::kRankMissing;
    f.ranks = elsewhere;
    std::vector<std::string> waiting;
    for (auto& [name, rs] : in_collective)
      waiting.push_back(RankWord(rs) + " in " + (name.find(' ') == std::string::npos ? name + "()" : name));
    f.summary = RankWord(elsewhere) + " blocked outside any collective while " + Join(waiting, ", ") + " wait for " +
                (elsewhere.size() == 1 ? "it" : "them") + " (all blocked for " + Seconds(min_flat) + ")";
    for (int r : elsewhere) f.evidence.push_back("rank " + std::to_string(r) + ": " + WhereIs(c.job, c.job.ranks[r]));
    for (auto& [name, rs] : in_collective) f.evidence.push_back(RankWord(rs) + ": stack: " + c.job.ranks[rs[0]].stack);
    f.remedy =
        "The waiting ranks cannot finish until the missing rank joins, and it waits where its stack says (a data "
        "loader whose workers died or hang, a lock, I/O, input(), or a legitimately long step on one rank). Fix what "
        "it waits for; every rank must make the same collective calls in the same order.";
    // Blocked outside a collective may still end (a GPU-bound evaluation waits with flat CPU too).
    f.proof = proof::kHeuristic;
    for (int r : elsewhere) c.explained.insert(r);
    c.Add(std::move(f), true);
    return;
  }
  f.code = codes::kCollectiveStall;
  f.ranks = ranks;
  bool same_call = unknown.empty() && elsewhere.empty() && in_collective.size() == 1;
  f.summary = "all " + std::to_string(running) + " ranks are blocked: no CPU use and no output for " +
              Seconds(min_flat) +
              (same_call ? " inside " + in_collective.begin()->first
                         : std::string(" (none in a traced call: where they wait comes from their stacks)"));
  for (const RankClass& cl : ClassifyRanks(c.job)) f.evidence.push_back(RankWord(cl.ranks) + ": " + cl.description);
  f.remedy =
      "Every rank is waiting and none computes: a collective some rank did not call (compare the stacks above), a "
      "deadlock, or a stuck transport. Set a short process-group timeout (init_process_group(timeout=…)) so the "
      "ranks fail with a traceback, and compare where each one waits.";
  // Stacks in one collective for the stall threshold prove it; anything less is a suspicion.
  f.proof = same_call && min_flat >= c.job.stall_after_s ? proof::kStacks : proof::kHeuristic;
  c.Add(std::move(f), true);
}

// ---- init_distributed ------------------------------------------------------------------------------

void Rendezvous(Ctx& c) {
  std::vector<int> wrong, waiting, in_init;
  std::map<int, std::vector<int>> by_size;
  double waited = 1e18;
  bool failed_in_init = false;
  for (const RankState& r : c.job.ranks) {
    // Ranks waiting in init, or whose last call was init (they died in it: a rank with another
    // world size can also make Gloo's connect fail at once instead of waiting).
    const OpRecord* rz = Running(r) && r.in_flight && r.in_flight->op == "rendezvous"        ? &*r.in_flight
                         : r.last && r.last->op == "rendezvous" && r.last->state == "failed" ? &*r.last
                                                                                             : nullptr;
    if (!rz) continue;
    in_init.push_back(r.rank);
    if (rz->in_flight()) {
      waiting.push_back(r.rank);
      waited = std::min(waited, AgeS(SeenAt(c.job, r), rz->started_ns));
    } else {
      failed_in_init = true;
    }
    if (rz->peer > 0) by_size[rz->peer].push_back(r.rank);
  }
  if (in_init.empty()) return;
  for (auto& [size, ranks] : by_size)
    if (c.job.world_size > 0 && size != c.job.world_size) wrong.insert(wrong.end(), ranks.begin(), ranks.end());
  Finding f;
  f.code = codes::kRankMissing;
  if (!wrong.empty() && (failed_in_init || waited >= kProofSettleS)) {
    if (waiting.empty()) waited = 0;
    std::vector<std::string> sizes;
    for (auto& [size, ranks] : by_size)
      sizes.push_back(RankWord(ranks) + (ranks.size() == 1 ? " expects " : " expect ") + std::to_string(size));
    f.ranks = wrong;
    f.summary =
        "world-size disagreement: the job started " + std::to_string(c.job.world_size) + " ranks but " +
        Join(sizes, ", ") +
        (waiting.empty() ? std::string(", so init failed")
                         : ", so init waits for ranks that were never launched (waiting " + Seconds(waited) + ")");
    f.evidence.push_back("the launcher set WORLD_SIZE=" + std::to_string(c.job.world_size));
    for (int r : wrong)
      if (c.job.ranks[r].in_flight && !c.job.ranks[r].in_flight->callsite.empty())
        f.evidence.push_back("rank " + std::to_string(r) + ": init at " + c.job.ranks[r].in_flight->callsite);
    f.remedy =
        "The program asks for a world size the launch does not have (a hard-coded world_size= in init_process_group, "
        "or a hostfile with fewer slots). Take the world size from the launcher (WORLD_SIZE / env://) or launch that "
        "many ranks.";
    f.proof = proof::kTrace;
    // Every rank that failed or waits in init did so because of it.
    for (int r : in_init) c.init_consequences.insert(r);
  } else if (!waiting.empty() && waited >= c.job.hang_after_s && waiting.size() < c.job.ranks.size()) {
    for (const RankState& r : c.job.ranks)
      if (!std::binary_search(waiting.begin(), waiting.end(), r.rank) && !r.has_trace &&
          r.status != RankStatus::kExited) {
        f.ranks.push_back(r.rank);
        f.evidence.push_back("rank " + std::to_string(r.rank) + ": " + WhereIs(c.job, r));
      }
    if (f.ranks.empty()) return;
    f.summary = RankWord(f.ranks) + " never reached init_distributed that " + RankWord(waiting) +
                " have waited in for " + Seconds(waited);
    f.remedy =
        "The missing ranks are still starting (imports, data loading) or stuck before init_distributed: their stacks "
        "say where.";
    bool blocked_with_stack = true;
    for (int r : f.ranks)
      blocked_with_stack &= !c.job.ranks[r].stack.empty() && Blocked(c.job.ranks[r], c.job.hang_after_s);
    f.proof = blocked_with_stack ? proof::kStacks : proof::kHeuristic;
  } else {
    return;
  }
  for (int r : f.ranks) c.explained.insert(r);
  c.Add(std::move(f), !waiting.empty());
}

// ---- STRAGGLER -----------------------------------------------------------------------------------

void Stragglers(Ctx& c) {
  // Collectives every traced rank has started, newest last.
  // (group, seq) → (started_ns, rank): any group every traced rank is in (the world, or DeepSpeed's
  // data-parallel group of the same ranks). Ordered by the newest start, so "the last" is recent.
  std::map<std::pair<uint32_t, uint64_t>, std::vector<std::pair<int64_t, int>>> arrivals;
  int traced = 0;
  for (const RankState& r : c.job.ranks) {
    if (!r.has_trace) continue;
    ++traced;
    for (const OpRecord& rec : r.recent)
      if (rec.collective() && rec.op != "rendezvous" && rec.seq > 0 && rec.started_ns > 0)
        arrivals[{rec.comm, rec.seq}].push_back({rec.started_ns, r.rank});
  }
  if (traced < 2) return;
  std::vector<int> last_rank;
  std::vector<double> lateness;
  std::vector<std::vector<std::pair<int64_t, int>>*> newest_first;
  for (auto& [key, v] : arrivals) newest_first.push_back(&v);
  std::sort(newest_first.begin(), newest_first.end(), [](auto* a, auto* b) {
    return std::max_element(a->begin(), a->end())->first > std::max_element(b->begin(), b->end())->first;
  });
  for (auto it = newest_first.begin(); it != newest_first.end() && last_rank.size() < 8; ++it) {
    auto& v = **it;
    if (static_cast<int>(v.size()) != traced) continue;
    std::sort(v.begin(), v.end());
    int64_t median = v[v.size() / 2 - (v.size() % 2 == 0 ? 1 : 0)].first;
    last_rank.push_back(v.back().second);
    lateness.push_back(static_cast<double>(v.back().first - median) / 1e9);
  }
  if (last_rank.size() < 3) return;
  std::map<int, int> times_last;
  for (int r : last_rank) ++times_last[r];
  for (auto& [rank, n] : times_last) {
    if (n * 4 < static_cast<int>(last_rank.size()) * 3) continue;  // last in at least 75% of them
    std::vector<double> late;
    for (size_t i = 0; i < last_rank.size(); ++i)
      if (last_rank[i] == rank) late.push_back(lateness[i]);
    std::sort(late.begin(), late.end());
    double median = late[late.size() / 2];
    if (median < 0.1) continue;  // 100 ms: below that it is jitter, not a straggler
    Finding f;
    f.code = codes::kStraggler;
    f.severity = Severity::kWarning;
    f.ranks = {rank};
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "rank %d arrives last at %d of the last %zu collectives, a median %.0f ms after the others", rank, n,
                  last_rank.size(), median * 1000);
    f.summary = buf;
    f.evidence.push_back("rank " + std::to_string(rank) + ": " + WhereIs(c.job, c.job.ranks[rank]));
    f.remedy =
        "Every other rank waits for this one at each collective, so the job runs at its speed: check its node "
        "(CPU/GPU throttling, other processes, a slower GPU or link, data loading on that rank).";
    f.proof = proof::kTrace;
    c.Add(std::move(f), false);
  }
}

// ---- log events and watchdogs --------------------------------------------------------------------

void Watchdogs(Ctx& c) {
  std::vector<int> ranks;
  Finding f;
  for (const RankState& r : c.job.ranks) {
    if (!r.watchdog_fired) continue;
    ranks.push_back(r.rank);
    if (f.evidence.size() < 8)
      f.evidence.push_back("rank " + std::to_string(r.rank) + ": " +
                           (r.in_flight ? r.in_flight->Describe()
                            : r.last    ? r.last->Describe()
                                        : std::string("?")));
  }
  if (ranks.empty()) return;
  f.code = codes::kWatchdogTimeout;
  f.severity = Severity::kWarning;
  f.ranks = ranks;
  f.summary = "the runtime's watchdog fired on " + RankWord(ranks) + ": a call stayed in flight past its timeout";
  int aborted = 0;
  for (int r : ranks) aborted += c.job.ranks[r].signal == 6;
  if (aborted) f.summary += " (" + std::to_string(aborted) + " ended by its abort policy)";
  f.remedy =
      "See the finding that explains why the call could not finish; raise DSDOCTOR_TIMEOUT only if the call is "
      "legitimately slow.";
  f.proof = proof::kTrace;
  c.Add(std::move(f), false);
}

// "job.log:12 (rank 3, node-1): <text>"
std::string EventEvidence(const LogEvent& e) {
  std::string who;
  if (e.rank >= 0) who = "rank " + std::to_string(e.rank);
  if (!e.host.empty()) who += (who.empty() ? "" : ", ") + e.host;
  return e.Where() + (who.empty() ? "" : " (" + who + ")") + ": " + e.text.substr(0, 300);
}

// Two events of one combined log are ordered by their position; of different files only by
// timestamps.
bool Ordered(const LogEvent& a, const LogEvent& b) {
  return (a.file == b.file && !a.file.empty() && a.offset >= 0 && b.offset >= 0) || (a.time_ns && b.time_ns);
}
bool Before(const LogEvent& a, const LogEvent& b) {
  return a.file == b.file && !a.file.empty() && a.offset >= 0 && b.offset >= 0 ? a.offset < b.offset
                                                                               : a.time_ns < b.time_ns;
}
bool IsTimeout(const LogEvent& e) {
  return e.code == codes::kWatchdogTimeout || e.kind.find("timeout") != std::string::npos ||
         !e.Field("timeout_ms").empty() || e.summary.find("timed out") != std::string::npos ||
         e.summary.find("Timed out") != std::string::npos;
}

// ---- watchdog reports: who timed out in a collective and who never got there ---------------------

void WatchdogCulprits(Ctx& c) {
  struct Report {
    const LogEvent* e;
    std::string op;
  };
  std::map<int, Report> first;  // rank → its first watchdog report (default process group)
  for (const LogEvent& e : c.job.events) {
    if ((e.kind != "torch_watchdog" && e.kind != "torch_blocking_wait_timeout") || e.rank < 0 || e.Field("seq").empty())
      continue;
    if (!e.Field("pg").empty() && e.Field("pg") != "0") continue;
    first.emplace(e.rank, Report{&e, e.Field("op")});
  }
  if (first.empty()) return;
  // The collective most ranks report timing out in.
  std::map<std::string, std::vector<int>> by_seq;
  for (auto& [rank, r] : first) by_seq[r.e->Field("seq")].push_back(rank);
  auto top = std::max_element(by_seq.begin(), by_seq.end(),
                              [](auto& a, auto& b) { return a.second.size() < b.second.size(); });
  const std::string seq = top->first;
  std::vector<int> reporters = top->second;
  // Different OpTypes at one SeqNum: the ranks called different collectives.
  std::map<std::string, std::vector<int>> by_op;
  for (int r : reporters) by_op[first[r].op].push_back(r);
  if (by_op.size() > 1) {
    Finding f;
    f.code = codes::kCollectiveMismatch;
    std::vector<std::string> sides;
    for (auto& [op, ranks] : by_op) {
      sides.push_back(RankWord(ranks) + " in " + op);
      f.ranks.insert(f.ranks.end(), ranks.begin(), ranks.end());
      f.evidence.push_back(EventEvidence(*first[ranks[0]].e));
    }
    std::sort(f.ranks.begin(), f.ranks.end());
    f.summary = "the ranks timed out in different collectives at SeqNum " + seq + ": " + Join(sides, ", ");
    f.remedy =
        "The ranks issued different collectives at the same position: a rank-dependent branch or uneven data. Every "
        "rank must call the same collectives in the same order; TORCH_DISTRIBUTED_DEBUG=DETAIL names the call sites.";
    f.proof = proof::kLog;
    for (int r : reporters) c.echoes[first[r].e] = "the ranks disagree on the collective (see above)";
    c.Add(std::move(f), false);
    return;
  }
  const std::string op = first[reporters[0]].op;
  std::vector<int> missing;
  // Ranks with an error of their own are explained by it (the first-failure rule), not missing.
  std::set<int> with_error;
  for (const LogEvent& e : c.job.events)
    if (e.rank >= 0 && e.severity == Severity::kError && !IsTimeout(e) && !e.consequence) with_error.insert(e.rank);
  for (int r = 0; r < static_cast<int>(c.job.ranks.size()); ++r)
    if (!std::binary_search(reporters.begin(), reporters.end(), r) && !with_error.count(r)) missing.push_back(r);
  if (missing.empty()) return;  // every rank waits in it: the collective itself is stuck (network), Events says so
  // Most ranks silent: the logs at hand are more likely partial than most ranks missing.
  if (missing.size() > reporters.size()) return;
  // Ranks that visibly failed before are named by Exits(); this rule is about silent ones.
  bool all_failed = std::all_of(missing.begin(), missing.end(), [&](int r) { return Failed(c.job.ranks[r]); });
  if (all_failed) return;
  Finding f;
  f.code = codes::kRankMissing;
  f.ranks = missing;
  f.summary = RankWord(missing) + " never reached " + op + " SeqNum=" + seq + ": " + RankWord(reporters) +
              " timed out waiting in it (PyTorch's watchdog), " + (missing.size() == 1 ? "it" : "they") + " did not";
  for (int r : missing) {
    std::string where = "rank " + std::to_string(r) + ": ";
    if (auto it = first.find(r); it != first.end())
      where += "timed out elsewhere (" + it->second.op + " SeqNum=" + it->second.e->Field("seq") + ") at " +
               it->second.e->Where();
    else if (Failed(c.job.ranks[r]))
      where += "exited (" +
               std::string(c.job.ranks[r].signal ? std::string("signal ") + std::to_string(c.job.ranks[r].signal)
                                                 : "exit code " + std::to_string(c.job.ranks[r].exit_code)) +
               ")";
    else
      where +=
          "reported no timeout: it was elsewhere (a data loader, a rank-0-only step such as a checkpoint or "
          "evaluation, "
          "I/O, or a hang) when the others entered the collective";
    f.evidence.push_back(where);
  }
  for (size_t i = 0; i < reporters.size() && i < 3; ++i) f.evidence.push_back(EventEvidence(*first[reporters[i]].e));
  f.remedy =
      "The ranks that timed out are the consequence; look at what " + RankWord(missing) +
      " did instead (its last lines, or its stack on a live run: `dsdoctor run` captures it). Common causes: work only "
      "rank 0 does (saving, evaluation, logging) while the others continue into a collective, a rank-dependent branch "
      "that skips a collective, or uneven data. Every rank must make the same collective calls; raise "
      "init_process_group(timeout=...) only for legitimately slow rank-0 work.";
  f.proof = proof::kLog;
  for (int r : missing) c.explained.insert(r);
  const std::set<int> waiting(reporters.begin(), reporters.end());
  for (const LogEvent& e : c.job.events)
    if (waiting.count(e.rank) && (IsTimeout(e) || e.consequence)) c.echoes[&e] = "waited for " + RankWord(missing);
  c.Add(std::move(f), false);
}

// Ranks that timed out on the c10d store waited for a key its owner writes (rank 0, or the rank
// the message names): when that rank reported no failure of its own, it was busy elsewhere
// (preprocessing data before init_process_group, a slow first step) or hung.
void StoreCulprits(Ctx& c) {
  std::map<int, std::vector<const LogEvent*>> by_owner;  // owner → reports
  std::set<int> with_error;                              // ranks that logged an error of their own
  for (const LogEvent& e : c.job.events)
    if (e.rank >= 0 && e.severity == Severity::kError && e.kind != "torch_store_get_timeout" && !e.consequence)
      with_error.insert(e.rank);
  for (const LogEvent& e : c.job.events) {
    if (e.rank < 0 || c.echoes.count(&e)) continue;
    if (e.kind == "torch_store_get_timeout" ||
        (e.kind == "python_traceback" && e.Field("cause_kind") == "torch_store_get_timeout"))
      by_owner[0].push_back(&e);
    else if (e.kind == "torch_nccl_uniqueid_store" && e.subject_rank >= 0 &&
             e.Field("error").find("imeout") != std::string::npos)
      by_owner[e.subject_rank].push_back(&e);
  }
  for (auto& [key, reports] : by_owner) {
    const int owner = key;  // clang 14 cannot capture a structured binding
    if (owner >= static_cast<int>(c.job.ranks.size()) || c.explained.count(owner) || Failed(c.job.ranks[owner]))
      continue;
    if (with_error.count(owner)) continue;  // it failed itself: the first-failure rule says so
    std::vector<int> waiters;
    for (const LogEvent* e : reports)
      if (std::find(waiters.begin(), waiters.end(), e->rank) == waiters.end()) waiters.push_back(e->rank);
    std::sort(waiters.begin(), waiters.end());
    Finding f;
    f.code = codes::kRankMissing;
    f.ranks = {owner};
    f.summary = "rank " + std::to_string(owner) + " never wrote the c10d store key " + RankWord(waiters) +
                " timed out waiting for, and reported no error of its own";
    for (size_t i = 0; i < reports.size() && i < 4; ++i) f.evidence.push_back(EventEvidence(*reports[i]));
    f.remedy = "Rank " + std::to_string(owner) +
               " was busy or stuck while the others set up communication: slow work on it alone (tokenising or "
               "preprocessing a dataset, downloading a model, `main_process_first`) before init_process_group, "
               "new_group or the first collective, or a hang. Do that work before every rank reaches the setup (or "
               "cache it), or raise init_process_group(timeout=...); its own last lines say where it was.";
    f.proof = proof::kLog;
    c.explained.insert(owner);
    for (const LogEvent* e : reports) c.echoes[e] = "waited for rank " + std::to_string(owner);
    c.Add(std::move(f), false);
  }
}

// The first failure of a combined log: the errors of other ranks after it (timeouts, lost
// connections, remote errors) are its echo.
void FirstFailure(Ctx& c) {
  const LogEvent* root = nullptr;
  for (const LogEvent& e : c.job.events) {
    if (e.severity != Severity::kError || e.consequence || IsTimeout(e) || e.code == codes::kRankExited || e.rank < 0)
      continue;
    if (c.echoes.count(&e)) continue;
    if (root && !Ordered(*root, e)) return;  // the logs do not say what came first
    if (!root || Before(e, *root)) root = &e;
  }
  if (!root) return;
  int echoes = 0;
  for (const LogEvent& e : c.job.events) {
    if (&e == root || c.echoes.count(&e) || !Ordered(*root, e) || !Before(*root, e)) continue;
    // Timeouts, lost connections, remote and store errors follow a death; a cause of its own (an IB
    // link error, a missing interface on another node) stays an error.
    bool echo = e.consequence || IsTimeout(e) || e.code == codes::kRendezvousError ||
                e.code == codes::kWatchdogTimeout || (e.kind == "python_traceback" && e.code == codes::kCommError);
    if (!echo) continue;
    c.echoes[&e] = "after rank " + std::to_string(root->rank) + " failed first (" + root->Where() + ")";
    echoes += e.rank != root->rank;
  }
  // Only worth saying when other ranks' errors followed it.
  if (echoes) c.first_failure = root->summary;
}

void Events(Ctx& c) {
  struct Bucket {
    const LogEvent* first;
    std::vector<int> ranks;
    std::vector<std::string> evidence;
    std::set<std::string> hosts;
    std::string echo;  // why every event of the bucket is a consequence ("" when one is not)
    bool all_echo = true;
    std::set<int> rank_set;
  };
  std::vector<Bucket> buckets;
  std::map<std::string, size_t> index;
  // A mismatch the traces or watchdog reports proved: the ranks' own complaints about it (Gloo's
  // size check aborting a rank) are its echo.
  const bool mismatch_known = c.HasCode(codes::kCollectiveMismatch);
  for (const LogEvent& e : c.job.events)
    if (mismatch_known && e.code == codes::kCollectiveMismatch && !c.echoes.count(&e))
      c.echoes[&e] = "the ranks' collectives differ (above)";
  for (const LogEvent& e : c.job.events) {
    if (!e.collective.empty() && mismatch_known) continue;  // already explained
    if (e.code == codes::kRankExited && e.subject_rank >= 0 && e.subject_rank < static_cast<int>(c.job.ranks.size()) &&
        c.job.ranks[e.subject_rank].status == RankStatus::kExited)
      continue;  // the launcher's line repeats what the rank's exit says (Exits() reports it)
    auto echo = c.echoes.find(&e);
    // Lines that differ only in numbers (ports, pids, sizes) are one finding.
    std::string shape;
    for (char ch : e.summary)
      if (!(ch >= '0' && ch <= '9'))
        shape += ch;
      else if (shape.empty() || shape.back() != '#')
        shape += '#';
    std::string key = e.code + "\x1f" + e.kind + "\x1f" + shape + (echo != c.echoes.end() ? "\x1f" + echo->second : "");
    auto [it, inserted] = index.emplace(key, buckets.size());
    if (inserted) buckets.push_back({&e, {}, {}, {}, echo != c.echoes.end() ? echo->second : "", true, {}});
    Bucket& b = buckets[it->second];
    b.all_echo = b.all_echo && echo != c.echoes.end();
    int subject = e.subject_rank >= 0 ? e.subject_rank : e.rank;
    if (subject >= 0 && b.rank_set.insert(subject).second) b.ranks.push_back(subject);
    if (!e.host.empty()) b.hosts.insert(e.host);
    if (b.evidence.size() < 4) b.evidence.push_back(EventEvidence(e));
  }
  for (Bucket& b : buckets) {
    Finding f;
    f.code = b.first->code;
    f.severity = b.first->severity;
    std::sort(b.ranks.begin(), b.ranks.end());
    f.ranks = b.ranks;
    std::string who = !b.ranks.empty() ? RankWord(b.ranks)
                      : !b.hosts.empty()
                          ? (b.hosts.size() == 1 ? "node " : "nodes ") + Join({b.hosts.begin(), b.hosts.end()}, ", ")
                          : std::string("the log");
    f.summary = who + ": " + b.first->summary;
    if (b.all_echo && !b.echo.empty()) {
      f.severity = Severity::kWarning;
      f.summary += " (a consequence: " + b.echo + ")";
    } else if ((f.code == codes::kCommError || b.first->consequence) &&
               (c.HasCode(codes::kRankExited) || c.HasCode(codes::kCollectiveMismatch) ||
                c.HasCode(codes::kRankMissing))) {
      // Connection errors after a rank died or the ranks diverged are the echo, not the cause.
      f.severity = Severity::kWarning;
      f.summary += " (a consequence of the error above)";
    }
    if (!c.first_failure.empty() && b.first->summary == c.first_failure && f.severity == Severity::kError)
      f.evidence.insert(f.evidence.begin(),
                        "the first failure in the log: the errors of other ranks after it follow from it");
    for (auto& ev : b.evidence) f.evidence.push_back(std::move(ev));
    f.remedy = b.first->remedy;
    f.proof = proof::kLog;
    c.Add(std::move(f), false);
  }
}

// Agents `run` lost sight of (docs/run.md "Agent liveness"). Their ranks' states are the last ones
// seen, so nothing about those ranks is proof: findings that rest only on them are dropped, and
// the job is never called hung (and so never stopped) while some of its ranks are out of sight.
void LostAgents(Ctx& c) {
  std::set<int> unobserved;
  for (const auto& r : c.job.ranks)
    if (r.unobserved && r.status == RankStatus::kRunning) unobserved.insert(r.rank);
  for (const auto& a : c.job.agents_lost) {
    Finding f;
    f.code = codes::kAgentLost;
    f.severity = a.recovered ? Severity::kWarning : Severity::kError;
    f.nodes = {a.node};
    f.ranks = a.ranks;
    std::string who = a.ranks.empty() ? std::string("its ranks") : RankWord(a.ranks);
    if (a.recovered) {
      f.summary = "the agent on " + a.node + " was silent for " + Seconds(a.silent_s) + " and came back; " + who +
                  " went unobserved meanwhile";
      f.remedy = "a network partition or an overloaded node between this machine and " + a.node +
                 ": check the link (firewall rules, packet loss, `ping`/`mtr`) and the node's load";
    } else {
      bool dropped = a.why.rfind("connection lost", 0) == 0;
      f.summary = "the agent on " + a.node +
                  (dropped ? " is gone (" + a.why + ")" : " has sent nothing for " + Seconds(a.silent_s)) + "; " + who +
                  " on it " + (a.ranks.size() == 1 ? "is" : "are") +
                  " no longer observed (last state kept, no exit code assumed)";
      f.remedy =
          "check that " + a.node +
          " is up and reachable from this machine (ping it; firewall rules on the "
          "agent's port; `dmesg` there for an OOM kill of the agent); the ranks' own logs are in the log dir on " +
          a.node;
    }
    f.evidence = {a.why};
    f.proof = proof::kAgent;
    c.Add(std::move(f), false);
  }
  if (unobserved.empty()) return;
  auto only_unobserved = [&](const Finding& f) {
    return !f.ranks.empty() &&
           std::all_of(f.ranks.begin(), f.ranks.end(), [&](int r) { return unobserved.count(r) > 0; });
  };
  std::erase_if(c.out.findings, [&](const Finding& f) {
    return (f.code == codes::kRankMissing || f.code == codes::kCollectiveStall || f.code == codes::kStraggler) &&
           only_unobserved(f);
  });
  if (c.out.hang) {
    c.out.hang = false;
    c.out.suspect = true;
  }
}

// The file system under a node's log dir (docs/run.md "A full disk"). Full, or a write of ours
// failed: an error, since rank output, traces and stacks are being lost and ranks that print may
// fail with ENOSPC. Nearly full (under 256 MiB and under 5 % left): a warning while there is time.
void LogDirFull(Ctx& c) {
  for (const auto& d : c.job.log_dirs) {
    const bool enospc = std::any_of(d.write_errors.begin(), d.write_errors.end(), [](const std::string& e) {
      return e.find("No space left") != std::string::npos || e.find("quota") != std::string::npos;
    });
    const bool full = d.total_bytes > 0 && d.free_bytes == 0;
    const bool low = d.total_bytes > 0 && d.free_bytes < (256ull << 20) && d.free_bytes * 20 < d.total_bytes;
    if (!full && !enospc && !low) continue;
    std::string fs = (d.fs_type.empty() ? std::string("the file system") : d.fs_type) +
                     (d.mount.empty() ? "" : " mounted at " + d.mount);
    std::string space =
        FormatBytes(static_cast<double>(d.free_bytes)) + " free of " + FormatBytes(static_cast<double>(d.total_bytes));
    Finding f;
    f.code = codes::kLogDirFull;
    f.nodes = {d.node};
    for (const auto& r : c.job.ranks)
      if (r.node == d.node) f.ranks.push_back(r.rank);  // whose output is being lost
    f.proof = proof::kDisk;
    if (full || enospc) {
      f.severity = Severity::kError;
      f.summary = "the log dir on " + d.node + " is on a full file system (" + fs + ", " + space +
                  "): rank output, traces and stacks written from now on are lost, and a rank that prints may fail "
                  "with ENOSPC (errno 28, \"No space left on device\")";
    } else {
      f.severity = Severity::kWarning;
      f.summary = "the log dir on " + d.node + " is nearly full (" + fs + ", " + space + ")";
    }
    f.remedy = "free space on " + (d.mount.empty() ? d.path : d.mount) + " on " + d.node + " (`df -h " + d.path +
               "`; old run dirs, core files, checkpoints), or give the next run a --log-dir on "
               "a larger file system; dsdoctor goes on watching the job, and what was written before stays on disk";
    f.evidence.push_back("statvfs(" + d.path + "): " + space + " on " + fs);
    for (const auto& e : d.write_errors) f.evidence.push_back("write failed: " + e);
    c.Add(std::move(f), false);
  }
}

int Priority(const std::string& code) {
  static const char* kOrder[] = {
      codes::kCollectiveMismatch,  codes::kP2pDeadlock,     codes::kRankExited,      codes::kAgentLost,
      codes::kRankMissing,         codes::kCollectiveStall, codes::kOutOfMemory,     codes::kCudaError,
      codes::kNcclVersionMismatch, codes::kNcclError,       codes::kRendezvousError, codes::kLaunchError,
      codes::kCommError,           codes::kWatchdogTimeout, codes::kLogError,        codes::kStraggler};
  constexpr int n = sizeof(kOrder) / sizeof(kOrder[0]);
  for (int i = 0; i < n; ++i)
    if (code == kOrder[i]) return i;
  return n;
}

}  // namespace

std::vector<RankClass> ClassifyRanks(const JobState& job) {
  std::unordered_map<std::string, size_t> index;
  std::vector<RankClass> classes;
  for (const RankState& r : job.ranks) {
    std::string key;
    if (r.unobserved && r.status == RankStatus::kRunning) {
      key = "not observed (its agent is lost; last seen " +
            (r.in_flight ? "in " + r.in_flight->Describe() : "running") + ")";
    } else if (r.status != RankStatus::kRunning) {
      key = WhereIs(job, r);
    } else {
      key = job.logs_only  ? std::string("state unknown (the logs do not say how it ended)")
            : !r.has_trace ? std::string("running (untraced)")
            : r.in_flight  ? "in " + r.in_flight->Describe()
                           : "computing, phase " + r.phase;
      if (r.proc.valid) {
        key += std::string("; ") + (r.proc.state == 'R'   ? "running"
                                    : r.proc.state == 'S' ? "sleeping"
                                                          : std::string("state ") + r.proc.state);
        if (!r.proc.wchan.empty() && r.proc.wchan != "0") key += " in " + r.proc.wchan;
        if (r.proc.cpu_fraction >= 0.5) key += ", spinning";
      }
      if (!r.stack.empty()) key += "; stack: " + r.stack;
    }
    auto [it, inserted] = index.emplace(key, classes.size());
    if (inserted) classes.push_back({key, {}});
    classes[it->second].ranks.push_back(r.rank);
  }
  std::stable_sort(classes.begin(), classes.end(),
                   [](const RankClass& a, const RankClass& b) { return a.ranks.size() > b.ranks.size(); });
  return classes;
}

Diagnosis Diagnose(const JobState& job) {
  Ctx c{job, {}, {}};
  TraceMismatch(c);
  CrossGroupMismatch(c);
  TracebackMismatch(c);
  Rendezvous(c);
  Exits(c);
  Deadlocks(c);
  std::vector<Group> groups = WaitGroups(job);
  for (Group& g : groups) std::sort(g.ranks.begin(), g.ranks.end());
  Missing(c, groups);
  if (!c.out.hang) Stalls(c, groups);
  Stragglers(c);
  Watchdogs(c);
  WatchdogCulprits(c);
  StoreCulprits(c);
  FirstFailure(c);
  Events(c);
  LostAgents(c);
  LogDirFull(c);
  std::stable_sort(c.out.findings.begin(), c.out.findings.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    return Priority(a.code) < Priority(b.code);
  });
  // The first failure of a combined log leads: what follows it is its echo.
  auto root = std::find_if(c.out.findings.begin(), c.out.findings.end(), [](const Finding& f) {
    return !f.evidence.empty() && f.evidence[0].rfind("the first failure in the log", 0) == 0;
  });
  if (root != c.out.findings.end() && root->severity == Severity::kError)
    std::rotate(c.out.findings.begin(), root, root + 1);
  c.out.classes = ClassifyRanks(job);
  return std::move(c.out);
}

}  // namespace dsd::diagnosis
