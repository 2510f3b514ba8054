#include "probe/dsenv.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"

namespace dsd::probe {
namespace {

bool ValidName(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

DsEnvFile ParseDsEnv(const std::string& path, const std::string& content) {
  DsEnvFile file;
  file.path = path;
  auto lines = Split(content, '\n');
  // A final newline ends the last line; it does not start an empty one (Python's readlines agrees).
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  for (size_t i = 0; i < lines.size(); ++i) {
    int n = static_cast<int>(i) + 1;
    const std::string& raw = lines[i];
    std::string_view line = Trim(raw);
    if (line.empty()) {
      file.problems.push_back({n, raw, "blank line: DeepSpeed's launcher fails with 'not enough values to unpack'", true});
      continue;
    }
    size_t eq = raw.find('=');
    if (eq == std::string::npos) {
      std::string why = line[0] == '#' ? "comment line: DeepSpeed has no comments; this line makes its launcher fail"
                                       : "no '=': DeepSpeed's launcher fails with 'not enough values to unpack'";
      file.problems.push_back({n, raw, why, true});
      continue;
    }
    std::string key(Trim(std::string_view(raw).substr(0, eq)));
    std::string value(Trim(std::string_view(raw).substr(eq + 1)));
    if (key.empty()) {
      file.problems.push_back({n, raw, "empty variable name before '='", true});
      continue;
    }
    if (key[0] == '#') {
      file.problems.push_back({n, raw, "commented-out assignment is still exported, as a variable named '" + key + "'", false});
      continue;
    }
    if (!ValidName(key)) {
      file.problems.push_back({n, raw, "'" + key + "' is not a valid environment variable name", false});
      continue;
    }
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      file.problems.push_back({n, raw, "quotes are kept literally: " + key + " will contain them", false});
    }
    file.entries.push_back({n, key, value});
  }
  log::Get("probe")->debug(".deepspeed_env {}: {} entries, {} problems", path, file.entries.size(), file.problems.size());
  return file;
}

std::vector<DsEnvFile> FindDsEnvFiles() {
  std::vector<std::pair<std::string, std::string>> candidates;
  std::error_code ec;
  auto cwd = std::filesystem::current_path(ec);
  if (!ec) candidates.emplace_back((cwd / ".deepspeed_env").string(), "cwd");
  if (const char* home = std::getenv("HOME"); home && *home) {
    candidates.emplace_back(std::string(home) + "/.deepspeed_env", "home");
  }
  if (const char* ds = std::getenv("DS_ENV_FILE"); ds && *ds) candidates.emplace_back(ds, "DS_ENV_FILE");
  std::vector<DsEnvFile> out;
  std::set<std::string> seen;
  for (const auto& [path, source] : candidates) {
    std::string canonical = std::filesystem::weakly_canonical(path, ec).string();
    if (!FileExists(path) || !seen.insert(ec ? path : canonical).second) continue;
    auto content = ReadFile(path, 1 << 20);
    DsEnvFile f;
    if (content.ok()) {
      f = ParseDsEnv(path, *content);
    } else {
      f.path = path;
      f.error = content.status().message();
    }
    f.source = source;
    out.push_back(std::move(f));
  }
  return out;
}

std::map<std::string, std::string> MergeDsEnv(const std::vector<DsEnvFile>& files) {
  std::map<std::string, std::string> merged;
  for (const auto& f : files) {
    for (const auto& e : f.entries) merged[e.key] = e.value;
  }
  return merged;
}

nlohmann::json ToJson(const DsEnvFile& file) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& e : file.entries) entries.push_back({{"line", e.line}, {"key", e.key}, {"value", e.value}});
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& p : file.problems) {
    problems.push_back({{"line", p.line}, {"text", p.text}, {"reason", p.reason}, {"fatal", p.fatal}});
  }
  return {{"path", file.path}, {"source", file.source}, {"entries", entries}, {"problems", problems},
          {"error", file.error}};
}

}  // namespace dsd::probe
