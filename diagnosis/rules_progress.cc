#include <string.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "common/strings.h"
#include "diagnosis/rules.h"

namespace dsd::diagnosis::rules {

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
                (waiting.size() == 1 ? " has" : " have") + " waited in for " + Seconds(waited);
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
  // The newest collectives every traced rank started (up to 32), and among them those where the
  // others waited for the last arrival (≥ 100 ms after the median: below that it is jitter). Only
  // those count: a program makes several collectives per step (DeepSpeed 0.19's step adds one, ZeRO-3
  // dozens), and a late rank shows in the first one of each step only.
  std::vector<int> last_rank;
  std::vector<double> lateness;
  std::vector<std::vector<std::pair<int64_t, int>>*> newest_first;
  for (auto& [key, v] : arrivals) newest_first.push_back(&v);
  std::sort(newest_first.begin(), newest_first.end(), [](auto* a, auto* b) {
    return std::max_element(a->begin(), a->end())->first > std::max_element(b->begin(), b->end())->first;
  });
  size_t considered = 0;
  for (auto it = newest_first.begin(); it != newest_first.end() && considered < 32; ++it) {
    auto& v = **it;
    if (static_cast<int>(v.size()) != traced) continue;
    ++considered;
    std::sort(v.begin(), v.end());
    int64_t median = v[v.size() / 2 - (v.size() % 2 == 0 ? 1 : 0)].first;
    double late = static_cast<double>(v.back().first - median) / 1e9;
    if (late < 0.1) continue;
    last_rank.push_back(v.back().second);
    lateness.push_back(late);
  }
  std::map<int, int> times_last;
  for (int r : last_rank) ++times_last[r];
  for (auto& [rank, n] : times_last) {
    if (n < 3 || n * 4 < static_cast<int>(last_rank.size()) * 3) continue;  // last in at least 75% of them
    std::vector<double> late;
    for (size_t i = 0; i < last_rank.size(); ++i)
      if (last_rank[i] == rank) late.push_back(lateness[i]);
    std::sort(late.begin(), late.end());
    double median = late[late.size() / 2];
    Finding f;
    f.code = codes::kStraggler;
    f.severity = Severity::kWarning;
    f.ranks = {rank};
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "rank %d arrives last at %d of the last %zu collectives the others waited at, a median %.0f ms after "
                  "them",
                  rank, n, last_rank.size(), median * 1000);
    f.summary = buf;
    f.evidence.push_back("rank " + std::to_string(rank) + ": " + WhereIs(c.job, c.job.ranks[rank]));
    f.remedy =
        "Every other rank waits for this one at each collective, so the job runs at its speed: check its node "
        "(CPU/GPU throttling, other processes, a slower GPU or link, data loading on that rank).";
    f.proof = proof::kTrace;
    c.Add(std::move(f), false);
  }
}

}  // namespace dsd::diagnosis::rules
