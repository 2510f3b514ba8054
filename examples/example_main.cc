#include "examples/example_main.h"

#include <cstdio>
#include <fstream>
#include <thread>

#include "common/log.h"

namespace dsd::examples {

const char* const kDefaultConfig = R"({
  "train_micro_batch_size_per_gpu": 16,
  "gradient_accumulation_steps": 1,
  "optimizer": {"type": "Adam", "params": {"lr": 0.005}},
  "steps_per_print": 5
})";

int RunExample(int argc, char** argv, const std::string& description, const Hooks& hooks) {
  CLI::App app(description);
  int steps = 20, save_every = 0, step_delay_ms = 0;
  std::string config_path, backend, save_dir, dump_params, save_tag_prefix = "step";
  bool resume = false;
  app.add_option("--steps", steps, "optimizer steps to train")->check(CLI::Range(1, 1 << 30));
  app.add_option("--config", config_path, "ds_config.json (default: a built-in Adam config)");
  app.add_option("--backend", backend, "gloo | mpi | nccl (default: DSDOCTOR_BACKEND, else gloo; mpi under mpirun)");
  app.add_option("--save-dir", save_dir, "checkpoint directory");
  app.add_option("--save-every", save_every, "save a checkpoint every N steps (needs --save-dir)");
  app.add_flag("--resume", resume, "load the latest checkpoint in --save-dir first");
  app.add_option("--dump-params", dump_params, "rank 0 writes the final fp32 parameters here (raw float32)");
  app.add_option("--step-delay-ms", step_delay_ms, "sleep this long before every step on every rank");
  if (hooks.add_flags) hooks.add_flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  log::Init();
  auto log = log::Get("example");

  auto config = config_path.empty() ? runtime::ParseConfig(kDefaultConfig, "built-in config")
                                    : runtime::LoadConfig(config_path);
  if (!config.ok()) {
    log->error("{}", config.status().message());
    return 2;
  }
  runtime::DistributedOptions dist;
  dist.backend = backend;
  dist.comm_timeout = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(config->dsdoctor.comm_timeout_s));
  dist.trace_capacity = static_cast<uint32_t>(config->dsdoctor.trace_capacity);
  if (hooks.distributed) hooks.distributed(dist);
  auto world = runtime::InitDistributed(dist);
  if (!world.ok()) {
    log->error("init_distributed: {}", world.status().message());
    return world.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  runtime::World& w = **world;
  runtime::MlpSpec spec;
  auto engine = runtime::Initialize(*config, std::make_unique<runtime::Mlp>(spec), w);
  if (!engine.ok()) {
    log->error("initialize: {}", engine.status().message());
    return engine.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  runtime::Engine& e = **engine;
  if (resume) {
    if (save_dir.empty()) {
      log->error("--resume needs --save-dir");
      return 2;
    }
    auto client = e.LoadCheckpoint(save_dir);
    if (!client.ok()) {
      log->error("load_checkpoint: {}", client.status().message());
      return 1;
    }
  }
  runtime::SyntheticTask task(spec.input, spec.output, 2024);
  const auto& plan = e.batch_plan();
  float first_loss = -1, loss_sum = 0;
  auto fail = [&](const Status& s) {
    log->error("rank {}: step {}: {}", w.rank(), e.global_steps(), s.message());
    return 1;
  };
  while (e.global_steps() < static_cast<uint64_t>(steps)) {
    uint64_t step = e.global_steps();
    if (step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms));
    if (hooks.before_step) {
      if (Status s = hooks.before_step(e, w, step); !s.ok()) return fail(s);
    }
    loss_sum = 0;
    for (int m = 0; m < plan.gradient_accumulation_steps; ++m) {
      runtime::Batch b = task.MicroBatch(step, m, plan.gradient_accumulation_steps, w.rank(), w.size(), plan.micro_batch);
      auto loss = e.Forward(b);
      if (!loss.ok()) return fail(loss.status());
      if (Status s = e.Backward(*loss); !s.ok()) return fail(s);
      if (Status s = e.Step(); !s.ok()) return fail(s);
      loss_sum += *loss;
    }
    float loss = loss_sum / static_cast<float>(plan.gradient_accumulation_steps);
    if (first_loss < 0) first_loss = loss;
    if (!save_dir.empty() && save_every > 0 && e.global_steps() % static_cast<uint64_t>(save_every) == 0) {
      bool mine = hooks.saves ? hooks.saves(w, e.global_steps()) : true;
      if (mine) {
        Status s = e.SaveCheckpoint(save_dir, save_tag_prefix + std::to_string(e.global_steps()),
                                    {{"step", e.global_steps()}});
        if (!s.ok()) return fail(s);
      }
    }
  }
  if (!dump_params.empty() && w.rank() == 0) {
    std::ofstream out(dump_params, std::ios::binary);
    out.write(reinterpret_cast<const char*>(e.master_parameters()),
              static_cast<std::streamsize>(e.num_parameters() * sizeof(float)));
  }
  log->info("rank {}: done: {} steps, loss {:.6f} -> {:.6f}", w.rank(), e.global_steps(), first_loss,
            loss_sum / static_cast<float>(plan.gradient_accumulation_steps));
  w.Finish();
  return 0;
}

}  // namespace dsd::examples
