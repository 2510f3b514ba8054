#include "probe/inventory.h"

#include <unistd.h>

#include "common/log.h"
#include "common/strings.h"

extern char** environ;

namespace dsd::probe {

SystemInfo RealInventorySource::System() { return ReadSystemInfo(); }
NcclInfo RealInventorySource::Nccl() {
  DynamicLibrary lib;
  NcclInfo info = InspectNccl(NcclLibrarySearch(), &lib);
  std::lock_guard<std::mutex> lock(mu_);
  nccl_ = std::move(lib);
  return info;
}
NcclBootstrapInfo RealInventorySource::NcclBootstrap(const NcclInfo& nccl, const EnvMap& env) {
  DynamicLibrary lib;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lib = std::move(nccl_);  // unloaded when the probe is done
  }
  if (!nccl.found) return {};
  return ProbeNcclBootstrap(nccl.path, env);
}
CudaInfo RealInventorySource::Cuda() { return InspectCuda(); }
NvmlInfo RealInventorySource::Nvml() { return InspectNvml(); }
std::vector<DsEnvFile> RealInventorySource::DeepSpeedEnvFiles() { return FindDsEnvFiles(); }

EnvMap RealInventorySource::Environment() {
  EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

bool IsJobRelevantEnv(const std::string& name) {
  static const char* kPrefixes[] = {"NCCL_", "DSDOCTOR_", "TORCH_NCCL_", "TORCH_DISTRIBUTED", "GLOO_", "OMPI_MCA_", "UCX_"};
  static const char* kExact[] = {"CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
                                 "LOCAL_RANK", "LOCAL_SIZE", "DS_ENV_FILE", "LD_LIBRARY_PATH", "CUDA_HOME"};
  for (const char* p : kPrefixes) {
    if (StartsWith(name, p)) return true;
  }
  for (const char* e : kExact) {
    if (name == e) return true;
  }
  return false;
}

NodeInventory CollectInventory(InventorySource& source, const EnvMap& job_env) {
  auto log = log::Get("probe");
  NodeInventory inv;
  inv.system = source.System();
  inv.nccl = source.Nccl();
  inv.nccl_bootstrap = source.NcclBootstrap(inv.nccl, job_env);
  inv.cuda = source.Cuda();
  inv.nvml = source.Nvml();
  EnvMap env = source.Environment();
  for (const auto& [k, v] : job_env) {
    if (v.empty()) env.erase(k);
    else env[k] = v;
  }
  for (const auto& [k, v] : env) {
    if (IsJobRelevantEnv(k)) inv.env[k] = v;
  }
  inv.deepspeed_env = source.DeepSpeedEnvFiles();
  log->debug("inventory of {} collected: nccl={} cuda_runtime={} gpus={}", inv.system.hostname, inv.nccl.found,
             inv.cuda.runtime_found, inv.nvml.gpus.size());
  return inv;
}

nlohmann::json ToJson(const NodeInventory& inv) {
  nlohmann::json ds = nlohmann::json::array();
  for (const auto& f : inv.deepspeed_env) ds.push_back(ToJson(f));
  return {{"system", ToJson(inv.system)}, {"nccl", ToJson(inv.nccl)},
          {"nccl_bootstrap", ToJson(inv.nccl_bootstrap)}, {"cuda", ToJson(inv.cuda)},
          {"nvml", ToJson(inv.nvml)}, {"env", inv.env}, {"deepspeed_env", ds}};
}

}  // namespace dsd::probe
