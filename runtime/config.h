// ds_config.json for the bundled runtime: the DeepSpeed keys it implements, parsed strictly.
// Every key is either supported or an error naming it (with the file and the JSON path, e.g.
// "ds_config.json: fp16.loss_scale_window: expected an integer >= 1, got -3"); nothing is ignored
// silently. Batch sizes are resolved against the world size by DeepSpeed's rule
// train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * world_size.
// Plain values; pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace dsd::runtime {

enum class OptimizerType { kAdam, kAdamW, kSgd };
const char* OptimizerTypeName(OptimizerType t);  // "Adam", "AdamW", "SGD"

struct OptimizerConfig {
  OptimizerType type = OptimizerType::kAdam;
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float momentum = 0.0f;  // SGD
};

struct Fp16Config {
  bool enabled = false;
  float loss_scale = 0;  // 0: dynamic
  int initial_scale_power = 16;
  int loss_scale_window = 1000;
  int hysteresis = 2;
  float min_loss_scale = 1;
};

enum class WatchdogPolicy { kWarn, kAbort };
const char* WatchdogPolicyName(WatchdogPolicy p);

// The "dsdoctor" section: settings of the runtime's diagnosability (not DeepSpeed keys).
struct DiagnosticsConfig {
  double watchdog_timeout_s = 600;  // 0 disables the watchdog
  WatchdogPolicy watchdog_policy = WatchdogPolicy::kWarn;
  double comm_timeout_s = 1800;     // the backend's own op timeout (gloo), like torch's default
  int trace_capacity = 4096;        // records in the trace ring
};

struct Config {
  // As written (0 = absent); ResolveBatch fills the resolved values.
  int train_batch_size = 0;
  int train_micro_batch_size_per_gpu = 0;
  int gradient_accumulation_steps = 0;
  OptimizerConfig optimizer;
  Fp16Config fp16;
  int zero_stage = 0;
  float gradient_clipping = 0;  // 0: off
  int steps_per_print = 10;
  DiagnosticsConfig dsdoctor;
  std::string source = "ds_config";  // file name for messages
};

// Parses JSON text. `source` names the file in errors; syntax errors give line and column.
Result<Config> ParseConfig(const std::string& text, const std::string& source = "ds_config.json");
Result<Config> LoadConfig(const std::string& path);
// Validates one object (already parsed).
Result<Config> ConfigFromJson(const nlohmann::json& j, const std::string& source);

struct BatchPlan {
  int train_batch_size = 0;
  int micro_batch = 0;
  int gradient_accumulation_steps = 0;
};
// DeepSpeed's rule over the given world size; errors name the keys and values that disagree.
Result<BatchPlan> ResolveBatch(const Config& c, int world_size);

// DSDOCTOR_TIMEOUT (seconds) and DSDOCTOR_WATCHDOG_POLICY (warn|abort) override the config's
// dsdoctor section; an invalid value is an error naming the variable. Absent variables: no change.
Status ApplyDiagnosticsEnv(const std::string* timeout, const std::string* policy, DiagnosticsConfig* d);

}  // namespace dsd::runtime
