#include "runtime/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dsd::runtime {
namespace {

TEST(OptimizerTest, AdamFirstStepMovesByLrTimesSign) {
  OptimizerConfig c;
  c.lr = 0.1f;
  auto opt = MakeOptimizer(c, 3);
  std::vector<float> p = {1, 1, 1}, g = {0.5f, -2.0f, 0.0f};
  opt->Step(p.data(), g.data());
  // Bias-corrected first step: m/(sqrt(v)+eps) = sign(g).
  EXPECT_NEAR(p[0], 0.9f, 1e-6);
  EXPECT_NEAR(p[1], 1.1f, 1e-6);
  EXPECT_NEAR(p[2], 1.0f, 1e-6);
  EXPECT_EQ(opt->steps(), 1);
  EXPECT_EQ(opt->State().size(), 2u);
}

TEST(OptimizerTest, AdamWDecaysWeightsDirectly) {
  OptimizerConfig c;
  c.type = OptimizerType::kAdamW;
  c.lr = 0.1f;
  c.weight_decay = 0.5f;
  auto opt = MakeOptimizer(c, 1);
  std::vector<float> p = {2}, g = {0};
  opt->Step(p.data(), g.data());
  EXPECT_NEAR(p[0], 2 - 0.1f * 0.5f * 2, 1e-6);
}

TEST(OptimizerTest, SgdWithMomentum) {
  OptimizerConfig c;
  c.type = OptimizerType::kSgd;
  c.lr = 0.5f;
  c.momentum = 0.9f;
  auto opt = MakeOptimizer(c, 1);
  std::vector<float> p = {0}, g = {1};
  opt->Step(p.data(), g.data());
  opt->Step(p.data(), g.data());
  EXPECT_NEAR(p[0], -0.5f - 0.5f * 1.9f, 1e-6);
  EXPECT_EQ(opt->State()[0].first, "momentum_buffer");
}

TEST(LossScalerTest, HalvesOnOverflowAfterHysteresisAndGrowsAfterWindow) {
  Fp16Config f;
  f.initial_scale_power = 4;
  f.loss_scale_window = 3;
  f.hysteresis = 2;
  LossScaler s(f);
  EXPECT_EQ(s.scale(), 16);
  s.Update(true);  // hysteresis absorbs the first
  EXPECT_EQ(s.scale(), 16);
  s.Update(true);
  EXPECT_EQ(s.scale(), 8);
  s.Update(false);
  s.Update(false);
  EXPECT_EQ(s.scale(), 8);
  s.Update(false);  // three clean steps since the overflow
  EXPECT_EQ(s.scale(), 16);
  LossScaler copy(f);
  ASSERT_TRUE(copy.FromJson(s.ToJson()).ok());
  EXPECT_EQ(copy.ToJson(), s.ToJson());
}

TEST(LossScalerTest, NeverBelowMinimumAndStaticStaysPut) {
  Fp16Config f;
  f.initial_scale_power = 1;
  f.hysteresis = 1;
  f.min_loss_scale = 1;
  LossScaler s(f);
  for (int i = 0; i < 5; ++i) s.Update(true);
  EXPECT_EQ(s.scale(), 1);
  f.loss_scale = 128;
  LossScaler fixed(f);
  fixed.Update(true);
  fixed.Update(false);
  EXPECT_EQ(fixed.scale(), 128);
}

}  // namespace
}  // namespace dsd::runtime
