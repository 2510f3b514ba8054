#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "common/log.h"
#include "probe/report.h"

namespace dsd::cli {

int RunReport(const ReportOptions& options) {
  auto log = log::Get("cli");
  probe::RealInventorySource source;
  probe::NodeInventory inv = probe::CollectInventory(source);
  auto rows = probe::EvaluateNode(inv);
  log->debug("report: {} rows", rows.size());
  if (options.json) {
    std::cout << probe::ReportJson(inv, rows).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::string title = "dsdoctor report: " + inv.system.hostname;
    std::cout << probe::RenderChecksText(title, rows, {options.color});
  }
  std::cout.flush();
  return probe::ReportExitCode(rows);
}

}  // namespace dsd::cli
