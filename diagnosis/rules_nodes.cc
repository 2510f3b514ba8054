#include <string.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "common/strings.h"
#include "diagnosis/rules.h"

namespace dsd::diagnosis::rules {

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

}  // namespace dsd::diagnosis::rules
