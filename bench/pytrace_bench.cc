// Cost of one traced call through the Python tracer's C ABI (runtime/trace_c_api.h): the
// begin/end pair the generated wrapper calls around every torch.distributed call, without the
// Python side (bench/pytrace_cost.py measures the whole wrapper). docs/performance.md has figures.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "runtime/trace_c_api.h"

namespace {

void OpenOnce() {
  static bool opened = [] {
    std::string path = "/tmp/dsd-pytrace-bench-" + std::to_string(::getpid()) + ".trace";
    int rc = dsd_trace_open(path.c_str(), 0, 1, 0, "gloo", 4096);
    ::unlink(path.c_str());  // the mapping stays valid
    return rc == 0;
  }();
  if (!opened) std::fprintf(stderr, "dsd_trace_open failed: %s\n", dsd_trace_error());
}

void BM_FastBeginEnd(benchmark::State& state) {
  OpenOnce();
  int seq = 0;
  for (auto _ : state) {
    int h = dsd_trace_begin_fast(3 | (1 << 8) | (1 << 16) | (4 << 24), ++seq, 1024, -1, 0, "train.py:91 (main)");
    dsd_trace_end_fast(h, nullptr);
  }
}
BENCHMARK(BM_FastBeginEnd);

void BM_WideBeginEnd(benchmark::State& state) {
  OpenOnce();
  uint64_t seq = 0;
  for (auto _ : state) {
    uint64_t h = dsd_trace_begin(3, 1, 1, ++seq, 1ull << 33, 1ull << 35, -1, 0, "train.py:91 (main)");
    dsd_trace_end(h, 1, nullptr);
  }
}
BENCHMARK(BM_WideBeginEnd);

}  // namespace

BENCHMARK_MAIN();
