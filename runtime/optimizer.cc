#include "runtime/optimizer.h"

#include <cmath>

namespace dsd::runtime {
namespace {

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerConfig& c, size_t n) : c_(c), m_(n, 0.0f), v_(n, 0.0f) {}
  void Step(float* p, const float* g) override {
    ++steps_;
    const float b1 = c_.beta1, b2 = c_.beta2;
    const float c1 = 1.0f - std::pow(b1, static_cast<float>(steps_));
    const float c2 = 1.0f - std::pow(b2, static_cast<float>(steps_));
    const bool decoupled = c_.type == OptimizerType::kAdamW;
    for (size_t i = 0; i < m_.size(); ++i) {
      float grad = g[i];
      if (!decoupled) grad += c_.weight_decay * p[i];  // Adam: L2 through the gradient
      m_[i] = b1 * m_[i] + (1 - b1) * grad;
      v_[i] = b2 * v_[i] + (1 - b2) * grad * grad;
      float update = (m_[i] / c1) / (std::sqrt(v_[i] / c2) + c_.eps);
      if (decoupled) update += c_.weight_decay * p[i];
      p[i] -= c_.lr * update;
    }
  }
  std::vector<std::pair<std::string, std::vector<float>*>> State() override {
    return {{"exp_avg", &m_}, {"exp_avg_sq", &v_}};
  }

 private:
  OptimizerConfig c_;
  std::vector<float> m_, v_;
};

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerConfig& c, size_t n) : c_(c), buf_(c.momentum > 0 ? n : 0, 0.0f), n_(n) {}
  void Step(float* p, const float* g) override {
    ++steps_;
    for (size_t i = 0; i < n_; ++i) {
      float grad = g[i] + c_.weight_decay * p[i];
      if (!buf_.empty()) {
        buf_[i] = c_.momentum * buf_[i] + grad;
        grad = buf_[i];
      }
      p[i] -= c_.lr * grad;
    }
  }
  std::vector<std::pair<std::string, std::vector<float>*>> State() override {
    if (buf_.empty()) return {};
    return {{"momentum_buffer", &buf_}};
  }

 private:
  OptimizerConfig c_;
  std::vector<float> buf_;
  size_t n_;
};

}  // namespace

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerConfig& config, size_t n) {
  if (config.type == OptimizerType::kSgd) return std::make_unique<Sgd>(config, n);
  return std::make_unique<Adam>(config, n);
}

LossScaler::LossScaler(const Fp16Config& c)
    : dynamic_(c.loss_scale == 0),
      scale_(c.loss_scale > 0 ? c.loss_scale : std::ldexp(1.0f, c.initial_scale_power)),
      window_(c.loss_scale_window),
      hysteresis_(c.hysteresis),
      cur_hysteresis_(c.hysteresis),
      min_scale_(c.min_loss_scale) {}

void LossScaler::Update(bool overflow) {
  if (dynamic_) {
    if (overflow) {
      if (hysteresis_ == 1 || cur_hysteresis_ == 1) scale_ = std::max(scale_ / 2, min_scale_);
      else --cur_hysteresis_;
      last_overflow_iter_ = iter_;
    } else if ((iter_ - last_overflow_iter_) % window_ == 0) {
      cur_hysteresis_ = hysteresis_;
      scale_ *= 2;
    }
  }
  ++iter_;
}

nlohmann::json LossScaler::ToJson() const {
  return {{"scale", scale_}, {"cur_hysteresis", cur_hysteresis_}, {"iter", iter_}, {"last_overflow_iter", last_overflow_iter_}};
}

Status LossScaler::FromJson(const nlohmann::json& j) {
  try {
    scale_ = j.at("scale").get<float>();
    cur_hysteresis_ = j.at("cur_hysteresis").get<int>();
    iter_ = j.at("iter").get<int64_t>();
    last_overflow_iter_ = j.at("last_overflow_iter").get<int64_t>();
  } catch (const std::exception& e) {
    return Corruption(std::string("loss scaler state: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace dsd::runtime
