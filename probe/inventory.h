// A node's inventory: everything `dsdoctor report` shows and agents send to the coordinator.
// InventorySource is the seam between the real system and tests: RealInventorySource reads this
// machine; tests fill a NodeInventory (or a FakeInventorySource) by hand.
// Not thread-safe; build one inventory per call.
#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "probe/dsenv.h"
#include "probe/dynlib.h"
#include "probe/gpu.h"
#include "probe/nccl.h"
#include "probe/system.h"

namespace dsd::probe {

using EnvMap = std::map<std::string, std::string>;

struct NodeInventory {
  SystemInfo system;
  NcclInfo nccl;
  NcclBootstrapInfo nccl_bootstrap;
  CudaInfo cuda;
  NvmlInfo nvml;
  EnvMap env;  // the variables that shape a training job (see IsJobRelevantEnv)
  std::vector<DsEnvFile> deepspeed_env;
};

class InventorySource {
 public:
  virtual ~InventorySource() = default;
  virtual SystemInfo System() = 0;
  virtual NcclInfo Nccl() = 0;
  // Runs NCCL's bootstrap interface selection under `env` (overlaying the process environment).
  virtual NcclBootstrapInfo NcclBootstrap(const NcclInfo& nccl, const EnvMap& env) = 0;
  virtual CudaInfo Cuda() = 0;
  virtual NvmlInfo Nvml() = 0;
  virtual EnvMap Environment() = 0;  // the whole process environment
  virtual std::vector<DsEnvFile> DeepSpeedEnvFiles() = 0;
};

// Thread-safe.
class RealInventorySource final : public InventorySource {
 public:
  SystemInfo System() override;
  NcclInfo Nccl() override;
  NcclBootstrapInfo NcclBootstrap(const NcclInfo& nccl, const EnvMap& env) override;
  CudaInfo Cuda() override;
  NvmlInfo Nvml() override;
  EnvMap Environment() override;
  std::vector<DsEnvFile> DeepSpeedEnvFiles() override;

 private:
  // NCCL as Nccl() loaded it, kept until NcclBootstrap(): the probe's forked child then finds it
  // mapped instead of loading and relocating it again (~1 ms per node).
  std::mutex mu_;
  DynamicLibrary nccl_;
};

// Returns canned values and records the env each bootstrap probe ran with. Agents of one test may
// share it from their own threads: the record is guarded (two unguarded push_backs raced, and
// LeakSanitizer found the buffer one of them lost).
class FakeInventorySource final : public InventorySource {
 public:
  NodeInventory canned;
  EnvMap process_env;
  std::vector<EnvMap> bootstrap_calls;  // read once the agents are done

  SystemInfo System() override { return canned.system; }
  NcclInfo Nccl() override { return canned.nccl; }
  NcclBootstrapInfo NcclBootstrap(const NcclInfo&, const EnvMap& env) override {
    std::lock_guard<std::mutex> lock(mu_);
    bootstrap_calls.push_back(env);
    return canned.nccl_bootstrap;
  }
  CudaInfo Cuda() override { return canned.cuda; }
  NvmlInfo Nvml() override { return canned.nvml; }
  EnvMap Environment() override { return process_env; }
  std::vector<DsEnvFile> DeepSpeedEnvFiles() override { return canned.deepspeed_env; }

 private:
  std::mutex mu_;
};

// NCCL_*, CUDA_VISIBLE_DEVICES, MASTER_ADDR/PORT, rank variables, GLOO/TORCH distributed
// settings, DS_ENV_FILE, DSDOCTOR_*, LD_LIBRARY_PATH (it decides which NCCL loads).
bool IsJobRelevantEnv(const std::string& name);

// Collects every part. `job_env` overlays the process environment for the NCCL bootstrap probe
// and the env section (what the job's ranks would see).
NodeInventory CollectInventory(InventorySource& source, const EnvMap& job_env = {});

nlohmann::json ToJson(const NodeInventory& inv);

}  // namespace dsd::probe
