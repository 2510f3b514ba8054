#include "diagnosis/engine.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "diagnosis/rules.h"

namespace dsd::diagnosis {

using namespace rules;

namespace {

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
                           : (job.traces_stopped ? "outside any collective, phase " : "computing, phase ") + r.phase;
      // Post-mortem: where each rank was when its trace stopped, not what it does now.
      if (job.traces_stopped && !job.logs_only && r.has_trace) key += " (where its trace ends)";
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
  FlightRecorderAnalysis(c);
  WatchdogCulprits(c);
  DumpSignals(c);
  HorovodStalls(c);
  StoreCulprits(c);
  InternalErrorsOfALostPeer(c);
  FirstFailure(c);
  Events(c);
  LostAgents(c);
  LogDirFull(c);
  PastFindings(c);
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
