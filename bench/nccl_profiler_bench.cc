// CPU cost of libdsdoctor-nccl-profiler.so per NCCL collective, driven as NCCL 2.28 (v5) drives it
// on the host: the kernel plan's Group event, the collective's start and stop (enqueue), then the
// start and stop of each kernel channel's event, which complete the record. No GPU is needed: this
// is the plugin's share of the host work NCCL does per collective (docs/performance.md).
// Usage: nccl_profiler_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tracers/nccl_profiler_abi.h"

namespace {

using namespace dsd::nccl_abi;

struct Loaded {
  PluginV5* p = nullptr;
  void* ctx = nullptr;
};

Loaded& Plugin() {
  static Loaded l = [] {
    std::string trace = "/tmp/dsd-nccl-profiler-bench-" + std::to_string(::getpid()) + ".trace";
    ::setenv("DSDOCTOR_TRACE_FILE", trace.c_str(), 1);
    ::setenv("RANK", "0", 1);
    Loaded l;
    void* lib = ::dlopen(NCCL_PROFILER_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      std::fprintf(stderr, "%s\n", ::dlerror());
      std::exit(1);
    }
    l.p = static_cast<PluginV5*>(::dlsym(lib, "ncclProfiler_v5"));
    int mask = 0;
    l.p->init(&l.ctx, 0x42, &mask, "bench", 1, 8, 0, nullptr);
    std::atexit([] { ::unlink(("/tmp/dsd-nccl-profiler-bench-" + std::to_string(::getpid()) + ".trace").c_str()); });
    return l;
  }();
  return l;
}

// One 1 KiB float all-reduce with `channels` kernel channels.
void BM_CollectiveWithChannels(benchmark::State& state) {
  Loaded& l = Plugin();
  const int channels = static_cast<int>(state.range(0));
  for (auto _ : state) {
    DescrV5 g{};
    g.type = kGroup;
    void* group = nullptr;
    l.p->start_event(l.ctx, &group, &g);
    DescrV5 d{};
    d.type = kColl;
    d.coll.func = "AllReduce";
    d.coll.datatype = "ncclFloat32";
    d.coll.count = 256;
    d.coll.algo = "RING";
    d.coll.proto = "LL";
    d.coll.n_channels = static_cast<uint8_t>(channels);
    d.coll.parent_group = group;
    void* coll = nullptr;
    l.p->start_event(l.ctx, &coll, &d);
    l.p->stop_event(coll);
    l.p->stop_event(group);
    for (int c = 0; c < channels; ++c) {
      DescrV5 k{};
      k.type = kKernelCh;
      k.parent = coll;
      k.kernel_ch.channel_id = static_cast<uint8_t>(c);
      void* ch = nullptr;
      l.p->start_event(l.ctx, &ch, &k);
      l.p->stop_event(ch);
    }
  }
}
BENCHMARK(BM_CollectiveWithChannels)->ArgName("channels")->Arg(1)->Arg(2)->Arg(8);

}  // namespace

BENCHMARK_MAIN();
