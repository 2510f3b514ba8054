// The training loop shared by the example programs: an MLP on the synthetic regression task with
// the bundled runtime (init_distributed, initialize, forward/backward/step, checkpoints). Each
// example adds its own flags and one fault through the hooks, so the failure it reproduces is
// the only difference from the healthy run. Run standalone with examples/run_local.sh, by
// mpirun (--backend mpi), or under `dsdoctor run`.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "runtime/engine.h"

namespace dsd::examples {

struct Hooks {
  // Adds the example's own flags.
  std::function<void(CLI::App&)> add_flags;
  // Adjusts how the world is initialised (the wrong-world-size example).
  std::function<void(runtime::DistributedOptions&)> distributed;
  // Runs before optimizer step `step` (0-based) on every rank; an error ends the run.
  std::function<Status(runtime::Engine&, runtime::World&, uint64_t step)> before_step;
  // Whether this rank calls save_checkpoint at a save point (default: every rank does).
  std::function<bool(runtime::World&, uint64_t step)> saves;
};

// Exit codes: 0 trained, 1 a runtime/communication error, 2 bad flags or config.
int RunExample(int argc, char** argv, const std::string& description, const Hooks& hooks);

// The default ds_config the examples use when --config is not given.
extern const char* const kDefaultConfig;

}  // namespace dsd::examples
