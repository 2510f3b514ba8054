#include "collectors/slurm_accounting.h"

#include <algorithm>
#include <map>
#include <set>

#include "common/strings.h"

namespace dsd::collectors {

namespace {

using diagnosis::Finding;
using diagnosis::Severity;
namespace codes = diagnosis::codes;

// "CANCELLED by 1000" → "CANCELLED"; "RUNNING+" (a truncated column) → "RUNNING".
std::string BaseState(const std::string& state) {
  std::string s = state.substr(0, state.find(' '));
  while (!s.empty() && s.back() == '+') s.pop_back();
  return s;
}

// "0:9" → 9; "" or no signal → 0.
int SignalOf(const std::string& exit_code) {
  const size_t colon = exit_code.find(':');
  return colon == std::string::npos ? 0 : std::atoi(exit_code.c_str() + colon + 1);
}
int ExitOf(const std::string& exit_code) { return exit_code.empty() ? 0 : std::atoi(exit_code.c_str()); }

std::string What(const SacctRecord& r, const std::string& job_id) {
  if (r.job_id == job_id || r.job_id.find('.') == std::string::npos) return "job " + r.job_id;
  return "step " + r.job_id;
}

std::string Evidence(const SacctRecord& r, const std::string& source) {
  std::string e = source + ": " + r.job_id + (r.name.empty() ? "" : " (" + r.name + ")") + " " + r.state;
  if (!r.exit_code.empty()) e += ", exit code " + r.exit_code;
  if (!r.derived_exit_code.empty() && r.derived_exit_code != "0:0") e += ", derived exit code " + r.derived_exit_code;
  if (!r.node_list.empty()) e += ", on " + r.node_list;
  if (!r.elapsed.empty()) e += ", after " + r.elapsed;
  if (!r.reason.empty() && r.reason != "None") e += ", reason " + r.reason;
  return e;
}

// What each end state Slurm records means for a training job, and what to do.
struct StateRule {
  const char* state;
  const char* code;
  Severity severity;
  // The scheduler's act explains the ranks' deaths the other findings describe, so it leads the
  // report (FAILED only restates them; PREEMPTED and CANCELLED are warnings).
  bool leads;
  const char* summary;  // after "Slurm: <job or step> "
  const char* remedy;
};
constexpr StateRule kStateRules[] = {
    {"OUT_OF_MEMORY", codes::kOutOfMemory, Severity::kError, true,
     "was killed for exceeding its memory (OUT_OF_MEMORY)",
     "A process of the step used more host memory than the job asked for, and Slurm (the cgroup's OOM killer or "
     "OverMemoryKill) killed it, and with it that node's ranks. Ask for more (--mem, --mem-per-cpu or "
     "--mem-per-gpu) or lower host memory use: fewer data-loader workers or prefetch, no dataset held in RAM, less "
     "pinned memory, ZeRO CPU offload sized to the node. `sacct -j ID -o JobID,MaxRSS,ReqMem` shows the peak."},
    {"NODE_FAIL", codes::kSlurmJobState, Severity::kError, true, "ended because a node failed (NODE_FAIL)",
     "A node of the job stopped answering Slurm (hardware, kernel, slurmd or network): `sinfo -R` and "
     "`scontrol show node NODE` give Slurm's reason. Resubmit without it (--exclude=NODE) and resume from the last "
     "checkpoint; tell the cluster's admins."},
    {"BOOT_FAIL", codes::kSlurmJobState, Severity::kError, true, "never started: its nodes failed to boot (BOOT_FAIL)",
     "Slurm could not boot or power up the allocated nodes: resubmit, excluding them (--exclude), and tell the "
     "cluster's admins (`sinfo -R`)."},
    {"TIMEOUT", codes::kSlurmJobState, Severity::kError, true, "reached its time limit and was cancelled (TIMEOUT)",
     "If the report shows a hang, the hang used up the time: fix what it names. Otherwise the job needs more time "
     "than it asked for: ask for more (--time) or checkpoint more often and resume, and set --signal=USR1@120 so "
     "the script can save before the limit."},
    {"DEADLINE", codes::kSlurmJobState, Severity::kError, true, "passed its --deadline and was cancelled (DEADLINE)",
     "The job could not finish before the deadline it set: move the deadline or ask for less time."},
    {"PREEMPTED", codes::kSlurmJobState, Severity::kWarning, false,
     "was preempted by a higher-priority job (PREEMPTED)",
     "Nothing in the job failed: the scheduler took its nodes. Submit with --requeue (and resume from the last "
     "checkpoint on restart) or to a partition/QOS that is not preemptible."},
    {"CANCELLED", codes::kSlurmJobState, Severity::kWarning, false, "was cancelled (scancel)",
     "A person, a script or an administrator (by uid 0) ran scancel: `sacct -j ID -o JobID,State` names the uid. "
     "If a hang is named above, someone stopped a job that was not progressing."},
    {"FAILED", codes::kSlurmJobState, Severity::kError, false, "failed",
     "Slurm saw a non-zero exit code; the ranks' own lines (and the findings above) say why. `sacct -j ID` lists "
     "each step's exit code and nodes."},
};

const StateRule* RuleFor(const std::string& base) {
  for (const StateRule& r : kStateRules)
    if (base == r.state) return &r;
  return nullptr;
}

std::vector<int> RanksOn(const std::vector<std::string>& nodes, const std::map<std::string, std::set<int>>& by_node) {
  std::set<int> ranks;
  for (const auto& n : nodes)
    if (auto it = by_node.find(n); it != by_node.end()) ranks.insert(it->second.begin(), it->second.end());
  return {ranks.begin(), ranks.end()};
}

void AddUnique(std::vector<std::string>* to, const std::vector<std::string>& from) {
  for (const auto& s : from)
    if (std::find(to->begin(), to->end(), s) == to->end()) to->push_back(s);
}

// sacct's column names and the record's fields (JobID/JobIDRaw apart: either gives the id).
constexpr std::pair<std::string_view, std::string SacctRecord::*> kSacctFields[] = {
    {"JobName", &SacctRecord::name},       {"State", &SacctRecord::state},
    {"ExitCode", &SacctRecord::exit_code}, {"DerivedExitCode", &SacctRecord::derived_exit_code},
    {"NodeList", &SacctRecord::node_list}, {"Elapsed", &SacctRecord::elapsed},
    {"Start", &SacctRecord::start},        {"End", &SacctRecord::end},
    {"Reason", &SacctRecord::reason},
};

}  // namespace

Result<std::vector<SacctRecord>> ParseSacct(std::string_view text) {
  std::vector<SacctRecord> out;
  std::vector<std::string> header;
  int line_no = 0;
  for (const std::string& raw : Split(text, '\n')) {
    ++line_no;
    const std::string line(Trim(raw));
    if (line.empty()) continue;
    std::vector<std::string> fields = Split(line, '|');
    if (header.empty()) {
      header = fields;
      if (std::find(header.begin(), header.end(), "JobID") == header.end())
        return InvalidArgument("sacct output, line " + std::to_string(line_no) +
                               ": expected a header naming JobID (--parsable2 without --noheader), got '" +
                               line.substr(0, 200) + "'");
      continue;
    }
    // The last column may hold '|' (a reason): extra fields join it.
    if (fields.size() > header.size()) {
      for (size_t i = header.size(); i < fields.size(); ++i) fields[header.size() - 1] += "|" + fields[i];
      fields.resize(header.size());
    }
    if (fields.size() < header.size())
      return InvalidArgument("sacct output, line " + std::to_string(line_no) + ": " + std::to_string(fields.size()) +
                             " fields where the header has " + std::to_string(header.size()));
    SacctRecord r;
    r.line = line_no;
    for (size_t i = 0; i < header.size(); ++i) {
      const std::string& name = header[i];
      std::string& value = fields[i];
      if (name == "JobID" || name == "JobIDRaw") {
        if (r.job_id.empty() || name == "JobID") r.job_id = value;
        continue;
      }
      for (const auto& [field, member] : kSacctFields)
        if (name == field) r.*member = std::move(value);
    }
    if (r.job_id.empty()) return InvalidArgument("sacct output, line " + std::to_string(line_no) + ": no JobID");
    out.push_back(std::move(r));
  }
  if (header.empty()) return InvalidArgument("sacct output is empty (no header line)");
  return out;
}

void AddSlurmJobFindings(const std::string& job_id, const std::vector<SacctRecord>& records,
                         const diagnosis::JobState& job, const std::string& source, std::vector<Finding>* findings) {
  std::map<std::string, std::set<int>> by_node;
  for (const auto& r : job.ranks)
    if (!r.node.empty()) by_node[r.node].insert(r.rank);
  for (const auto& e : job.events)
    if (e.rank >= 0 && !e.host.empty() &&
        (e.rank >= static_cast<int>(job.ranks.size()) || job.ranks[e.rank].node.empty()))
      by_node[e.host].insert(e.rank);

  const bool explained =
      std::any_of(findings->begin(), findings->end(), [](const Finding& f) { return f.severity == Severity::kError; });
  // One finding per end state, over every record in it (several steps killed for memory are one),
  // in the order the states first appear. Its nodes are those of its most specific records: a
  // numbered step's node is the culprit, the job's record (which takes the state of its worst
  // step) names every node of the job.
  struct StateFinding {
    const StateRule* rule = nullptr;  // null: not one of kStateRules (a derived signal, a clean end)
    int level = 0;                    // of its records: 0 the job, 1 batch/extern step, 2 a numbered step
    Finding f;
  };
  std::vector<StateFinding> states;
  const SacctRecord* job_record = nullptr;
  for (const SacctRecord& r : records) {
    if (r.job_id == job_id) job_record = &r;
    const std::string base = BaseState(r.state);
    const StateRule* rule = RuleFor(base);
    const bool helper_step = r.job_id.ends_with(".batch") || r.job_id.ends_with(".extern");
    // The batch and extern steps end CANCELLED/FAILED as consequences of the job's own end.
    if (!rule || (helper_step && base != "OUT_OF_MEMORY")) continue;
    const int level = r.job_id.find('.') == std::string::npos ? 0 : helper_step ? 1 : 2;
    auto it = std::find_if(states.begin(), states.end(), [&](const StateFinding& s) { return s.rule == rule; });
    const bool fresh = it == states.end();
    if (fresh) {
      it = states.insert(states.end(), StateFinding{rule, level, {}});
      it->f.code = rule->code;
      it->f.severity = base == "FAILED" && explained ? Severity::kWarning : rule->severity;
      it->f.remedy = rule->remedy;
      it->f.proof = diagnosis::proof::kScheduler;
    }
    Finding& f = it->f;
    if (fresh || level > it->level) {
      it->level = level;
      f.summary = "Slurm: " + What(r, job_id) + " " + rule->summary;
      if (base == "CANCELLED" && r.state.size() > base.size()) f.summary += " " + r.state.substr(base.size() + 1);
      if (base == "FAILED" && !r.exit_code.empty()) f.summary += " with exit code " + r.exit_code;
      f.nodes = r.nodes;
    } else if (level == it->level) {
      AddUnique(&f.nodes, r.nodes);
    }
    f.evidence.push_back(Evidence(r, source));
  }
  // A job that ended well by Slurm's account but with a step killed by a signal (sacct --completion
  // keeps only the job's record: this is all it says of a step's OOM kill).
  const bool job_state_said = job_record && std::any_of(states.begin(), states.end(), [&](const StateFinding& s) {
                                return s.rule == RuleFor(BaseState(job_record->state));
                              });
  if (job_record && !job_state_said) {
    const int signal = SignalOf(job_record->derived_exit_code);
    if (signal != 0) {
      Finding f;
      f.code = codes::kSlurmJobState;
      f.severity = Severity::kWarning;
      f.summary = "Slurm: a step of job " + job_id + " was killed by signal " + std::to_string(signal) +
                  (signal == 9 ? " (SIGKILL: Slurm's memory enforcement, a time limit or scancel)" : "") +
                  ", though the job ended " + BaseState(job_record->state);
      f.nodes = job_record->nodes;
      f.evidence.push_back(Evidence(*job_record, source));
      f.remedy =
          "The batch script ended well, but one of its steps did not: the job's output (slurmstepd's lines) and "
          "`sacct -j " +
          job_id +
          "` (with accounting storage) name the step and why; a SIGKILL with 'exceeded memory limit' is the "
          "memory it asked for.";
      f.proof = diagnosis::proof::kScheduler;
      states.push_back({nullptr, 0, std::move(f)});
    } else if (ExitOf(job_record->exit_code) == 0 && BaseState(job_record->state) == "COMPLETED") {
      Finding f;
      f.code = codes::kSlurmJobState;
      f.severity = Severity::kInfo;
      f.summary = "Slurm: job " + job_id + " COMPLETED, exit code " + job_record->exit_code;
      f.nodes = job_record->nodes;
      f.evidence.push_back(Evidence(*job_record, source));
      f.proof = diagnosis::proof::kScheduler;
      states.push_back({nullptr, 0, std::move(f)});
    }
  }

  for (StateFinding& s : states) {
    Finding& f = s.f;
    f.ranks = RanksOn(f.nodes, by_node);
    if (!f.ranks.empty() && f.nodes.size() <= 8) {
      std::string ranks;
      for (int r : f.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      f.summary += " on " + Join(f.nodes, ",") + " (rank" + (f.ranks.size() > 1 ? "s " : " ") + ranks + ")";
    } else if (!f.nodes.empty() && f.nodes.size() <= 8) {
      f.summary += " on " + Join(f.nodes, ",");
    }
  }
  // Findings the job's own lines gave a node but no rank (slurmstepd names its node) take that
  // node's ranks: the culprit a user acts on is a rank.
  for (Finding& f : *findings)
    if (f.ranks.empty() && !f.nodes.empty()) f.ranks = RanksOn(f.nodes, by_node);
  size_t causes = 0;
  for (StateFinding& s : states) {
    Finding& f = s.f;
    // The job's own log already named this (slurmstepd's "exceeded memory limit" on that node).
    auto same = std::find_if(findings->begin(), findings->end(), [&](const Finding& g) {
      if (g.code != f.code || f.code == codes::kSlurmJobState) return false;
      for (const auto& n : f.nodes)
        if (std::find(g.nodes.begin(), g.nodes.end(), n) != g.nodes.end()) return true;
      return f.nodes.empty() || g.nodes.empty();
    });
    if (same != findings->end()) {
      AddUnique(&same->evidence, f.evidence);
      for (int r : f.ranks)
        if (std::find(same->ranks.begin(), same->ranks.end(), r) == same->ranks.end()) same->ranks.push_back(r);
      std::sort(same->ranks.begin(), same->ranks.end());
      AddUnique(&same->nodes, f.nodes);
      continue;
    }
    const bool leads = s.rule && s.rule->leads;
    findings->insert(leads ? findings->begin() + causes++ : findings->end(), std::move(f));
  }
  diagnosis::SortBySeverity(*findings);
}

}  // namespace dsd::collectors
