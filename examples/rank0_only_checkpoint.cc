// The classic hang: only rank 0 calls save_checkpoint. Rank 0 waits in save_checkpoint's barrier
// while every other rank enters the next step's gradient all-reduce: the same sequence number,
// two different collectives, and nobody ever returns.
#include "examples/example_main.h"

int main(int argc, char** argv) {
  using namespace dsd;
  std::string dir = "/tmp/dsdoctor-rank0-only-ckpt";
  int at = 3;
  examples::Hooks h;
  h.add_flags = [&](CLI::App& app) {
    app.add_option("--at-step", at, "the step after which rank 0 (alone) saves");
    app.add_option("--checkpoint-dir", dir, "where rank 0 saves");
  };
  h.before_step = [&](runtime::Engine& e, runtime::World& w, uint64_t step) -> Status {
    if (step == static_cast<uint64_t>(at) && w.rank() == 0) {
      return e.SaveCheckpoint(dir, "step" + std::to_string(step), {{"step", step}});  // the bug: inside `if rank == 0`
    }
    return Status::Ok();
  };
  return examples::RunExample(argc, argv, "only rank 0 calls save_checkpoint (hangs)", h);
}
