// Cost of the collective trace: one record (Begin + Complete into a file-backed ring), a traced
// call over a backend that does nothing, a reader's snapshot of a full ring, and a whole training
// step of the bundled engine with tracing on and off (goals: <= 50 ns a record, <= 1 % a step).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>

#include "common/run_files.h"
#include "runtime/engine.h"

namespace {

using namespace dsd::runtime;

std::string TracePath() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/dsdtrace-bench-XXXXXX";
    std::string made = ::mkdtemp(tmpl);
    // Removed when the bench ends (each run used to leave its folder behind).
    static std::string to_remove = made;
    std::atexit([] { std::filesystem::remove_all(to_remove); });
    return made;
  }();
  return dsd::RunDir(dir).RankTrace(0);
}

void BM_TraceRecord(benchmark::State& state) {
  auto w = TraceWriter::Create(TracePath(), {0, 8, 0, "bench", "gloo"}, 4096).value();
  OpInfo info{Op::kAllReduce, DType::kFloat32, ReduceOp::kSum, 0, 1 << 20, 4 << 20, -1, 0, "engine.step"};
  for (auto _ : state) {
    ++info.seq;
    w->Complete(w->Begin(info));
  }
}
BENCHMARK(BM_TraceRecord);

class NullBackend final : public Backend {
 public:
  std::string name() const override { return "null"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  dsd::Status AllReduce(void*, size_t, DType, ReduceOp) override { return dsd::Status::Ok(); }
  dsd::Status Broadcast(void*, size_t, DType, int) override { return dsd::Status::Ok(); }
  dsd::Status AllGather(const void*, void*, size_t, DType) override { return dsd::Status::Ok(); }
  dsd::Status Barrier() override { return dsd::Status::Ok(); }
  dsd::Status Send(const void*, size_t, DType, int, uint32_t) override { return dsd::Status::Ok(); }
  dsd::Status Recv(void*, size_t, DType, int, uint32_t) override { return dsd::Status::Ok(); }
};

void BM_TracedCall(benchmark::State& state) {
  std::shared_ptr<TraceWriter> t(TraceWriter::Create(TracePath(), {0, 1, 0, "bench", "null"}, 4096).value().release());
  ProcessGroup g(std::make_unique<NullBackend>(), t);
  g.set_tracing_for_benchmark(state.range(0) != 0);
  float x = 0;
  for (auto _ : state) benchmark::DoNotOptimize(AllReduce(g, &x, 1, DType::kFloat32, ReduceOp::kSum, "engine.step"));
}
BENCHMARK(BM_TracedCall)->ArgName("tracing")->Arg(0)->Arg(1);

void BM_ReadFullTrace(benchmark::State& state) {
  auto w = TraceWriter::Create(TracePath(), {0, 8, 0, "bench", "gloo"}, 4096).value();
  OpInfo info{Op::kAllReduce, DType::kFloat32, ReduceOp::kSum, 0, 1024, 4096, -1, 0, "engine.step"};
  for (int i = 0; i < 5000; ++i) {
    ++info.seq;
    w->Complete(w->Begin(info));
  }
  for (auto _ : state) benchmark::DoNotOptimize(ReadTrace(TracePath()));
}
BENCHMARK(BM_ReadFullTrace)->Unit(benchmark::kMicrosecond);

// One optimizer step of the examples' model (MLP 16-64-64-4, 5,508 parameters, micro-batch 16,
// Adam) on a world of one Gloo rank, with the trace on and off.
void BM_EngineStep(benchmark::State& state) {
  ::setenv("DSDOCTOR_TRACE_FILE", TracePath().c_str(), 1);
  auto world = InitDistributed().value();
  auto config = ParseConfig(R"({"train_micro_batch_size_per_gpu": 16, "steps_per_print": 1000000})").value();
  auto engine = Initialize(config, std::make_unique<Mlp>(MlpSpec{}), *world).value();
  world->group().set_tracing_for_benchmark(state.range(0) != 0);
  SyntheticTask task(16, 4, 1);
  Batch b = task.Samples(0, 16);
  for (auto _ : state) {
    auto loss = engine->Forward(b);
    (void)engine->Backward(*loss);
    (void)engine->Step();
  }
}
BENCHMARK(BM_EngineStep)
    ->ArgName("tracing")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();
