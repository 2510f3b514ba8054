#include "runtime/config.h"

#include <gtest/gtest.h>

namespace dsd::runtime {
namespace {

std::string ErrorOf(const std::string& text) {
  auto c = ParseConfig(text, "ds.json");
  return c.ok() ? "ok" : c.status().message();
}

TEST(ConfigTest, ParsesTheDeepSpeedKeys) {
  auto c = ParseConfig(R"({
    "train_batch_size": 32, "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.00015, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.01}},
    "fp16": {"enabled": true, "initial_scale_power": 12, "loss_scale_window": 50, "hysteresis": 1},
    "zero_optimization": {"stage": 1}, "gradient_clipping": 1.0, "steps_per_print": 5,
    "dsdoctor": {"watchdog_timeout_s": 30, "watchdog_policy": "abort"}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->optimizer.type, OptimizerType::kAdamW);
  EXPECT_FLOAT_EQ(c->optimizer.lr, 0.00015f);
  EXPECT_FLOAT_EQ(c->optimizer.beta1, 0.8f);
  EXPECT_TRUE(c->fp16.enabled);
  EXPECT_EQ(c->fp16.initial_scale_power, 12);
  EXPECT_EQ(c->zero_stage, 1);
  EXPECT_EQ(c->dsdoctor.watchdog_policy, WatchdogPolicy::kAbort);
  auto plan = ResolveBatch(*c, 4);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->micro_batch, 4);
  EXPECT_EQ(plan->gradient_accumulation_steps, 2);
}

TEST(ConfigTest, LegacyZeroTrueMeansStageOne) {
  auto c = ParseConfig(R"({"train_batch_size": 8, "zero_optimization": true, "optimizer": {"type": "adam"}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->zero_stage, 1);
  EXPECT_EQ(c->optimizer.type, OptimizerType::kAdam);
}

TEST(ConfigTest, EveryBadKeyOrValueIsNamed) {
  EXPECT_EQ(
      ErrorOf(R"({"train_batch_size": 8, "wall_clock_breakdown": true})"),
      "ds.json: wall_clock_breakdown: unsupported key (supported: train_batch_size, train_micro_batch_size_per_gpu, "
      "gradient_accumulation_steps, optimizer, fp16, zero_optimization, gradient_clipping, steps_per_print, dsdoctor)");
  EXPECT_EQ(ErrorOf(R"({"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale_window": -3}})"),
            "ds.json: fp16.loss_scale_window: expected an integer >= 1, got -3");
  EXPECT_EQ(ErrorOf(R"({"train_batch_size": "8"})"), "ds.json: train_batch_size: expected an integer >= 1, got \"8\"");
  EXPECT_EQ(ErrorOf(R"({"train_batch_size": 8, "optimizer": {"type": "OneBitAdam"}})"),
            "ds.json: optimizer.type: unsupported optimizer \"OneBitAdam\" (supported: Adam, AdamW, SGD)");
  EXPECT_EQ(
      ErrorOf(R"({"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"lr": 0.1, "betas": [0.9, 0.9]}}})"),
      "ds.json: optimizer.params.betas: unsupported key (supported in optimizer.params: lr, momentum, weight_decay)");
  EXPECT_EQ(ErrorOf(R"({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"betas": [0.9]}}})"),
            "ds.json: optimizer.params.betas: expected [beta1, beta2] with each in [0, 1), got [0.9]");
  EXPECT_EQ(ErrorOf(R"({"train_batch_size": 8, "zero_optimization": {"stage": 3}})"),
            "ds.json: zero_optimization.stage: stage 3 is not implemented by the bundled runtime (supported: 0, 1)");
  EXPECT_EQ(ErrorOf(R"({"train_batch_size": 8, "fp16": {"enabled": "yes"}})"),
            "ds.json: fp16.enabled: expected true or false, got \"yes\"");
  EXPECT_EQ(ErrorOf(R"({"train_batch_size": 8, "dsdoctor": {"watchdog_policy": "kill"}})"),
            "ds.json: dsdoctor.watchdog_policy: expected \"warn\" or \"abort\", got \"kill\"");
  EXPECT_EQ(ErrorOf(R"({"gradient_accumulation_steps": 2})"),
            "ds.json: train_batch_size or train_micro_batch_size_per_gpu must be set");
  EXPECT_EQ(ErrorOf(R"([1, 2])"), "ds.json: top level: expected an object, got [1,2]");
}

TEST(ConfigTest, SyntaxErrorsGiveLineAndColumn) {
  std::string e = ErrorOf("{\n  \"train_batch_size\": 8,\n  \"fp16\": {enabled: true}\n}");
  EXPECT_EQ(e.rfind("ds.json:3:12: invalid JSON", 0), 0u) << e;
}

TEST(ConfigTest, BatchSizesFollowDeepSpeedsRule) {
  auto cfg = [](const std::string& t) { return *ParseConfig(t, "c.json"); };
  auto p = ResolveBatch(cfg(R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 3})"), 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->train_batch_size, 24);
  p = ResolveBatch(cfg(R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2})"), 4);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->gradient_accumulation_steps, 2);
  EXPECT_EQ(
      ResolveBatch(cfg(R"({"train_batch_size": 10})"), 4).status().message(),
      "c.json: train_batch_size 10 is not divisible by gradient_accumulation_steps 1 * world size (world size 4)");
  EXPECT_EQ(
      ResolveBatch(
          cfg(R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1})"), 4)
          .status()
          .message(),
      "c.json: train_batch_size 16 != train_micro_batch_size_per_gpu 2 * gradient_accumulation_steps 1 * world size "
      "(world size 4)");
}

TEST(ConfigTest, EnvironmentOverridesTheWatchdog) {
  DiagnosticsConfig d;
  std::string t = "2.5", p = "abort";
  ASSERT_TRUE(ApplyDiagnosticsEnv(&t, &p, &d).ok());
  EXPECT_DOUBLE_EQ(d.watchdog_timeout_s, 2.5);
  EXPECT_EQ(d.watchdog_policy, WatchdogPolicy::kAbort);
  std::string bad = "-1";
  EXPECT_EQ(ApplyDiagnosticsEnv(&bad, nullptr, &d).message(),
            "DSDOCTOR_TIMEOUT=-1: expected seconds >= 0 (0 disables the watchdog)");
  std::string pol = "ignore";
  EXPECT_EQ(ApplyDiagnosticsEnv(nullptr, &pol, &d).message(),
            "DSDOCTOR_WATCHDOG_POLICY=ignore: expected warn or abort");
}

TEST(ConfigTest, LoadConfigNamesAMissingFile) {
  auto c = LoadConfig("/nonexistent/ds_config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/ds_config.json"), std::string::npos);
}

// Numbers no double holds and nesting that would overflow the stack are named errors, not a crash.
TEST(ConfigTest, HostileJsonIsAnErrorNotACrash) {
  auto big = ParseConfig(R"({"train_batch_size": 1e999})", "ds.json");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("ds.json: invalid JSON"), std::string::npos) << big.status().message();
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto nested = ParseConfig(deep, "ds.json");
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.status().message().find("nested deeper than"), std::string::npos) << nested.status().message();
}

}  // namespace
}  // namespace dsd::runtime
