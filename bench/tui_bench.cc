// TUI frame build (snapshot + frame, no terminal) for the rank-0-only save_checkpoint hang
// (goal: 4,096 ranks in <= 10 ms per frame). The diagnosis itself is in diagnosis_bench.
#include <benchmark/benchmark.h>

#include "diagnosis/engine.h"
#include "diagnosis/testing.h"
#include "tui/model.h"
#include "tui/stream.h"

namespace dsd::tui {
namespace {

constexpr int64_t kNow = 1'000'000'000'000;

diagnosis::JobState Hang(int n) { return diagnosis::testing::CheckpointHangJob(n, kNow, kNow - 2'000'000'000, 8); }

void BM_BuildFrame(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  auto job = Hang(n);
  auto d = diagnosis::Diagnose(job);
  LogTails tails;
  for (int r = 0; r < n; ++r) {
    tails.Append(r, "step 4 loss 0.25");
    tails.Append(r, "step 5 loss 0.24");
  }
  Layout layout = ComputeLayout(static_cast<int>(state.range(1)), static_cast<int>(state.range(2)));
  for (auto _ : state) {
    Snapshot s = BuildSnapshot(job, d, {"train", kNow - 10'000'000'000, 1.0});
    benchmark::DoNotOptimize(BuildFrame(s, layout, {}, &tails));
  }
  state.counters["ranks"] = n;
}
BENCHMARK(BM_BuildFrame)->Args({4, 80, 24})->Args({4096, 80, 24})->Args({4096, 250, 70})->Unit(benchmark::kMillisecond);

// The event stream of the same job: a tick to send while nothing but time changes (what a
// coordinator pays every 200 ms), and a full tick applied by a viewer (its keyframe).
void BM_EncodeQuietTick(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  auto job = Hang(n);
  auto d = diagnosis::Diagnose(job);
  Snapshot s = BuildSnapshot(job, d, {"train", kNow - 10'000'000'000, 1.0});
  StreamEncoder enc;
  (void)enc.Tick(s);
  size_t bytes = 0;
  for (auto _ : state) {
    s.elapsed_s += 0.2;
    for (auto& r : s.rows) r.in_state_s += 0.2;
    auto e = enc.Tick(s);
    bytes = e.dump().size();
    benchmark::DoNotOptimize(e);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_EncodeQuietTick)->Arg(4096)->Unit(benchmark::kMillisecond);

void BM_DecodeFullTick(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  auto job = Hang(n);
  auto d = diagnosis::Diagnose(job);
  StreamEncoder enc;
  auto tick = enc.Tick(BuildSnapshot(job, d, {"train", kNow - 10'000'000'000, 1.0}));
  auto header = HeaderEvent("train", n, 0);
  for (auto _ : state) {
    StreamDecoder dec;
    (void)dec.Apply(header);
    benchmark::DoNotOptimize(dec.Apply(tick));
  }
  state.counters["bytes"] = static_cast<double>(tick.dump().size());
}
BENCHMARK(BM_DecodeFullTick)->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dsd::tui

BENCHMARK_MAIN();
