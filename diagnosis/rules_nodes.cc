#include <string.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "common/run_files.h"
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

// Findings seen live that cleared (JobState::past): each one the rules did not find again, as the
// warning it was.
void PastFindings(Ctx& c) {
  for (const Finding& p : c.job.past) {
    bool again = std::any_of(c.out.findings.begin(), c.out.findings.end(),
                             [&](const Finding& f) { return f.code == p.code && f.ranks == p.ranks; });
    if (!again) c.Add(p, false);
  }
}

// The file system under a node's log dir (docs/run.md "A full disk"). Full, a write of ours
// failed, or rank output was lost: an error, since rank output, traces and stacks are being lost
// and the job's own writes there fail. Nearly full (under 256 MiB and under 5 % left): a warning
// while there is time. Ranks never fail for their output: it goes through the node's pipe, and
// what could not be written is counted here, by rank (collectors/output_pump.h).
void LogDirFull(Ctx& c) {
  for (const auto& d : c.job.log_dirs) {
    const bool enospc = std::any_of(d.write_errors.begin(), d.write_errors.end(), [](const std::string& e) {
      return e.find("No space left") != std::string::npos || e.find("quota") != std::string::npos;
    });
    const bool full = d.total_bytes > 0 && d.free_bytes == 0;
    const bool low = d.total_bytes > 0 && d.free_bytes < (256ull << 20) && d.free_bytes * 20 < d.total_bytes;
    uint64_t lost = 0, held = 0;
    std::vector<OutputLoss> losses = d.output;
    for (const auto& o : losses) lost += o.lost_bytes, held += o.held_bytes;
    if (!full && !enospc && !low && lost == 0 && held == 0) continue;
    std::string fs = (d.fs_type.empty() ? std::string("the file system") : d.fs_type) +
                     (d.mount.empty() ? "" : " mounted at " + d.mount);
    std::string space =
        FormatBytes(static_cast<double>(d.free_bytes)) + " free of " + FormatBytes(static_cast<double>(d.total_bytes));
    Finding f;
    f.code = codes::kLogDirFull;
    f.nodes = {d.node};
    // Whose output is being lost: the ranks that lost or hold some, most lost first; else every
    // rank of the node.
    std::sort(losses.begin(), losses.end(), [](const OutputLoss& a, const OutputLoss& b) {
      return a.lost_bytes != b.lost_bytes ? a.lost_bytes > b.lost_bytes : a.rank < b.rank;
    });
    for (const auto& o : losses) f.ranks.push_back(o.rank);
    if (f.ranks.empty())
      for (const auto& r : c.job.ranks)
        if (r.node == d.node) f.ranks.push_back(r.rank);
    std::sort(f.ranks.begin(), f.ranks.end());
    f.proof = proof::kDisk;
    std::string lost_text;
    if (lost > 0) {
      size_t named = 0;
      for (const auto& o : losses) {
        if (o.lost_bytes == 0) continue;
        if (named == 4) {
          lost_text += ", and more";
          break;
        }
        lost_text += std::string(named++ ? ", " : "") + "rank " + std::to_string(o.rank) + " " +
                     FormatBytes(static_cast<double>(o.lost_bytes));
      }
      lost_text = "; output that could not be written was dropped (" + FormatBytes(static_cast<double>(lost)) +
                  " in all: " + lost_text + "), and each log marks where";
    }
    if (full || enospc || lost > 0) {
      f.severity = Severity::kError;
      f.summary = "the log dir on " + d.node + " is on a full file system (" + fs + ", " + space +
                  "): traces, stacks and rank output beyond what waits in memory (1 MiB a rank) are lost, and the "
                  "job's own writes there (checkpoints) fail with ENOSPC" +
                  lost_text;
    } else if (held > 0) {
      f.severity = Severity::kWarning;
      f.summary = "the log dir on " + d.node + " refuses writes (" + fs + ", " + space +
                  "): " + FormatBytes(static_cast<double>(held)) + " of rank output waits in memory to be written";
    } else {
      f.severity = Severity::kWarning;
      f.summary = "the log dir on " + d.node + " is nearly full (" + fs + ", " + space + ")";
    }
    f.remedy = "free space on " + (d.mount.empty() ? d.path : d.mount) + " on " + d.node + " (`df -h " + d.path +
               "`; old run dirs, core files, checkpoints), or give the next run a --log-dir on "
               "a larger file system; dsdoctor goes on watching the job, the ranks never fail for their output, and "
               "what was written before stays on disk";
    f.evidence.push_back("statvfs(" + d.path + "): " + space + " on " + fs);
    for (const auto& o : losses)
      f.evidence.push_back(RankFileName(o.rank, RankFile::kLog) + ": " +
                           FormatBytes(static_cast<double>(o.lost_bytes)) + " of output lost, " +
                           FormatBytes(static_cast<double>(o.held_bytes)) + " waiting to be written");
    for (const auto& e : d.write_errors) f.evidence.push_back("write failed: " + e);
    c.Add(std::move(f), false);
  }
}

}  // namespace dsd::diagnosis::rules
