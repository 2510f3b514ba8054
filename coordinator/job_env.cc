#include "coordinator/job_env.h"

#include <unistd.h>

#include "common/strings.h"
#include "probe/dsenv.h"

namespace dsd::coordinator {

namespace {

constexpr EnvFamily kFamilies[] = {
    // DeepSpeed's runner exports these prefixes to every node (EXPORT_ENVS of deepspeed/launcher/
    // runner.py, checked against DeepSpeed 0.19.8): a job must see the same under dsdoctor.
    {"NCCL", "NCCL's own settings (socket interface, IB, debug level): DeepSpeed exports them"},
    {"PYTHON", "PYTHONPATH and the interpreter's settings: DeepSpeed exports them"},
    {"MLFLOW", "MLflow's tracking settings: DeepSpeed exports them"},
    {"MV2", "MVAPICH2's settings: DeepSpeed exports them"},
    {"UCX", "UCX's transport settings: DeepSpeed exports them"},
    // What torchrun users expect to reach their ranks, which on one node inherit everything.
    {"GLOO_", "Gloo's interface (GLOO_SOCKET_IFNAME): the CPU backend's NCCL_SOCKET_IFNAME"},
    {"TORCH_", "torch.distributed's settings (TORCH_NCCL_*, TORCH_DISTRIBUTED_DEBUG, TORCH_CPP_LOG_LEVEL)"},
    // The bundled runtime's settings (docs/runtime.md) and dsdoctor's log level.
    {"DSDOCTOR_LOG_LEVEL", "dsdoctor's log level: debug logging reaches the ranks and their libraries"},
    {"DSDOCTOR_TIMEOUT", "the bundled runtime's watchdog timeout"},
    {"DSDOCTOR_WATCHDOG_POLICY", "the bundled runtime's watchdog policy"},
    {"DSDOCTOR_BACKEND", "the bundled runtime's backend"},
};

}  // namespace

std::span<const EnvFamily> JobEnvFamilies() { return kFamilies; }

EnvMap JobEnvironment(const EnvMap& shell, const EnvMap& deepspeed_env) {
  EnvMap env;
  for (const auto& [k, v] : shell)
    for (const auto& family : kFamilies)
      if (StartsWith(k, family.prefix)) {
        env[k] = v;
        break;
      }
  for (const auto& [k, v] : deepspeed_env) env[k] = v;
  return env;
}

EnvMap JobEnvironment() {
  EnvMap shell;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    const size_t eq = kv.find('=');
    if (eq != std::string_view::npos) shell.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return JobEnvironment(shell, probe::MergeDsEnv(probe::FindDsEnvFiles()));
}

}  // namespace dsd::coordinator
