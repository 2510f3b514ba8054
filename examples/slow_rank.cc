// A slow rank: --rank sleeps --delay-ms before every step (a straggler the others wait for in
// every all-reduce), and optionally stalls once for --stall-ms at --stall-at-step (long enough to
// trip the others' watchdogs, or to be killed while the others wait).
#include <thread>

#include "examples/example_main.h"

int main(int argc, char** argv) {
  using namespace dsd;
  int slow = 1, delay_ms = 200, stall_at = -1, stall_ms = 0;
  examples::Hooks h;
  h.add_flags = [&](CLI::App& app) {
    app.add_option("--rank", slow, "the slow rank");
    app.add_option("--delay-ms", delay_ms, "extra time per step");
    app.add_option("--stall-at-step", stall_at, "stall once before this step");
    app.add_option("--stall-ms", stall_ms, "how long the stall lasts");
  };
  h.before_step = [&](runtime::Engine&, runtime::World& w, uint64_t step) -> Status {
    if (w.rank() != slow) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    if (static_cast<int64_t>(step) == stall_at) std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
    return Status::Ok();
  };
  return examples::RunExample(argc, argv, "one rank is slow", h);
}
