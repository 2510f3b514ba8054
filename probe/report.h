// `dsdoctor report`: turns a NodeInventory into check rows (ok/warn/fail/info with a remedy) and
// renders them as aligned text or as the JSON document described in docs/report-json.md.
// Pure functions over values; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "probe/inventory.h"

namespace dsd::probe {

enum class CheckStatus { kOk, kInfo, kWarn, kFail };
const char* CheckStatusName(CheckStatus s);  // "ok" | "info" | "warn" | "fail"

struct CheckRow {
  std::string name;
  CheckStatus status = CheckStatus::kOk;
  std::string summary;
  std::vector<std::string> details;
  std::string remedy;
  std::vector<std::string> codes;  // finding codes behind this row (cluster checks), for JUnit failure types
};

inline constexpr uint64_t kMinShmBytes = 512ull << 20;

std::vector<CheckRow> EvaluateNode(const NodeInventory& inv);

struct RenderOptions {
  bool color = false;
};
std::string RenderChecksText(const std::string& title, const std::vector<CheckRow>& rows, const RenderOptions& opts);

struct CheckCounts {
  int fail = 0, warn = 0;
};
CheckCounts CountChecks(const std::vector<CheckRow>& rows);
// [{"name","status","summary","details","remedy"}]: the "checks" array of report and check documents.
nlohmann::json ChecksJson(const std::vector<CheckRow>& rows);

// The report document: {"schema", "dsdoctor_version", "inventory", "checks", "summary"}.
nlohmann::json ReportJson(const NodeInventory& inv, const std::vector<CheckRow>& rows);

// 1 when any row failed, else 0 (the CLI's exit code for `report`).
int ReportExitCode(const std::vector<CheckRow>& rows);

}  // namespace dsd::probe
