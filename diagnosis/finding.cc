#include "diagnosis/finding.h"

#include <algorithm>
#include <array>

#include "common/log.h"

namespace dsd::diagnosis {

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "?";
}

Result<Severity> ParseSeverity(const std::string& s) {
  if (s == "info") return Severity::kInfo;
  if (s == "warning") return Severity::kWarning;
  if (s == "error") return Severity::kError;
  return InvalidArgument("severity '" + s + "' is not one of error|warning|info");
}

bool IsKnownCode(const std::string& code) {
  static const std::array kAll = {
      codes::kAgentUnreachable,    codes::kPortBlocked,         codes::kPortRefused,        codes::kHostUnreachable,
      codes::kNameUnresolved,      codes::kDuplicateHostname,   codes::kNcclMissing,        codes::kNcclVersionMismatch,
      codes::kCudaVersionMismatch, codes::kSocketIfnameInvalid, codes::kEnvMismatch,        codes::kSlotsExceedGpus,
      codes::kBandwidthLow,        codes::kAllreduceWrong,      codes::kCollectiveMismatch, codes::kRankMissing,
      codes::kRankExited,          codes::kCollectiveStall,     codes::kWatchdogTimeout,    codes::kP2pDeadlock,
      codes::kStraggler,           codes::kNcclError,           codes::kCommError,          codes::kLogError,
      codes::kRendezvousError,     codes::kOutOfMemory,         codes::kCudaError,          codes::kLaunchError,
      codes::kAgentLost,           codes::kLaunchPlan,          codes::kLogDirFull,         codes::kResourceLimit,
      codes::kSlurmNodeState,      codes::kSlurmJobState,       codes::kSlurmAllocation};
  return std::find(kAll.begin(), kAll.end(), code) != kAll.end();
}

nlohmann::json ToJson(const Finding& f) {
  nlohmann::json j = {{"code", f.code},       {"severity", SeverityName(f.severity)},
                      {"summary", f.summary}, {"nodes", f.nodes},
                      {"ranks", f.ranks},     {"evidence", f.evidence},
                      {"remedy", f.remedy}};
  if (!f.proof.empty()) j["proof"] = f.proof;
  return j;
}

Result<Finding> FindingFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("finding: not a JSON object");
  auto str = [&](const char* key, std::string* out) -> Status {
    if (!j.contains(key) || !j[key].is_string())
      return InvalidArgument(std::string("finding: field '") + key + "' must be a string");
    *out = j[key].get<std::string>();
    return Status::Ok();
  };
  Finding f;
  std::string severity;
  DSD_RETURN_IF_ERROR(str("code", &f.code));
  DSD_RETURN_IF_ERROR(str("severity", &severity));
  DSD_RETURN_IF_ERROR(str("summary", &f.summary));
  DSD_RETURN_IF_ERROR(str("remedy", &f.remedy));
  DSD_ASSIGN_OR_RETURN(f.severity, ParseSeverity(severity));
  try {
    f.nodes = j.value("nodes", std::vector<std::string>{});
    f.ranks = j.value("ranks", std::vector<int>{});
    f.evidence = j.value("evidence", std::vector<std::string>{});
    f.proof = j.value("proof", std::string());
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("finding: nodes/ranks/evidence: ") + e.what());
  }
  if (!IsKnownCode(f.code)) log::Get("diagnosis")->debug("finding with unknown code {} accepted", f.code);
  return f;
}

void SortBySeverity(std::vector<Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(),
                   [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
}

}  // namespace dsd::diagnosis
