// A hard-coded world size that does not match the launch (init_process_group(world_size=N) in a
// script started with fewer processes): the rendezvous names the ranks that never joined.
#include <cstdlib>

#include "examples/example_main.h"

int main(int argc, char** argv) {
  using namespace dsd;
  int world_size = 0;
  examples::Hooks h;
  h.add_flags = [&](CLI::App& app) {
    app.add_option("--world-size", world_size, "the world size the script asks for (default: WORLD_SIZE + 1)");
  };
  h.distributed = [&](runtime::DistributedOptions& o) {
    const char* ws = std::getenv("WORLD_SIZE");
    o.world_size = world_size > 0 ? world_size : (ws ? std::atoi(ws) : 1) + 1;
  };
  return examples::RunExample(argc, argv, "the world size does not match the launch", h);
}
