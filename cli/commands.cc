#include "cli/commands.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "common/log.h"

#ifndef DSDOCTOR_VERSION
#define DSDOCTOR_VERSION "0.0.0"
#endif

namespace dsd::cli {

int Main(int argc, char** argv) {
  CLI::App app{"dsdoctor: diagnose distributed deep-learning training (pre-flight checks, hang debugging)"};
  app.set_version_flag("--version", std::string("dsdoctor ") + DSDOCTOR_VERSION);
  app.require_subcommand(1);
  std::string log_level;
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off (overrides DSDOCTOR_LOG_LEVEL)");

  ReportOptions report;
  bool no_color = false;
  auto* report_cmd = app.add_subcommand("report", "This node's inventory: NICs, /dev/shm, NCCL, CUDA, GPUs, env");
  report_cmd->add_flag("--json", report.json, "Print the JSON document (docs/report-json.md)");
  report_cmd->add_flag("--no-color", no_color, "Plain marks even on a terminal");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  log::Init(log_level.empty() ? std::nullopt : std::optional<std::string>(log_level));
  auto log = log::Get("cli");
  try {
    if (*report_cmd) {
      report.color = !no_color && ::isatty(1) && !std::getenv("NO_COLOR");
      return RunReport(report);
    }
  } catch (const std::exception& e) {
    log->error("internal error: {}", e.what());
    return kExitInternal;
  }
  return kExitUsage;
}

}  // namespace dsd::cli
