// Optimizers over a flat slice of parameters (the whole model, or this rank's ZeRO-1 shard) and
// DeepSpeed's dynamic loss scaler for fp16. Plain single-owner values; not thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/config.h"

namespace dsd::runtime {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Updates params[0..n) from grads[0..n); n is fixed at construction.
  virtual void Step(float* params, const float* grads) = 0;
  // Named state arrays, for checkpoints (each of the slice's length).
  virtual std::vector<std::pair<std::string, std::vector<float>*>> State() = 0;
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }

 protected:
  int64_t steps_ = 0;
};

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerConfig& config, size_t n);

// DeepSpeed's DynamicLossScaler: halve the scale on overflow (after `hysteresis` overflows),
// double it after `loss_scale_window` clean steps since the last overflow. A static scale
// (fp16.loss_scale > 0) never changes.
class LossScaler {
 public:
  explicit LossScaler(const Fp16Config& c);
  float scale() const { return scale_; }
  // Call once per optimizer step with whether the gradients overflowed.
  void Update(bool overflow);
  nlohmann::json ToJson() const;
  Status FromJson(const nlohmann::json& j);

 private:
  bool dynamic_;
  float scale_;
  int window_, hysteresis_, cur_hysteresis_;
  float min_scale_;
  int64_t iter_ = 0, last_overflow_iter_ = -1;
};

}  // namespace dsd::runtime
