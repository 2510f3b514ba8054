#include "diagnosis/report.h"

#include "common/strings.h"

namespace dsd::diagnosis {

std::string RenderRunText(const JobState& job, const Diagnosis& d, bool color) {
  auto paint = [&](const char* code, const std::string& s) {
    return color ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
  };
  std::string out;
  int running = 0, exited = 0;
  for (const auto& r : job.ranks)
    (r.status == RankStatus::kRunning ? running : exited) += r.status != RankStatus::kNotStarted;
  (void)running;
  if (job.logs_only) {
    // The world size is a lower bound (the largest rank a line names, or NCCL's or the store's count);
    // which ranks the logs show is said apart, so a rank no line mentions is not taken for one they
    // report on.
    const std::vector<int>& seen = job.ranks_in_logs;
    out += "dsdoctor: from logs: " + (job.world_size > 0 ? "at least " + std::to_string(job.world_size) + " ranks"
                                                         : std::string("no rank named by the lines"));
    if (!seen.empty() && static_cast<int>(seen.size()) < job.world_size)
      out +=
          "; lines from or about " + std::string(seen.size() == 1 ? "rank " : "ranks ") + FormatRanks(seen) + " only";
    out += (exited ? " (" + std::to_string(exited) + " reported as exited)" : std::string()) + "\n";
  } else {
    out += "dsdoctor: " + std::to_string(job.world_size) + " ranks (" + std::to_string(running) +
           (job.traces_stopped ? " with no exit status and a silent trace, " : " running, ") + std::to_string(exited) +
           " exited)" +
           (d.hang ? (job.job_ended || job.traces_stopped ? ": the job hung or failed in a collective"
                                                          : ": the job is hung")
                   : "") +
           "\n";
  }
  // Never a green built on missing evidence: what is missing is said first.
  if (d.findings.empty())
    out += job.evidence_missing.empty() ? paint("32", "no problems found") + "\n"
                                        : paint("33", "no problems found in what could be read; missing:") + "\n";
  else if (!job.evidence_missing.empty())
    out += paint("33", "evidence missing from this report:") + "\n";
  for (const auto& m : job.evidence_missing) out += "  - " + m + "\n";
  for (const Finding& f : d.findings) {
    const char* c = f.severity == Severity::kError ? "31" : f.severity == Severity::kWarning ? "33" : "36";
    out += "\n" + paint(c, std::string(SeverityName(f.severity)) + " " + f.code) + ": " + f.summary + "\n";
    // "  ranks: 0-3   nodes: a,b", either part alone where the finding names only one of them.
    std::string who;
    if (!f.ranks.empty()) who = "ranks: " + FormatRanks(f.ranks);
    if (!f.nodes.empty()) who += std::string(who.empty() ? "" : "   ") + "nodes: " + Join(f.nodes, ",");
    if (!who.empty()) out += "  " + who + "\n";
    for (const auto& e : f.evidence) out += "  - " + e + "\n";
    if (!f.remedy.empty()) out += "  fix: " + f.remedy + "\n";
  }
  if (!d.classes.empty()) {
    out += "\nranks by state:\n";
    size_t shown = 0;
    for (const RankClass& cl : d.classes) {
      if (++shown > 20) {
        out += "  … " + std::to_string(d.classes.size() - 20) + " more classes\n";
        break;
      }
      out += "  " + std::string(cl.ranks.size() == 1 ? "rank " : "ranks ") + FormatRanks(cl.ranks) + " (" +
             std::to_string(cl.ranks.size()) + "): " + cl.description + "\n";
    }
  }
  return out;
}

nlohmann::json RunJson(const JobState& job, const Diagnosis& d) {
  nlohmann::json j = {{"world_size", job.world_size}, {"hang", d.hang}};
  if (job.logs_only) j["logs_only"] = true;
  if (job.traces_stopped) j["traces_stopped"] = true;
  j["findings"] = nlohmann::json::array();
  for (const auto& f : d.findings) j["findings"].push_back(ToJson(f));
  j["classes"] = nlohmann::json::array();
  for (const auto& c : d.classes) j["classes"].push_back(ToJson(c));
  j["ranks"] = nlohmann::json::array();
  for (const auto& r : job.ranks) j["ranks"].push_back(ToJson(r));
  if (!job.agents_lost.empty()) {
    j["agents_lost"] = nlohmann::json::array();
    for (const auto& a : job.agents_lost)
      j["agents_lost"].push_back(
          {{"node", a.node}, {"ranks", a.ranks}, {"why", a.why}, {"silent_s", a.silent_s}, {"recovered", a.recovered}});
  }
  if (!job.evidence_missing.empty()) j["evidence_missing"] = job.evidence_missing;
  if (!job.past.empty()) {
    j["past_findings"] = nlohmann::json::array();
    for (const auto& f : job.past) j["past_findings"].push_back(ToJson(f));
  }
  if (!job.log_dirs.empty()) {
    j["log_dirs"] = nlohmann::json::array();
    for (const auto& d : job.log_dirs) j["log_dirs"].push_back(ToJson(d));
  }
  return j;
}

}  // namespace dsd::diagnosis
