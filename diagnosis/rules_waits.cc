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

// ---- RANK_MISSING, P2P_DEADLOCK, COLLECTIVE_STALL -------------------------------------------------

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

namespace {
// Whether a rank's own blocking call needs one of the group's waiting ranks to finish: a
// collective on a communicator one of them belongs to, or a send/recv with one of them.
bool WaitsOnGroup(const JobState& job, const OpRecord& call, const Group& g) {
  for (int w : g.ranks) {
    if (call.collective() ? MemberOf(job.ranks[w], call.comm) : call.peer == w) return true;
  }
  return false;
}
}  // namespace

namespace {
// "40 ms" under a second (the gaps between a killed rank and mpirun's teardown), else Seconds().
std::string Gap(double s) { return s < 1 ? std::to_string(static_cast<int>(s * 1000 + 0.5)) + " ms" : Seconds(s); }
}  // namespace

void Missing(Ctx& c, const std::vector<Group>& groups) {
  std::set<int> reported;
  // The two oldest last heartbeats (0: no beat), found once: whether a rank's trace stopped well
  // before every other's is a look-up, not a pass over all ranks for each candidate (16,000 ranks).
  int64_t oldest_ns = INT64_MAX, second_ns = INT64_MAX;
  int oldest_rank = -1;
  if (c.job.traces_stopped)
    for (const RankState& r : c.job.ranks) {
      if (r.heartbeat_ns <= 0) continue;
      if (r.heartbeat_ns < oldest_ns) {
        second_ns = oldest_ns;
        oldest_ns = r.heartbeat_ns;
        oldest_rank = r.rank;
      } else if (r.heartbeat_ns < second_ns) {
        second_ns = r.heartbeat_ns;
      }
    }
  for (const Group& g : groups) {
    // The waiting ranks' last heartbeat: when the job's end (traces_stopped) cut their wait off.
    int64_t waiters_end_ns = 0;
    for (int w : g.ranks) waiters_end_ns = std::max(waiters_end_ns, c.job.ranks[w].heartbeat_ns);
    // Post-mortem, the wait was cut off by the job's end, so its length proves nothing. A rank whose
    // trace stopped beating before the last waiter entered, or well before every other rank's, died
    // or froze before it could join: it is named however short the wait was.
    auto stopped_first = [&](const RankState& r) {
      if (!c.job.traces_stopped || r.heartbeat_ns <= 0) return false;
      if (r.heartbeat_ns + kStoppedBeforeNs < g.last_arrival_ns) return true;
      const int64_t others_oldest_ns = r.rank == oldest_rank ? second_ns : oldest_ns;
      return others_oldest_ns == INT64_MAX || others_oldest_ns - r.heartbeat_ns >= kStoppedFirstNs;
    };
    // Missing ranks by how sure we are where they are.
    std::vector<int> proven, suspected, stopped;
    std::vector<std::string> evidence;
    double waited_max = 0;
    bool blocked_elsewhere = false, unseen = false;
    for (const RankState& r : c.job.ranks) {
      if (std::binary_search(g.ranks.begin(), g.ranks.end(), r.rank) || r.status == RankStatus::kExited) continue;
      if (c.explained.count(r.rank) || reported.count(r.rank) || !MemberOf(r, g.comm)) continue;
      if (Reached(r, g.comm, g.seq)) continue;  // it made that call (a stale sample, or it differs: the mismatch rule)
      // How long the group has waited while this rank was seen elsewhere: measured to the older of
      // the two sightings.
      double waited = AgeS(std::min(g.seen_ns, SeenAt(c.job, r)), g.last_arrival_ns);
      if (waited >= kLookS && !(r.in_flight && r.in_flight->blocking()) && Blocked(r, kLookS)) c.out.look = true;
      const bool cut_off = stopped_first(r);
      if (waited < c.job.hang_after_s && !cut_off) continue;
      waited_max = std::max(waited_max, waited);
      std::string node = r.node.empty() ? "" : " (" + r.node + ")";
      if (cut_off) {
        stopped.push_back(r.rank);
        evidence.push_back("rank " + std::to_string(r.rank) + node + ": " + WhereIs(c.job, r));
        evidence.push_back("rank " + std::to_string(r.rank) + "'s trace stopped beating " +
                           (r.heartbeat_ns + kStoppedBeforeNs < g.last_arrival_ns
                                ? Gap(AgeS(g.last_arrival_ns, r.heartbeat_ns)) + " before the last of " +
                                      RankWord(g.ranks) + " entered " + g.call->Describe()
                                : Gap(AgeS(waiters_end_ns, r.heartbeat_ns)) + " before theirs") +
                           "; theirs stopped " + Gap(AgeS(waiters_end_ns, g.last_arrival_ns)) +
                           " into the call, with the job");
        continue;
      }
      // Proof needs a cycle: the rank blocked in a call of its own that needs some of the waiting
      // ranks. A rank outside any collective, even blocked with flat CPU and a stack that says
      // where (an evaluation waiting on the GPU, a slow read), may still come: a suspicion.
      bool cycle = r.in_flight && r.in_flight->blocking() &&
                   AgeS(SeenAt(c.job, r), r.in_flight->started_ns) >= c.job.hang_after_s &&
                   WaitsOnGroup(c.job, *r.in_flight, g);
      (cycle ? proven : suspected).push_back(r.rank);
      if (!cycle && Blocked(r, c.job.hang_after_s)) blocked_elsewhere = true;
      // Neither its process nor its stack was seen (a Flight Recorder dump, a trace from a run dir):
      // whether it computes or is stuck is unknown.
      if (!cycle && !r.proc.valid && r.stack.empty()) unseen = true;
      evidence.push_back("rank " + std::to_string(r.rank) + node + ": " + WhereIs(c.job, r));
    }
    std::vector<int> all = proven;
    all.insert(all.end(), suspected.begin(), suspected.end());
    all.insert(all.end(), stopped.begin(), stopped.end());
    if (all.empty()) continue;
    std::sort(all.begin(), all.end());
    for (int r : all) reported.insert(r);
    Finding f;
    f.code = codes::kRankMissing;
    f.ranks = all;
    f.evidence = evidence;
    f.summary = RankWord(all) + " never joined " + g.call->Describe() + " that " + RankWord(g.ranks) +
                (g.ranks.size() == 1 ? " has" : " have") + " waited in for " + Seconds(waited_max);
    if (!stopped.empty() && proven.empty() && suspected.empty()) {
      f.proof = proof::kHeuristic;
      f.summary = RankWord(stopped) + " never joined " + g.call->Describe() + " that " + RankWord(g.ranks) +
                  (g.ranks.size() == 1 ? " was" : " were") + " waiting in when the job's processes stopped: " +
                  (stopped.size() == 1 ? "its trace" : "their traces") +
                  " stopped beating first, outside the collective (it died or froze there)";
      f.remedy =
          "The others waited for a rank that was already gone, and the job ended with them inside the call. Nothing "
          "in this folder says how that rank ended (no exit status, no log): look in the launcher's output "
          "(mpirun/srun stderr: 'exited on signal 9', 'Killed'), the node's kernel log (dmesg: the OOM killer, a GPU "
          "Xid) and the scheduler's record (sacct -j JOB) for that rank's host and time. Run the job under "
          "`dsdoctor run`, or keep mpirun's stderr beside the traces (2> DIR/launcher.log), to have every rank's "
          "end recorded.";
      for (int r : stopped) c.explained.insert(r);
    } else if (!proven.empty()) {
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
      f.summary += blocked_elsewhere ? " (blocked outside any collective: its stack says where)"
                   : unseen          ? " (outside any collective; whether it still computes was not seen)"
                                     : " (it is still computing)";
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

}  // namespace dsd::diagnosis::rules
