// Wire framing throughput: encode and decode of typical agent messages.
#include <benchmark/benchmark.h>

#include "common/framing.h"

namespace {

nlohmann::json Message(size_t payload) {
  return {{"type", "log"}, {"rank", 17}, {"seq", 123456}, {"data", std::string(payload, 'x')}};
}

void BM_Encode(benchmark::State& state) {
  auto msg = Message(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(dsd::wire::EncodeFrame(msg));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Encode)->Arg(64)->Arg(4096)->Arg(1 << 20);

void BM_Decode(benchmark::State& state) {
  std::string frame = *dsd::wire::EncodeFrame(Message(static_cast<size_t>(state.range(0))));
  dsd::wire::FrameDecoder decoder;
  for (auto _ : state) {
    decoder.Feed(frame);
    benchmark::DoNotOptimize(decoder.Next());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(frame.size()));
}
BENCHMARK(BM_Decode)->Arg(64)->Arg(4096)->Arg(1 << 20);

}  // namespace

BENCHMARK_MAIN();
