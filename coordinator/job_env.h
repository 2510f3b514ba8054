// The job environment: what every rank inherits from the shell `check` or `run` was typed in, the
// same for both (check probes NCCL's bootstrap and compares nodes under it; run starts the ranks
// with it). Like DeepSpeed's multi-node launcher, only named families travel to the nodes; a
// variable of `.deepspeed_env` (the working directory, ~, DS_ENV_FILE) wins over the shell's.
// Pure over the maps it is given; thread-safe.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>

namespace dsd::coordinator {

using EnvMap = std::map<std::string, std::string>;

// A family of variables that travels, and why.
struct EnvFamily {
  std::string_view prefix;  // a variable whose name starts with it travels
  std::string_view why;
};
// The families, in the order docs/run.md lists them.
std::span<const EnvFamily> JobEnvFamilies();

// The variables of `shell` that travel, with `deepspeed_env` (probe::MergeDsEnv) over them.
EnvMap JobEnvironment(const EnvMap& shell, const EnvMap& deepspeed_env);
// The same for this process's environment and the .deepspeed_env files found from here.
EnvMap JobEnvironment();

}  // namespace dsd::coordinator
