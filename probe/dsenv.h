// .deepspeed_env files: the variables DeepSpeed's launcher exports to every worker, and the lines
// its parser cannot take. DeepSpeed splits each line with `key, val = line.split('=', 1)`, so a
// blank line or a line without '=' (a comment, say) aborts the launch with a ValueError.
// Pure parsing plus a lookup that reads files; plain values, thread-compatible.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace dsd::probe {

struct DsEnvEntry {
  int line = 0;
  std::string key, value;
};

struct DsEnvProblem {
  int line = 0;
  std::string text;    // the line as written
  std::string reason;  // what DeepSpeed would do with it
  bool fatal = false;  // true when DeepSpeed's launcher would fail on it
};

struct DsEnvFile {
  std::string path;
  std::string source;  // "cwd", "home" or "DS_ENV_FILE"
  std::vector<DsEnvEntry> entries;
  std::vector<DsEnvProblem> problems;
  std::string error;   // unreadable
};

DsEnvFile ParseDsEnv(const std::string& path, const std::string& content);

// Looks in the current directory, $HOME, then $DS_ENV_FILE; returns each file found.
std::vector<DsEnvFile> FindDsEnvFiles();

// The variables every rank would get: later files override earlier ones (DeepSpeed's order).
std::map<std::string, std::string> MergeDsEnv(const std::vector<DsEnvFile>& files);

nlohmann::json ToJson(const DsEnvFile& file);

}  // namespace dsd::probe
