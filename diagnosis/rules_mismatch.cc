#include <string.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "common/strings.h"
#include "diagnosis/rules.h"

namespace dsd::diagnosis::rules {

// ---- COLLECTIVE_MISMATCH from traces ------------------------------------------------------------

namespace {
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
// Whether `call` repeats what its callsite issued before on communicator `comm` (any rank's
// records before `seq`): 1 when one of them was the same call, 0 when there were some and none
// was, -1 when there were none (the callsite is new, or it has no name).
int SameAsEarlierCalls(const JobState& job, const OpRecord& call, uint32_t comm, uint64_t seq) {
  if (call.callsite.empty()) return -1;
  int seen = -1;
  for (const RankState& r : job.ranks) {
    for (const OpRecord& rec : r.recent) {
      if (rec.comm != comm || rec.seq == 0 || rec.seq >= seq || !rec.collective() || rec.callsite != call.callsite)
        continue;
      if (rec.SameCall(call)) return 1;
      seen = 0;
    }
  }
  return seen;
}
}  // namespace

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
        // Otherwise the earlier calls of the same callsite decide: a side that repeats what that
        // callsite always issued is not the one that changed. (Ties also arise when the ranks that
        // would outvote the culprit never reached the call: stopped after the culprit failed.)
        std::vector<bool> changed(sides.size(), false);
        if (tie) {
          size_t n_changed = 0, n_kept = 0;
          for (size_t s = 0; s < sides.size(); ++s) {
            int h = SameAsEarlierCalls(c.job, *sides[s], entries[i].comm, entries[i].seq);
            changed[s] = h == 0;
            n_changed += h == 0;
            n_kept += h == 1;
          }
          if (n_changed == 0 || n_kept == 0)
            std::fill(changed.begin(), changed.end(), false);
          else
            tie = false;
        }
        const bool by_history = std::find(changed.begin(), changed.end(), true) != changed.end();
        Finding f;
        f.code = codes::kCollectiveMismatch;
        f.severity = Severity::kError;
        std::vector<std::string> parts;
        for (size_t s = 0; s < sides.size(); ++s) {
          bool culprit = tie || (by_history ? changed[s] : s != largest);
          if (culprit) f.ranks.insert(f.ranks.end(), side_ranks[s].begin(), side_ranks[s].end());
          parts.push_back(RankWord(side_ranks[s]) + " called " + sides[s]->Describe());
          std::string ev = RankWord(side_ranks[s]) + ": " + sides[s]->Describe() + " [" + sides[s]->state + "]";
          if (sides[s]->in_flight()) ev += " for " + Seconds(AgeS(c.job.now_ns, sides[s]->started_ns));
          f.evidence.push_back(ev);
          if (by_history && changed[s])
            f.evidence.push_back(RankWord(side_ranks[s]) + " changed: the earlier calls at @" + sides[s]->callsite +
                                 " were like the other side's");
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

}  // namespace dsd::diagnosis::rules
