#include "runtime/model.h"

#include <cmath>

namespace dsd::runtime {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

float UniformAt(uint64_t seed, uint64_t index) {
  return static_cast<float>(SplitMix64(SplitMix64(seed) ^ index) >> 40) * (1.0f / 16777216.0f);
}

float GaussianAt(uint64_t seed, uint64_t index) {
  float u1 = std::max(UniformAt(seed, 2 * index), 1e-7f);
  float u2 = UniformAt(seed, 2 * index + 1);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
}

Mlp::Mlp(const MlpSpec& spec) {
  std::vector<int> dims = {spec.input};
  dims.insert(dims.end(), spec.hidden.begin(), spec.hidden.end());
  dims.push_back(spec.output);
  size_t off = 0;
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    Layer layer{dims[l], dims[l + 1], off, off + static_cast<size_t>(dims[l]) * dims[l + 1]};
    off = layer.b + static_cast<size_t>(layer.out);
    layers_.push_back(layer);
  }
  params_.assign(off, 0.0f);
  grads_.assign(off, 0.0f);
  for (const auto& layer : layers_) {
    // Xavier/Glorot uniform; biases start at zero.
    float limit = std::sqrt(6.0f / static_cast<float>(layer.in + layer.out));
    for (size_t i = layer.w; i < layer.b; ++i) params_[i] = (2 * UniformAt(spec.seed, i) - 1) * limit;
  }
}

Eigen::MatrixXf Mlp::Predict(const Eigen::MatrixXf& x) const {
  Eigen::MatrixXf h = x;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const auto& L = layers_[l];
    Eigen::Map<const Eigen::MatrixXf> w(params_.data() + L.w, L.out, L.in);
    Eigen::Map<const Eigen::VectorXf> b(params_.data() + L.b, L.out);
    Eigen::MatrixXf z = (w * h).colwise() + b;
    h = l + 1 < layers_.size() ? Eigen::MatrixXf(z.array().tanh()) : z;
  }
  return h;
}

Result<float> Mlp::Forward(const Batch& batch) {
  if (batch.x.rows() != layers_.front().in || batch.y.rows() != layers_.back().out || batch.x.cols() != batch.y.cols() ||
      batch.x.cols() == 0) {
    return InvalidArgument("batch of " + std::to_string(batch.x.rows()) + "x" + std::to_string(batch.x.cols()) +
                           " inputs and " + std::to_string(batch.y.rows()) + "x" + std::to_string(batch.y.cols()) +
                           " targets does not fit an MLP of " + std::to_string(layers_.front().in) + " inputs and " +
                           std::to_string(layers_.back().out) + " outputs");
  }
  acts_.assign(1, batch.x);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const auto& L = layers_[l];
    Eigen::Map<const Eigen::MatrixXf> w(params_.data() + L.w, L.out, L.in);
    Eigen::Map<const Eigen::VectorXf> b(params_.data() + L.b, L.out);
    Eigen::MatrixXf z = (w * acts_.back()).colwise() + b;
    acts_.push_back(l + 1 < layers_.size() ? Eigen::MatrixXf(z.array().tanh()) : z);
  }
  target_ = batch.y;
  has_forward_ = true;
  float n = static_cast<float>(batch.x.cols());
  return 0.5f * (acts_.back() - target_).squaredNorm() / n;
}

Status Mlp::Backward(float scale) {
  if (!has_forward_) return InvalidArgument("backward() without a forward() before it");
  has_forward_ = false;
  float n = static_cast<float>(target_.cols());
  Eigen::MatrixXf delta = (acts_.back() - target_) * (scale / n);
  for (size_t l = layers_.size(); l-- > 0;) {
    const auto& L = layers_[l];
    Eigen::Map<Eigen::MatrixXf> gw(grads_.data() + L.w, L.out, L.in);
    Eigen::Map<Eigen::VectorXf> gb(grads_.data() + L.b, L.out);
    gw.noalias() += delta * acts_[l].transpose();
    gb += delta.rowwise().sum();
    if (l > 0) {
      Eigen::Map<const Eigen::MatrixXf> w(params_.data() + L.w, L.out, L.in);
      Eigen::MatrixXf back = w.transpose() * delta;
      delta = back.array() * (1.0f - acts_[l].array().square());
    }
  }
  return Status::Ok();
}

SyntheticTask::SyntheticTask(int input, int output, uint64_t seed)
    : input_(input), output_(output), seed_(seed), teacher_(MlpSpec{input, {32}, output, seed ^ 0x7eac4e5ULL}) {}

Batch SyntheticTask::Samples(uint64_t first, int n) const {
  Batch b;
  b.x.resize(input_, n);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < input_; ++i) b.x(i, j) = GaussianAt(seed_, (first + j) * static_cast<uint64_t>(input_) + i);
  }
  b.y = teacher_.Predict(b.x);
  return b;
}

Batch SyntheticTask::MicroBatch(uint64_t step, int micro, int gas, int rank, int world, int micro_batch) const {
  uint64_t global = static_cast<uint64_t>(micro_batch) * world;
  uint64_t first = (step * gas + micro) * global + static_cast<uint64_t>(rank) * micro_batch;
  return Samples(first, micro_batch);
}

}  // namespace dsd::runtime
