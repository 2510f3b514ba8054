// Ranks that disagree on a collective. Every step each rank all-reduces a small metrics vector
// (callsite "user.metrics"); at --at-step, --rank changes its element count (size), its reduce op
// (op: max instead of sum, which completes with wrong numbers and no error) or its type (dtype).
#include "examples/example_main.h"

int main(int argc, char** argv) {
  using namespace dsd;
  std::string mode = "size";
  int at = 3, bad_rank = -1;
  examples::Hooks h;
  h.add_flags = [&](CLI::App& app) {
    app.add_option("--mode", mode, "size | op | dtype")->check(CLI::IsMember({"size", "op", "dtype"}));
    app.add_option("--at-step", at, "the step where one rank diverges");
    app.add_option("--rank", bad_rank, "the diverging rank (default: the last)");
  };
  h.before_step = [&](runtime::Engine& e, runtime::World& w, uint64_t step) -> Status {
    int culprit = bad_rank >= 0 ? bad_rank : w.size() - 1;
    bool diverge = step == static_cast<uint64_t>(at) && w.rank() == culprit;
    std::vector<float> metrics(diverge && mode == "size" ? 64 : 4, 1.0f);
    if (diverge && mode == "dtype") {
      std::vector<int64_t> as_int(4, 1);
      return runtime::AllReduce(e.group(), as_int.data(), as_int.size(), runtime::DType::kInt64, runtime::ReduceOp::kSum,
                                "user.metrics");
    }
    runtime::ReduceOp op = diverge && mode == "op" ? runtime::ReduceOp::kMax : runtime::ReduceOp::kSum;
    return runtime::AllReduce(e.group(), metrics, op, "user.metrics");
  };
  return examples::RunExample(argc, argv, "one rank issues a mismatched collective", h);
}
