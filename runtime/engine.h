// The training engine, in the spirit of DeepSpeed's: initialize(config, model, world) gives an
// Engine with forward/backward/step and save/load_checkpoint. Data parallel: every rank holds the
// whole model, gradients are averaged with one all-reduce per optimizer step (callsite
// "engine.step"), fp16 keeps fp32 master weights with fp16 model weights and gradients under a
// dynamic loss scaler (CPU emulation: values are rounded to IEEE half where a GPU would store them,
// and gradients travel as float16), ZeRO stage 1 partitions the optimizer state across ranks and
// all-gathers the updated parameters ("engine.step.allgather").
//
// The engine sets the trace's phase and step as it goes, and its config's "dsdoctor" section
// configures the world's watchdog. One Engine per World; used by one thread.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "runtime/config.h"
#include "runtime/distributed.h"
#include "runtime/model.h"
#include "runtime/optimizer.h"

namespace dsd::runtime {

class Engine {
 public:
  // Loss of the micro-batch (unscaled).
  Result<float> Forward(const Batch& batch);
  // Backpropagates the last Forward's loss (scaled by the loss scale and 1/gradient_accumulation_steps).
  Status Backward(float loss);
  // At a gradient-accumulation boundary: all-reduce, overflow check, optimizer update; otherwise
  // only counts the micro-step, like DeepSpeed's engine.step().
  Status Step();
  // Every rank must call it: each writes its shard, then rank(s) with local rank 0 move <dir>/latest.
  Status SaveCheckpoint(const std::string& dir, const std::string& tag, const nlohmann::json& client_state = {});
  // Restores the engine from <dir>/<tag> (empty tag: <dir>/latest); returns the client state.
  Result<nlohmann::json> LoadCheckpoint(const std::string& dir, const std::string& tag = "");

  uint64_t global_steps() const { return global_steps_; }
  uint64_t micro_steps() const { return micro_steps_; }
  uint64_t skipped_steps() const { return skipped_steps_; }
  bool last_step_overflowed() const { return last_overflow_; }
  float loss_scale() const { return scaler_ ? scaler_->scale() : 1.0f; }
  const BatchPlan& batch_plan() const { return plan_; }
  const Config& config() const { return config_; }
  ProcessGroup& group() { return *group_; }
  Model& model() { return *model_; }
  // The fp32 parameters (the master copy under fp16).
  const float* master_parameters() const { return fp16_ ? master_.data() : model_->parameters(); }
  size_t num_parameters() const { return n_; }
  bool is_gradient_accumulation_boundary() const { return (micro_steps_ + 1) % plan_.gradient_accumulation_steps == 0; }

 private:
  friend Result<std::unique_ptr<Engine>> Initialize(const Config&, std::unique_ptr<Model>, World&);
  Engine() = default;
  Status ApplyGradients();
  Status SyncModelFromMaster();
  nlohmann::json Meta(const std::string& tag) const;

  Config config_;
  BatchPlan plan_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<ProcessGroup> group_;
  TraceWriter* trace_ = nullptr;
  int local_rank_ = 0;
  size_t n_ = 0;
  bool fp16_ = false;
  std::vector<float> master_;     // fp32 master weights (fp16 only)
  std::vector<uint16_t> half_;    // fp16 gradient buffer
  std::vector<float> flat_;       // gradient buffer padded for ZeRO shards
  size_t shard_lo_ = 0, shard_hi_ = 0, shard_size_ = 0;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LossScaler> scaler_;
  uint64_t global_steps_ = 0, micro_steps_ = 0, skipped_steps_ = 0;
  bool last_overflow_ = false;
  bool pending_backward_ = false;
  float last_loss_ = 0;
};

// deepspeed.initialize: validates the config against the world size, applies its "dsdoctor"
// section to the watchdog (the environment wins), broadcasts rank 0's initial parameters so every
// rank starts equal (callsite "initialize").
Result<std::unique_ptr<Engine>> Initialize(const Config& config, std::unique_ptr<Model> model, World& world);

}  // namespace dsd::runtime
