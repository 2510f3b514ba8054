// libdsdoctor-nccl-profiler.so driven exactly as NCCL drives it (no GPU here): dlopen, dlsym of
// ncclProfiler_v<N>, init with that version's arguments, start/stop of collective, send/recv and
// kernel-channel (v3 on) events laid out as that version's descriptor, finalize;
// then the trace ring is read back. Each test loads its own copy of the library, so each has fresh
// plugin state and its own trace. Also: every NCCL library on this machine finds the version it asks for.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "runtime/trace.h"
#include "tracers/nccl_profiler_abi.h"

namespace dsd {
namespace {

namespace fs = std::filesystem;
using namespace nccl_abi;
using runtime::Op;
using runtime::ReadTrace;
using runtime::RecordState;
using runtime::TraceSnapshot;

constexpr uint64_t kCommHash = 0x1234abcd5678ef01ULL;
uint32_t CommId(uint64_t h) { return static_cast<uint32_t>(h ^ (h >> 32)); }

class NcclProfilerTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("dsd-nccl-prof-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(dir_);
    trace_ = dir_ + "/rank-3.trace";
    ::setenv("DSDOCTOR_TRACE_FILE", trace_.c_str(), 1);
    ::setenv("RANK", "3", 1);
    ::setenv("WORLD_SIZE", "4", 1);
    ::unsetenv("DSDOCTOR_NCCL_PROFILER_CHAIN");
    ::unsetenv("DSDOCTOR_TRACER_LIB");
  }
  void TearDown() override {
    ::unsetenv("DSDOCTOR_TRACE_FILE");
    ::unsetenv("RANK");
    ::unsetenv("WORLD_SIZE");
    fs::remove_all(dir_);
  }

  // A private copy of the plugin: its own statics, as a fresh process would have.
  void* Load() {
    std::string copy = dir_ + "/libdsdoctor-nccl-profiler.so";
    fs::copy_file(NCCL_PROFILER_LIB, copy, fs::copy_options::overwrite_existing);
    // Never closed: its trace's heartbeat thread runs in it (the library is -z nodelete anyway).
    void* h = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << ::dlerror();
    return h;
  }
  template <class T>
  T* Plugin(void* lib, int version) {
    return static_cast<T*>(::dlsym(lib, ("ncclProfiler_v" + std::to_string(version)).c_str()));
  }

  TraceSnapshot Trace() {
    auto t = ReadTrace(trace_);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : TraceSnapshot{};
  }

  std::string dir_, trace_;
  static int counter_;
};
int NcclProfilerTest::counter_ = 0;

// The calls one test makes, written once per descriptor layout.
struct Driver {
  virtual ~Driver() = default;
  virtual int Init(void** ctx, int* mask) = 0;
  // A kernel plan (NCCL's Group event): the calls started after it belong to it.
  virtual void NewPlan(void* ctx) = 0;
  // An all-reduce of `count` float32 on the test communicator; a send of int64 to `peer`.
  virtual void* StartAllReduce(void* ctx, size_t count) = 0;
  virtual void* StartSend(void* ctx, int peer, size_t count) = 0;
  // A kernel channel of `call` (v3 on).
  virtual void* StartChild(void* ctx, void* call) = 0;
  virtual void Stop(void* handle) = 0;
  virtual void Finalize(void* ctx) = 0;
};

template <class P, class D>
struct DriverOf : Driver {
  P* p;
  int version;
  DriverOf(P* plugin, int v) : p(plugin), version(v) {}
  int Init(void** ctx, int* mask) override {
    if constexpr (std::is_same_v<P, PluginV1> || std::is_same_v<P, PluginV2> || std::is_same_v<P, PluginV3>)
      return p->init(ctx, mask);
    else if constexpr (std::is_same_v<P, PluginV4>)
      return p->init(ctx, mask, "test-comm", kCommHash, 1, 4, 3, nullptr);
    else
      return p->init(ctx, kCommHash, mask, "test-comm", 1, 4, 3, nullptr);
  }
  void* plan = nullptr;
  void NewPlan(void* ctx) override {
    D d{};
    d.type = kGroup;
    plan = Start(ctx, d);
  }
  void InPlan(D& d) {
    if constexpr (std::is_same_v<D, DescrV5>) {
      if (d.type == kColl) d.coll.parent_group = plan;
      if (d.type == kP2p) d.p2p.parent_group = plan;
    } else {
      d.parent = plan;
    }
  }
  void* Start(void* ctx, D& d) {
    void* h = nullptr;
    EXPECT_EQ(p->start_event(ctx, &h, &d), kSuccess);
    return h;
  }
  void* StartAllReduce(void* ctx, size_t count) override {
    D d{};
    d.type = kColl;
    d.rank = 3;
    if constexpr (std::is_same_v<D, DescrV1>) {
      d.coll.comm_hash = kCommHash;
      d.coll.func = kAllReduceV1;
      d.coll.datatype = kFloat32;
    } else {
      if constexpr (std::is_same_v<D, DescrV2> || std::is_same_v<D, DescrV3>) d.coll.comm_hash = kCommHash;
      d.coll.func = "AllReduce";
      d.coll.datatype = "ncclFloat32";
      d.coll.algo = "RING";
      d.coll.proto = "SIMPLE";
    }
    d.coll.count = count;
    d.coll.root = 0;
    InPlan(d);
    return Start(ctx, d);
  }
  void* StartSend(void* ctx, int peer, size_t count) override {
    D d{};
    d.type = kP2p;
    d.rank = 3;
    if constexpr (std::is_same_v<D, DescrV1>) {
      d.p2p.comm_hash = kCommHash;
      d.p2p.func = kSendV1;
      d.p2p.datatype = kInt64;
    } else {
      if constexpr (std::is_same_v<D, DescrV2> || std::is_same_v<D, DescrV3>) d.p2p.comm_hash = kCommHash;
      d.p2p.func = "Send";
      d.p2p.datatype = "ncclInt64";
    }
    d.p2p.count = count;
    d.p2p.peer = peer;
    InPlan(d);
    return Start(ctx, d);
  }
  void* StartChild(void* ctx, void* call) override {
    D d{};
    d.parent = call;
    d.type = kKernelCh;
    return Start(ctx, d);
  }
  void Stop(void* h) override { EXPECT_EQ(p->stop_event(h), kSuccess); }
  void Finalize(void* ctx) override { EXPECT_EQ(p->finalize(ctx), kSuccess); }
};

std::unique_ptr<Driver> DriverFor(void* lib, int v) {
  auto sym = [&](int n) { return ::dlsym(lib, ("ncclProfiler_v" + std::to_string(n)).c_str()); };
  switch (v) {
    case 1:
      return std::make_unique<DriverOf<PluginV1, DescrV1>>(static_cast<PluginV1*>(sym(1)), 1);
    case 2:
      return std::make_unique<DriverOf<PluginV2, DescrV2>>(static_cast<PluginV2*>(sym(2)), 2);
    case 3:
      return std::make_unique<DriverOf<PluginV3, DescrV3>>(static_cast<PluginV3*>(sym(3)), 3);
    case 4:
      return std::make_unique<DriverOf<PluginV4, DescrV4>>(static_cast<PluginV4*>(sym(4)), 4);
    default:
      return std::make_unique<DriverOf<PluginV5, DescrV5>>(static_cast<PluginV5*>(sym(v)), v);
  }
}

TEST_P(NcclProfilerTest, EveryCallIsRecordedAndCompletesWhenItsKernelEnds) {
  const int v = GetParam();
  void* lib = Load();
  ASSERT_NE(lib, nullptr);
  const auto* plugin = Plugin<PluginV1>(lib, v);
  ASSERT_NE(plugin, nullptr);
  EXPECT_STREQ(plugin->name, "dsdoctor");
  auto d = DriverFor(lib, v);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(d->Init(&ctx, &mask), kSuccess);
  EXPECT_TRUE(mask & kColl);
  EXPECT_TRUE(mask & kP2p);
  if (v >= 3) {
    EXPECT_TRUE(mask & kKernelCh) << mask;
  }

  // All-reduce #1: enqueued (NCCL stops its event at once), then its two channels run and end.
  d->NewPlan(ctx);
  void* a1 = d->StartAllReduce(ctx, 1024);
  ASSERT_NE(a1, nullptr);
  d->Stop(a1);
  TraceSnapshot enqueued = Trace();
  if (v >= 3) {
    ASSERT_NE(enqueued.InFlight(), nullptr);
    EXPECT_TRUE(enqueued.InFlight()->async);  // the program went on: unfinished, not waiting
    void* ch0 = d->StartChild(ctx, a1);
    void* ch1 = d->StartChild(ctx, a1);
    d->Stop(ch0);
    EXPECT_NE(Trace().InFlight(), nullptr);  // one channel still runs
    d->Stop(ch1);
  } else {
    EXPECT_EQ(enqueued.InFlight(), nullptr);  // v1/v2: enqueued is all NCCL says
  }
  // A send of 8 int64 to rank 1, whose kernel ends; then all-reduce #2, launched and never finished.
  d->NewPlan(ctx);
  void* s = d->StartSend(ctx, 1, 8);
  d->Stop(s);
  if (v >= 3) d->Stop(d->StartChild(ctx, s));
  d->NewPlan(ctx);
  void* a2 = d->StartAllReduce(ctx, 2048);
  d->Stop(a2);
  if (v >= 3) d->StartChild(ctx, a2);

  TraceSnapshot t = Trace();
  EXPECT_EQ(t.backend, "nccl");
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.world_size, 4);
  ASSERT_EQ(t.records.size(), 3u);
  const auto& r1 = t.records[0];
  EXPECT_EQ(r1.op, Op::kAllReduce);
  EXPECT_EQ(r1.dtype, runtime::DType::kFloat32);
  EXPECT_EQ(r1.count, 1024u);
  EXPECT_EQ(r1.bytes, 4096u);
  EXPECT_EQ(r1.seq, 1u);
  EXPECT_EQ(r1.comm_id, CommId(kCommHash));
  EXPECT_EQ(r1.state, RecordState::kCompleted);
  EXPECT_EQ(r1.callsite, v == 1 ? "ncclAllReduce" : "ncclAllReduce RING/SIMPLE");
  const auto& send = t.records[1];
  EXPECT_EQ(send.op, Op::kSend);
  EXPECT_EQ(send.peer, 1);
  EXPECT_EQ(send.seq, 1u);
  EXPECT_EQ(send.dtype, runtime::DType::kInt64);
  EXPECT_EQ(send.state, RecordState::kCompleted);
  const auto& r2 = t.records[2];
  EXPECT_EQ(r2.seq, 2u);
  EXPECT_EQ(r2.count, 2048u);
  if (v >= 3) {
    EXPECT_EQ(r2.state, RecordState::kStarted);  // launched, never finished on this GPU
    ASSERT_NE(t.InFlight(), nullptr);
    EXPECT_EQ(t.InFlight()->seq, 2u);
  }
  d->Finalize(ctx);
}

// NCCL's kernels of one communicator run in order on its stream: a later plan's kernel that started
// proves the calls of earlier plans finished, even when NCCL gave them no kernel events.
class NcclProfilerKernelTest : public NcclProfilerTest {};  // v3 on: kernel-channel events

TEST_P(NcclProfilerKernelTest, ALaterKernelOfTheCommunicatorCompletesTheCallsBeforeIt) {
  const int v = GetParam();
  void* lib = Load();
  ASSERT_NE(lib, nullptr);
  auto d = DriverFor(lib, v);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(d->Init(&ctx, &mask), kSuccess);
  d->NewPlan(ctx);
  void* a1 = d->StartAllReduce(ctx, 16);
  d->Stop(a1);
  // One plan of grouped calls (ncclGroupStart; send; recv; ncclGroupEnd): a channel of the receive
  // that starts says nothing of the send beside it in the same kernel.
  d->NewPlan(ctx);
  void* send = d->StartSend(ctx, 1, 4);
  void* recv = d->StartSend(ctx, 2, 4);
  d->Stop(send);
  d->Stop(recv);
  d->StartChild(ctx, recv);
  TraceSnapshot t = Trace();
  ASSERT_EQ(t.records.size(), 3u);
  EXPECT_EQ(t.records[0].state, RecordState::kCompleted);  // an earlier plan: finished
  EXPECT_EQ(t.records[1].state, RecordState::kStarted);    // the same plan: still unknown
  EXPECT_EQ(t.records[2].state, RecordState::kStarted);
  // Destroying the communicator ends what it had enqueued.
  d->Finalize(ctx);
  TraceSnapshot after = Trace();
  EXPECT_EQ(after.InFlight(), nullptr);
}

INSTANTIATE_TEST_SUITE_P(EveryVersion, NcclProfilerTest, ::testing::Values(1, 2, 3, 4, 5, 6),
                         [](const auto& info) { return "v" + std::to_string(info.param); });
INSTANTIATE_TEST_SUITE_P(KernelEventVersions, NcclProfilerKernelTest, ::testing::Values(3, 4, 5, 6),
                         [](const auto& info) { return "v" + std::to_string(info.param); });

class NcclProfilerLoadTest : public NcclProfilerTest {};

// No trace asked for: the plugin asks NCCL for no event, so NCCL never calls it and the job pays nothing.
TEST_F(NcclProfilerLoadTest, WithoutATraceItAsksForNoEvents) {
  ::unsetenv("DSDOCTOR_TRACE_FILE");
  ::unsetenv("DSDOCTOR_TRACE_DIR");
  void* lib = Load();
  ASSERT_NE(lib, nullptr);
  auto d = DriverFor(lib, 5);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(d->Init(&ctx, &mask), kSuccess);
  EXPECT_EQ(mask, 0);
  d->Stop(d->StartAllReduce(ctx, 8));  // even if called: nothing written
  EXPECT_FALSE(fs::exists(trace_));
  d->Finalize(ctx);
}

// The user's own plugin keeps working behind ours: it is initialised with the same communicator, its
// mask bits reach NCCL, and it gets every event with its own handles (a child's parent is its handle).
TEST_F(NcclProfilerLoadTest, TheUsersPluginIsChainedWithItsOwnHandles) {
  ::setenv("DSDOCTOR_NCCL_PROFILER_CHAIN", CHAINED_PROFILER_LIB, 1);
  void* theirs = ::dlopen(CHAINED_PROFILER_LIB, RTLD_NOW | RTLD_LOCAL);  // the same instance ours loads
  ASSERT_NE(theirs, nullptr) << ::dlerror();
  auto counter = [&](const char* name) { return static_cast<int*>(::dlsym(theirs, name)); };
  void* lib = Load();
  ASSERT_NE(lib, nullptr);
  auto d = DriverFor(lib, 5);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(d->Init(&ctx, &mask), kSuccess);
  EXPECT_EQ(*counter("chained_inits"), 1);
  EXPECT_EQ(*static_cast<uint64_t*>(::dlsym(theirs, "chained_comm_id")), kCommHash);
  EXPECT_TRUE(mask & kCollApi);  // theirs
  EXPECT_TRUE(mask & kColl);     // ours
  void* a = d->StartAllReduce(ctx, 64);
  EXPECT_EQ(*counter("chained_starts"), 1);
  EXPECT_EQ(*static_cast<uint64_t*>(::dlsym(theirs, "chained_last_type")), kColl);
  void* ch = d->StartChild(ctx, a);
  EXPECT_EQ(*counter("chained_starts"), 2);
  void* their_parent = *static_cast<void**>(::dlsym(theirs, "chained_last_parent"));
  EXPECT_NE(their_parent, nullptr);
  EXPECT_NE(their_parent, a);  // their own handle of the all-reduce, not ours
  d->Stop(a);
  d->Stop(ch);
  EXPECT_EQ(*counter("chained_stops"), 2);
  // A proxy-control event it did not ask for (nor for any of its children) is not passed on.
  DescrV5 ctrl{};
  ctrl.type = kProxyCtrl;
  void* h = nullptr;
  ASSERT_EQ(Plugin<PluginV5>(lib, 5)->start_event(ctx, &h, &ctrl), kSuccess);
  Plugin<PluginV5>(lib, 5)->stop_event(h);
  EXPECT_EQ(*counter("chained_starts"), 2);
  d->Finalize(ctx);
  EXPECT_EQ(*counter("chained_finalizes"), 1);
  TraceSnapshot t = Trace();
  ASSERT_EQ(t.records.size(), 1u);
  EXPECT_EQ(t.records[0].state, RecordState::kCompleted);
}

// A trace this process already writes (the bundled runtime's NCCL backend, the PMPI tracer) is left
// to its writer: reopening it would truncate the file under the writer's mapping.
TEST_F(NcclProfilerLoadTest, ATraceAnotherWriterOfThisProcessKeepsIsLeftAlone) {
  auto w = runtime::TraceWriter::Create(trace_, {3, 4, 3, "h", "nccl"}, 16);
  ASSERT_TRUE(w.ok());
  (*w)->Complete(
      (*w)->Begin({Op::kBarrier, runtime::DType::kNone, runtime::ReduceOp::kNone, 1, 0, 0, -1, 0, "init_distributed"}));
  void* lib = Load();
  ASSERT_NE(lib, nullptr);
  auto d = DriverFor(lib, 5);
  void* ctx = nullptr;
  int mask = 0;
  ASSERT_EQ(d->Init(&ctx, &mask), kSuccess);
  d->Stop(d->StartAllReduce(ctx, 8));
  TraceSnapshot t = Trace();
  ASSERT_EQ(t.records.size(), 1u);
  EXPECT_EQ(t.records[0].callsite, "init_distributed");
  d->Finalize(ctx);
}

// The newest ncclProfiler_v<N> a library asks for (its dlsym names), or 0 when it has none (an NCCL
// older than the plugin API).
int NewestVersionAskedBy(const std::string& nccl) {
  std::ifstream in(nccl, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  int newest = 0;
  for (size_t at = bytes.find("ncclProfiler_v"); at != std::string::npos; at = bytes.find("ncclProfiler_v", at + 1)) {
    char c = at + 14 < bytes.size() ? bytes[at + 14] : 0;
    char after = at + 15 < bytes.size() ? bytes[at + 15] : 0;
    if (c >= '1' && c <= '9' && (after == 0 || !std::isdigit(static_cast<unsigned char>(after))))
      newest = std::max(newest, c - '0');
  }
  return newest;
}

// The system NCCL's file (found as dsdoctor finds it: dlopen of its soname), or "".
std::string SystemNccl() {
  void* h = ::dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL);
  if (!h) return "";
  Dl_info info{};
  void* sym = ::dlsym(h, "ncclGetVersion");
  std::string path = sym && ::dladdr(sym, &info) && info.dli_fname ? info.dli_fname : "";
  return path;
}

// Each NCCL here finds, under the name it looks up first, a plugin of that version.
TEST_F(NcclProfilerLoadTest, EachNcclOnThisMachineFindsTheVersionItAsksFor) {
  void* lib = Load();
  ASSERT_NE(lib, nullptr);
  int checked = 0;
  const std::string system = SystemNccl();
  if (system.empty() && std::getenv("DSDOCTOR_REQUIRE_NCCL")) ADD_FAILURE() << "no libnccl.so.2 on this machine";
  for (const std::string& nccl : {system, std::string(WHEEL_NCCL)}) {
    if (nccl.empty() || !fs::exists(nccl)) continue;
    int v = NewestVersionAskedBy(nccl);
    ASSERT_GE(v, 1) << nccl << " asks for no profiler plugin";
    for (int k = 1; k <= v; ++k) {
      auto* p = Plugin<PluginV1>(lib, k);
      ASSERT_NE(p, nullptr) << nccl << " may ask for ncclProfiler_v" << k;
      EXPECT_STREQ(p->name, "dsdoctor");
    }
    std::printf("%s asks for ncclProfiler_v%d first: exported\n", nccl.c_str(), v);
    ++checked;
  }
  // An NCCL older than the plugin API never loads it (the 2.21.5 fixture of scripts/setup.sh).
  if (fs::exists(OLD_NCCL)) {
    EXPECT_EQ(NewestVersionAskedBy(OLD_NCCL), 0);
  }
  if (checked == 0) GTEST_SKIP() << "no NCCL with a profiler plugin API on this machine";
}

}  // namespace
}  // namespace dsd
