// `dsdoctor analyze` (docs/run.md "Analyzing log files"): a run dir, log files or standard input
// through the same diagnosis engine as `run`.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "collectors/log_catalogue.h"
#include "collectors/run_dir.h"
#include "collectors/slurm_accounting.h"
#include "collectors/source_formats.h"
#include "coordinator/slurm.h"
#include "diagnosis/engine.h"
#include "diagnosis/report.h"

namespace dsd::cli {

int RunAnalyze(const AnalyzeOptions& o) {
  if (o.list_patterns) {
    std::cout << collectors::CatalogueMarkdown();
    return kExitOk;
  }
  if (o.coverage) {
    std::cout << collectors::CoverageMarkdown();
    return kExitOk;
  }
  if (!o.explain.empty()) {
    std::string text = collectors::ExplainPatterns(o.explain);
    if (text.empty()) {
      std::cerr << "dsdoctor analyze: --explain " << o.explain
                << ": no pattern has that finding code or kind (dsdoctor analyze --explain all lists them)\n";
      return kExitUsage;
    }
    std::cout << text;
    return kExitOk;
  }
  std::vector<std::string> warnings;
  std::vector<std::string> paths = o.paths;
  // Slurm's records come first: with no path, the job's own output file is the log.
  std::optional<coordinator::SlurmJobRecords> slurm;
  std::string slurm_missing;
  std::vector<std::string> job_output;
  if (!o.slurm_job.empty()) {
    auto q = coordinator::QuerySlurmJob(o.slurm_job);
    if (!q.ok() && q.status().code() == StatusCode::kInvalidArgument) {
      std::cerr << "dsdoctor analyze: " << q.status().message() << "\n";
      return kExitUsage;
    }
    if (q.ok()) {
      slurm = std::move(*q);
      for (const auto& n : slurm->notes) warnings.push_back(n);
      for (const auto& f : slurm->output_files)
        if (std::find(paths.begin(), paths.end(), f) == paths.end() && ::access(f.c_str(), R_OK) == 0)
          job_output.push_back(f);
    } else {
      slurm_missing = "Slurm's records of job " + o.slurm_job + ": " + q.status().message();
    }
    if (paths.empty()) paths = std::exchange(job_output, {});
  }
  if (paths.empty()) {
    std::cerr << "dsdoctor analyze: give a run dir, one or more log files, or - for standard input"
              << (o.slurm_job.empty() ? "" : " (Slurm names no readable output file of job " + o.slurm_job + ")")
              << "\n";
    return kExitUsage;
  }
  collectors::RunDirOptions opts{o.timeout_s, o.hang_after_s};
  opts.on_idle = [](const std::string& name) {
    std::cerr << "dsdoctor analyze: waiting for more of " << name
              << ": nothing came for 2 s and it is still open (its writer has not closed it; Ctrl-D ends a "
                 "terminal's input)\n";
  };
  bool run_dir = false;
  for (const auto& p : paths) run_dir |= std::filesystem::is_directory(p);
  // Beside log files, the job's output is one more log; beside a run dir, its lines are added.
  if (!run_dir) paths.insert(paths.end(), job_output.begin(), job_output.end());
  auto job = collectors::LoadLogs(paths, opts, &warnings);
  if (!job.ok()) {
    std::cerr << "dsdoctor analyze: " << job.status().message() << "\n";
    return kExitUsage;
  }
  if (run_dir && !job_output.empty()) {
    if (Status st = collectors::AddCombinedLogs(job_output, &*job, &warnings); !st.ok())
      warnings.push_back(st.message());
  }
  // Never a report that looks complete without what Slurm was asked for.
  if (!slurm_missing.empty()) job->evidence_missing.push_back(slurm_missing);
  for (const auto& w : warnings) std::cerr << "dsdoctor analyze: warning: " << w << "\n";
  diagnosis::Diagnosis d = diagnosis::Diagnose(*job);
  if (slurm) collectors::AddSlurmJobFindings(o.slurm_job, slurm->records, *job, slurm->source, &d.findings);
  if (o.json) {
    nlohmann::json j = diagnosis::RunJson(*job, d);
    // The classified lines behind the findings, each with its file:line (docs/run.md).
    j["events"] = nlohmann::json::array();
    for (const auto& e : job->events) j["events"].push_back(diagnosis::ToJson(e));
    j["warnings"] = warnings;
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << diagnosis::RenderRunText(*job, d);
  }
  bool errors = std::any_of(d.findings.begin(), d.findings.end(),
                            [](auto& f) { return f.severity == diagnosis::Severity::kError; });
  // Evidence the report lacks (a run cut short, a missing ring or log) is never a healthy 0.
  return errors || d.hang || !job->evidence_missing.empty() ? kExitProblems : kExitOk;
}

}  // namespace dsd::cli
