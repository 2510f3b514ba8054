// Diagnosis engine cost on synthetic jobs (goal: 16,384 ranks in <= 100 ms): a healthy job, the
// rank-0-only save_checkpoint hang, and a job where every rank is in its own state. Each rank
// carries 16 recent trace records, as the live sampler passes them.
#include <benchmark/benchmark.h>

#include "diagnosis/engine.h"

namespace dsd::diagnosis {
namespace {

constexpr int64_t kNow = 1'000'000'000'000;

JobState SyntheticJob(int n, bool hang, int recent = 16) {
  JobState job;
  job.world_size = n;
  job.now_ns = kNow;
  job.ranks.resize(n);
  for (int r = 0; r < n; ++r) {
    RankState& s = job.ranks[r];
    s.rank = r;
    s.node = "node-" + std::to_string(r / 8);
    s.local_rank = r % 8;
    s.status = RankStatus::kRunning;
    s.has_trace = true;
    s.phase = "step";
    s.proc = {true, 'S', "futex_wait_queue", 0.0, 1.0};
    for (int k = 1; k <= recent; ++k) {
      OpRecord o;
      o.op = "all_reduce";
      o.seq = k;
      o.dtype = "float32";
      o.reduce = "sum";
      o.count = 1 << 20;
      o.bytes = 4 << 20;
      o.callsite = "engine.step";
      o.state = "completed";
      o.started_ns = kNow - (recent - k + 2) * 100'000'000LL + (r % 7) * 1'000'000;
      o.ended_ns = o.started_ns + 50'000'000;
      s.recent.push_back(o);
    }
    if (hang) {
      OpRecord o = s.recent.back();
      o.seq = recent + 1;
      o.state = "started";
      o.ended_ns = 0;
      o.started_ns = kNow - 300'000'000;
      if (r == 0) {
        o.op = "barrier";
        o.dtype = o.reduce = "";
        o.count = o.bytes = 0;
        o.callsite = "save_checkpoint";
      }
      s.in_flight = o;
      s.last = o;
      s.recent.push_back(o);
    }
  }
  return job;
}

void BM_DiagnoseHealthy(benchmark::State& state) {
  JobState job = SyntheticJob(static_cast<int>(state.range(0)), false);
  for (auto _ : state) benchmark::DoNotOptimize(Diagnose(job));
  state.counters["ranks"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_DiagnoseHealthy)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

void BM_DiagnoseRankZeroCheckpointHang(benchmark::State& state) {
  JobState job = SyntheticJob(static_cast<int>(state.range(0)), true);
  size_t findings = 0;
  for (auto _ : state) {
    Diagnosis d = Diagnose(job);
    findings = d.findings.size();
    benchmark::DoNotOptimize(d);
  }
  state.counters["ranks"] = static_cast<double>(state.range(0));
  state.counters["findings"] = static_cast<double>(findings);
}
BENCHMARK(BM_DiagnoseRankZeroCheckpointHang)->Arg(1024)->Arg(16384)->Unit(benchmark::kMillisecond);

void BM_ClassifyDistinctStates(benchmark::State& state) {
  JobState job = SyntheticJob(static_cast<int>(state.range(0)), true);
  for (auto& r : job.ranks) r.in_flight->seq += r.rank % 64;  // 64 classes
  for (auto _ : state) benchmark::DoNotOptimize(ClassifyRanks(job));
}
BENCHMARK(BM_ClassifyDistinctStates)->Arg(16384)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dsd::diagnosis

BENCHMARK_MAIN();
