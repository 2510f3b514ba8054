// A rank that crashes mid-run: --rank dies at --at-step by a segmentation fault (segv), abort()
// (abort) or exit code 3 (exit). The others are left in the next gradient all-reduce.
#include <csignal>
#include <cstdlib>

#include "examples/example_main.h"

int main(int argc, char** argv) {
  using namespace dsd;
  std::string how = "segv";
  int at = 3, victim = 1;
  examples::Hooks h;
  h.add_flags = [&](CLI::App& app) {
    app.add_option("--how", how, "segv | abort | exit")->check(CLI::IsMember({"segv", "abort", "exit"}));
    app.add_option("--at-step", at, "the step where the rank dies");
    app.add_option("--rank", victim, "the rank that dies");
  };
  h.before_step = [&](runtime::Engine&, runtime::World& w, uint64_t step) -> Status {
    if (step == static_cast<uint64_t>(at) && w.rank() == victim) {
      std::fprintf(stderr, "crash_rank: rank %d crashing (%s) at step %llu\n", w.rank(), how.c_str(),
                   static_cast<unsigned long long>(step));
      std::fflush(stderr);
      if (how == "exit") std::exit(3);
      if (how == "abort") std::abort();
      std::raise(SIGSEGV);
    }
    return Status::Ok();
  };
  return examples::RunExample(argc, argv, "a rank crashes mid-run", h);
}
