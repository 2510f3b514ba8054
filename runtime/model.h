// Models the engine trains, and the synthetic task of the examples and tests.
// A Model keeps its parameters and gradients in two flat, contiguous float arrays, so the engine
// can all-reduce gradients in one call, shard them for ZeRO stage 1 and checkpoint them as one
// array. Forward caches what Backward needs. A Model is used by one thread.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace dsd::runtime {

// Column j of x is sample j's input; column j of y its target.
struct Batch {
  Eigen::MatrixXf x, y;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual size_t num_parameters() const = 0;
  virtual float* parameters() = 0;
  virtual float* gradients() = 0;
  // Mean loss over the batch's samples.
  virtual Result<float> Forward(const Batch& batch) = 0;
  // Adds scale * d(loss of the last Forward)/d(parameters) into gradients().
  virtual Status Backward(float scale) = 0;
};

struct MlpSpec {
  int input = 16;
  std::vector<int> hidden = {64, 64};
  int output = 4;
  uint64_t seed = 1;  // parameter initialisation
};

// Fully connected layers with tanh between them and a linear output; loss = mean over samples of
// 0.5 * ||output - y||^2. Eigen does the matrix work.
class Mlp final : public Model {
 public:
  explicit Mlp(const MlpSpec& spec);
  size_t num_parameters() const override { return params_.size(); }
  float* parameters() override { return params_.data(); }
  float* gradients() override { return grads_.data(); }
  Result<float> Forward(const Batch& batch) override;
  Status Backward(float scale) override;
  // The output for inputs x, without caching (evaluation, the task's teacher).
  Eigen::MatrixXf Predict(const Eigen::MatrixXf& x) const;

 private:
  struct Layer {
    int in, out;
    size_t w, b;  // offsets into params_/grads_
  };
  std::vector<Layer> layers_;
  std::vector<float> params_, grads_;
  std::vector<Eigen::MatrixXf> acts_;  // acts_[l] = input of layer l; acts_.back() = output
  Eigen::MatrixXf target_;
  bool has_forward_ = false;
};

// Deterministic pseudo-random numbers from (seed, index): the same sample whatever the rank count.
uint64_t SplitMix64(uint64_t x);
float UniformAt(uint64_t seed, uint64_t index);   // [0, 1)
float GaussianAt(uint64_t seed, uint64_t index);  // N(0, 1)

// Regression onto a fixed random teacher MLP: sample i is x_i ~ N(0, I), y_i = teacher(x_i).
class SyntheticTask {
 public:
  SyntheticTask(int input, int output, uint64_t seed);
  // Samples [first, first + n).
  Batch Samples(uint64_t first, int n) const;
  // The micro-batch of `rank` in micro-step `micro` of optimizer step `step`: global batch g covers
  // samples [g * global, (g + 1) * global), rank r takes its slice, so data-parallel training sees
  // the same samples as one process with the whole global batch.
  Batch MicroBatch(uint64_t step, int micro, int gas, int rank, int world, int micro_batch) const;
  int input() const { return input_; }
  int output() const { return output_; }

 private:
  int input_, output_;
  uint64_t seed_;
  Mlp teacher_;
};

}  // namespace dsd::runtime
