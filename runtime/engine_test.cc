#include "runtime/engine.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <mutex>

#include "common/file.h"
#include "common/process.h"
#include "runtime/checkpoint.h"
#include "runtime/testing.h"

namespace dsd::runtime {
namespace {

using testing::RunRanks;

const MlpSpec kSpec{8, {16}, 2, 3};

Config MakeConfig(const std::string& extra = "") {
  std::string text = R"({"train_batch_size": 16, "optimizer": {"type": "Adam", "params": {"lr": 0.01}}, "steps_per_print": 1000)" +
                     extra + "}";
  auto c = ParseConfig(text, "test.json");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

// Trains `steps` optimizer steps; returns rank 0's final fp32 parameters and per-step losses.
struct TrainRun {
  std::vector<float> params;
  std::vector<float> losses;
  uint64_t skipped = 0;
};

Status TrainSteps(Engine& e, const SyntheticTask& task, World& w, int steps, std::vector<float>* losses) {
  const auto& plan = e.batch_plan();
  for (int s = 0; s < steps; ++s) {
    uint64_t step = e.global_steps();
    float sum = 0;
    for (int m = 0; m < plan.gradient_accumulation_steps; ++m) {
      Batch b = task.MicroBatch(step, m, plan.gradient_accumulation_steps, w.rank(), w.size(), plan.micro_batch);
      DSD_ASSIGN_OR_RETURN(float loss, e.Forward(b));
      DSD_RETURN_IF_ERROR(e.Backward(loss));
      DSD_RETURN_IF_ERROR(e.Step());
      sum += loss;
    }
    if (losses) losses->push_back(sum / plan.gradient_accumulation_steps);
  }
  return Status::Ok();
}

TrainRun Train(int world, const Config& config, int steps) {
  TrainRun out;
  std::mutex mu;
  SyntheticTask task(kSpec.input, kSpec.output, 77);
  RunRanks(world, [&](World& w) {
    auto e = Initialize(config, std::make_unique<Mlp>(kSpec), w);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::vector<float> losses;
    Status s = TrainSteps(**e, task, w, steps, &losses);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::lock_guard<std::mutex> lock(mu);
    if (w.rank() == 0) {
      out.params.assign((*e)->master_parameters(), (*e)->master_parameters() + (*e)->num_parameters());
      out.losses = losses;
      out.skipped = (*e)->skipped_steps();
    }
  });
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(double(a[i]) - b[i]));
  return d;
}

TEST(EngineTest, LossFalls) {
  TrainRun r = Train(1, MakeConfig(), 60);
  ASSERT_EQ(r.losses.size(), 60u);
  EXPECT_LT(r.losses.back(), 0.5 * r.losses.front()) << r.losses.front() << " -> " << r.losses.back();
}

// Data parallelism over N ranks with the same global batch matches one process.
class DataParallelTest : public ::testing::TestWithParam<int> {};

TEST_P(DataParallelTest, MatchesSingleProcessTraining) {
  Config c = MakeConfig();
  TrainRun single = Train(1, c, 12);
  TrainRun dp = Train(GetParam(), c, 12);
  EXPECT_LT(MaxAbsDiff(single.params, dp.params), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DataParallelTest, ::testing::Values(2, 4));

TEST(EngineTest, GradientAccumulationMatchesTheWholeBatch) {
  TrainRun whole = Train(1, MakeConfig(), 8);
  TrainRun accumulated = Train(2, MakeConfig(R"(, "gradient_accumulation_steps": 4)"), 8);
  EXPECT_LT(MaxAbsDiff(whole.params, accumulated.params), 1e-4);
}

TEST(EngineTest, ZeroStageOneMatchesStageZero) {
  TrainRun zero0 = Train(3, MakeConfig(R"(, "train_batch_size": 12)"), 10);
  TrainRun zero1 = Train(3, MakeConfig(R"(, "train_batch_size": 12, "zero_optimization": {"stage": 1})"), 10);
  EXPECT_LT(MaxAbsDiff(zero0.params, zero1.params), 1e-6);
}

TEST(EngineTest, Fp16TrainsAndRecoversFromOverflow) {
  // 2^24 makes the first scaled gradients overflow half precision: those steps are skipped and
  // the scale halves until training proceeds.
  TrainRun r = Train(2, MakeConfig(R"(, "fp16": {"enabled": true, "initial_scale_power": 24, "hysteresis": 1})"), 60);
  EXPECT_GT(r.skipped, 0u);
  EXPECT_LT(r.skipped, 30u);
  EXPECT_LT(r.losses.back(), 0.5 * r.losses.front());
  TrainRun fp32 = Train(2, MakeConfig(), 60);
  EXPECT_LT(std::abs(r.losses.back() - fp32.losses.back()), 0.5 * fp32.losses.front());
}

TEST(EngineTest, InitializeRejectsABatchThatDoesNotDivide) {
  RunRanks(3, [](World& w) {
    auto e = Initialize(MakeConfig(), std::make_unique<Mlp>(kSpec), w);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().message(),
              "test.json: train_batch_size 16 is not divisible by gradient_accumulation_steps 1 * world size (world size 3)");
  });
}

TEST(EngineTest, CallOrderIsChecked) {
  RunRanks(1, [](World& w) {
    auto e = Initialize(MakeConfig(), std::make_unique<Mlp>(kSpec), w);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ((*e)->Backward(1).message(), "backward() without a forward() before it");
    SyntheticTask task(kSpec.input, kSpec.output, 1);
    ASSERT_TRUE((*e)->Forward(task.Samples(0, 16)).ok());
    EXPECT_EQ((*e)->Step().message(), "step() after a forward() without backward()");
  });
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dsdengine-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

// Train 10 steps straight, or 5, save, a fresh engine loads and trains 5: the same bytes.
TEST_F(CheckpointTest, ResumeIsExact) {
  for (const std::string& extra : {std::string(""), std::string(R"(, "zero_optimization": {"stage": 1}, "fp16": {"enabled": true, "initial_scale_power": 8})")}) {
    Config c = MakeConfig(extra);
    TrainRun straight = Train(2, c, 10);
    SyntheticTask task(kSpec.input, kSpec.output, 77);
    std::vector<float> resumed;
    RunRanks(2, [&](World& w) {
      auto e = Initialize(c, std::make_unique<Mlp>(kSpec), w);
      ASSERT_TRUE(e.ok());
      ASSERT_TRUE(TrainSteps(**e, task, w, 5, nullptr).ok());
      ASSERT_TRUE((*e)->SaveCheckpoint(dir_, "step5", {{"epoch", 3}}).ok());
    });
    EXPECT_EQ(*ReadLatest(dir_), "step5");
    EXPECT_TRUE(FileExists(ShardPath(dir_, "step5", 0, 2)));
    EXPECT_TRUE(FileExists(ShardPath(dir_, "step5", 1, 2)));
    RunRanks(2, [&](World& w) {
      auto e = Initialize(c, std::make_unique<Mlp>(MlpSpec{kSpec.input, kSpec.hidden, kSpec.output, 999}), w);
      ASSERT_TRUE(e.ok());
      auto client = (*e)->LoadCheckpoint(dir_);
      ASSERT_TRUE(client.ok()) << client.status().ToString();
      EXPECT_EQ((*client)["epoch"], 3);
      EXPECT_EQ((*e)->global_steps(), 5u);
      ASSERT_TRUE(TrainSteps(**e, task, w, 5, nullptr).ok());
      if (w.rank() == 0) resumed.assign((*e)->master_parameters(), (*e)->master_parameters() + (*e)->num_parameters());
    });
    EXPECT_EQ(MaxAbsDiff(straight.params, resumed), 0.0) << extra;
  }
}

TEST_F(CheckpointTest, LoadErrorsNameTheProblemOnEveryRank) {
  Config c = MakeConfig(R"(, "zero_optimization": {"stage": 1})");
  RunRanks(2, [&](World& w) {
    auto e = Initialize(c, std::make_unique<Mlp>(kSpec), w);
    ASSERT_TRUE(e.ok());
    EXPECT_NE((*e)->LoadCheckpoint(dir_).status().message().find(dir_ + "/latest does not exist"), std::string::npos);
    ASSERT_TRUE((*e)->SaveCheckpoint(dir_, "t1").ok());
  });
  // Rank 1's shard corrupted: rank 1 names the checksum, rank 0 fails too instead of training on.
  std::string shard = ShardPath(dir_, "t1", 1, 2);
  std::string bytes = *ReadFile(shard);
  bytes[bytes.size() / 2] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomic(shard, bytes).ok());
  RunRanks(2, [&](World& w) {
    auto e = Initialize(c, std::make_unique<Mlp>(kSpec), w);
    ASSERT_TRUE(e.ok());
    auto r = (*e)->LoadCheckpoint(dir_, "t1");
    ASSERT_FALSE(r.ok());
    if (w.rank() == 1) EXPECT_NE(r.status().message().find("checksum mismatch"), std::string::npos) << r.status().message();
    else EXPECT_NE(r.status().message().find("1 other rank(s) could not load"), std::string::npos) << r.status().message();
  });
  // ZeRO-1 shards need the same world size.
  RunRanks(1, [&](World& w) {
    auto e = Initialize(c, std::make_unique<Mlp>(kSpec), w);
    ASSERT_TRUE(e.ok());
    auto r = (*e)->LoadCheckpoint(dir_, "t0");
    EXPECT_NE(r.status().message().find("t0/rank-0-of-1.ckpt does not exist"), std::string::npos) << r.status().message();
  });
}

TEST_F(CheckpointTest, StageZeroResumesOnAnotherWorldSize) {
  Config c = MakeConfig();
  RunRanks(2, [&](World& w) {
    auto e = Initialize(c, std::make_unique<Mlp>(kSpec), w);
    ASSERT_TRUE(e.ok());
    ASSERT_TRUE((*e)->SaveCheckpoint(dir_, "two").ok());
  });
  RunRanks(4, [&](World& w) {
    auto e = Initialize(c, std::make_unique<Mlp>(kSpec), w);
    ASSERT_TRUE(e.ok());
    ASSERT_TRUE((*e)->LoadCheckpoint(dir_).ok());
  });
}

// A rank killed while writing its shard (SIGKILL half-way through the temporary file), or after
// every shard is down but before `latest` moved: the previous checkpoint stays what loads.
TEST_F(CheckpointTest, CrashDuringSaveKeepsThePreviousCheckpointLoadable) {
  Config c = MakeConfig();
  for (const char* point : {"save_checkpoint.partial_shard", "save_checkpoint.before_latest"}) {
    std::string dir = dir_ + "/" + point;
    std::vector<float> saved;
    ChildOptions opts;
    opts.env["DSDOCTOR_TEST_CRASH_POINT"] = "";
    auto child = RunInChild(
        [&] {
          int rc = 0;
          RunRanks(1, [&](World& w) {
            auto e = Initialize(c, std::make_unique<Mlp>(kSpec), w);
            SyntheticTask task(kSpec.input, kSpec.output, 77);
            if (!e.ok() || !TrainSteps(**e, task, w, 3, nullptr).ok() || !(*e)->SaveCheckpoint(dir, "good").ok()) rc = 2;
            if (!TrainSteps(**e, task, w, 3, nullptr).ok()) rc = 3;
            ::setenv("DSDOCTOR_TEST_CRASH_POINT", point, 1);
            (void)(*e)->SaveCheckpoint(dir, "doomed");
            rc = 4;  // not reached: the save kills the process
          });
          return rc;
        },
        opts);
    ASSERT_TRUE(child.ok());
    ASSERT_TRUE(child->signaled) << point << ": " << DescribeChildEnd(*child) << child->output;
    EXPECT_EQ(child->term_signal, SIGKILL);
    EXPECT_EQ(*ReadLatest(dir), "good") << point;
    RunRanks(1, [&](World& w) {
      auto e = Initialize(c, std::make_unique<Mlp>(kSpec), w);
      ASSERT_TRUE(e.ok());
      ASSERT_TRUE((*e)->LoadCheckpoint(dir).ok()) << point;
      EXPECT_EQ((*e)->global_steps(), 3u);
      auto doomed = (*e)->LoadCheckpoint(dir, "doomed");
      if (std::string(point) == "save_checkpoint.partial_shard") {
        ASSERT_FALSE(doomed.ok());  // only a temporary file is there
        EXPECT_NE(doomed.status().message().find("doomed/rank-0-of-1.ckpt does not exist"), std::string::npos);
      } else {
        EXPECT_TRUE(doomed.ok());  // complete shards, just not yet named by latest
      }
    });
  }
}

}  // namespace
}  // namespace dsd::runtime
