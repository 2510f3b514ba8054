// Local memory bandwidth (memcpy), the ceiling for any loopback transfer on this machine.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

static void BM_Memcpy(benchmark::State& state) {
  size_t n = static_cast<size_t>(state.range(0));
  std::vector<char> a(n, 1), b(n, 0);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n);
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_Memcpy)->Arg(1 << 20)->Arg(64 << 20);

BENCHMARK_MAIN();
