// `dsdoctor analyze` (docs/run.md "Analyzing log files"): a run dir, log files or standard input
// through the same diagnosis engine as `run`.
#include <algorithm>
#include <iostream>

#include "cli/commands.h"
#include "collectors/log_catalogue.h"
#include "collectors/run_dir.h"
#include "diagnosis/engine.h"
#include "diagnosis/report.h"

namespace dsd::cli {

int RunAnalyze(const AnalyzeOptions& o) {
  if (o.list_patterns) {
    std::cout << collectors::CatalogueMarkdown();
    return kExitOk;
  }
  if (o.paths.empty()) {
    std::cerr << "dsdoctor analyze: give a run dir, one or more log files, or - for standard input\n";
    return kExitUsage;
  }
  std::vector<std::string> warnings;
  collectors::RunDirOptions opts{o.timeout_s, o.hang_after_s};
  opts.on_idle = [](const std::string& name) {
    std::cerr << "dsdoctor analyze: waiting for more of " << name
              << ": nothing came for 2 s and it is still open (its writer has not closed it; Ctrl-D ends a "
                 "terminal's input)\n";
  };
  auto job = collectors::LoadLogs(o.paths, opts, &warnings);
  if (!job.ok()) {
    std::cerr << "dsdoctor analyze: " << job.status().message() << "\n";
    return kExitUsage;
  }
  for (const auto& w : warnings) std::cerr << "dsdoctor analyze: warning: " << w << "\n";
  diagnosis::Diagnosis d = diagnosis::Diagnose(*job);
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
