// libdsdoctor-nccl-profiler.so: NCCL's profiler plugin (NCCL_PROFILER_PLUGIN, NCCL 2.23 and later)
// recording every collective and send/recv a process issues through NCCL into the rank's trace ring:
// DDP's reducer, FSDP, Megatron, C++ trainers — calls that never pass through Python.
//
// - Exports ncclProfiler_v1 … ncclProfiler_v6; NCCL takes the newest it knows (2.28.9: v5; 2.29 and
//   2.30: v6; 2.23: v1) and calls that version's functions, which read that version's descriptor.
// - A collective or send/recv is an async record (the program goes on once NCCL enqueued it) with the
//   communicator's hash as its id and a sequence number per communicator (per communicator and peer
//   for send/recv) counted here, in enqueue order, the same on every rank. It completes when its
//   kernel's last channel stops (v3 on: NCCL's per-channel kernel events), or, for v1/v2, when its
//   last network proxy op stops (at once when it had none: enqueue is all NCCL tells). A later
//   collective of the same communicator whose kernel started also completes the earlier ones (one
//   stream, in order). So a collective launched but never finished on one GPU stays in flight.
// - With no DSDOCTOR_TRACE_FILE/DSDOCTOR_TRACE_DIR it asks NCCL for no events: NCCL then never calls it.
// - DSDOCTOR_NCCL_PROFILER_CHAIN names another plugin (the user's, e.g. NCCL Inspector): it is loaded
//   and gets every call it asked for, with its own handles and context, as if NCCL had loaded it.
// - When the Python tracer's library is in the process (DSDOCTOR_TRACER_LIB), records go through it:
//   one writer per trace file.
//
// Thread-safety: NCCL calls from the enqueueing threads, CUDA's host-callback thread and its proxy
// threads; one mutex orders the plugin's state.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "runtime/trace_c_api.h"
#include "runtime/types.h"
#include "tracers/nccl_profiler_abi.h"

namespace {

using namespace dsd::nccl_abi;
using dsd::runtime::DType;
using dsd::runtime::Op;

constexpr int kAsync = 0x100;

// The trace's C ABI: the Python tracer's copy when it is loaded (it owns the file), else ours.
struct TraceApi {
  decltype(&dsd_trace_open) open = &dsd_trace_open;
  decltype(&dsd_trace_begin) begin = &dsd_trace_begin;
  decltype(&dsd_trace_end) end = &dsd_trace_end;
  decltype(&dsd_trace_error) error = &dsd_trace_error;

  void UsePythonTracerIfLoaded() {
    const char* lib = std::getenv("DSDOCTOR_TRACER_LIB");
    if (!lib || !*lib) return;
    void* h = ::dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return;
    auto o = reinterpret_cast<decltype(open)>(::dlsym(h, "dsd_trace_open"));
    auto b = reinterpret_cast<decltype(begin)>(::dlsym(h, "dsd_trace_begin"));
    auto e = reinterpret_cast<decltype(end)>(::dlsym(h, "dsd_trace_end"));
    auto r = reinterpret_cast<decltype(error)>(::dlsym(h, "dsd_trace_error"));
    if (o && b && e && r) open = o, begin = b, end = e, error = r, python = true;
  }
  bool python = false;  // the Python tracer's library writes the records
};

enum class Kind : uint8_t { kOther, kCall, kChild };

// What a handle given to NCCL stands for. Events live in a ring: NCCL keeps using a collective's
// handle for its children after stopping it, so handles outlive their stop for 65,536 events.
struct Event {
  Kind kind = Kind::kOther;
  int version = 0;        // of the plugin NCCL loaded
  uint64_t record = 0;    // trace handle of a call (0: ended or untraced)
  Event* call = nullptr;  // a child's collective or send/recv
  struct Comm* comm = nullptr;
  int children = 0;  // running kernel channels / proxy ops
  bool child_seen = false;
  bool stopped = false;  // NCCL stopped the call's event: it is enqueued
  void* chained = nullptr;
};

struct Comm {
  uint32_t id = 0;
  uint64_t seq = 0;
  std::map<uint64_t, uint64_t> p2p_seq;  // (op << 32 | peer) -> sends/recvs begun
  std::deque<Event*> open;               // calls begun and not yet completed, in enqueue order
};

struct Context {
  int version = 0;
  Comm* comm = nullptr;  // v4 on; v1-v3 name the communicator in each descriptor
  void* chained = nullptr;
  int chained_mask = 0;
};

// The plugin NCCL chains to: its struct of the version NCCL loaded us with.
struct Chain {
  void* lib = nullptr;
  const void* plugin[7] = {};  // by version
};

uint32_t CommId(uint64_t hash) {
  uint32_t id = static_cast<uint32_t>(hash ^ (hash >> 32));
  return id == 0 ? 1 : id;  // 0 is the world of the other tracers
}

Op OpOf(std::string_view f) {
  if (f == "AllReduce") return Op::kAllReduce;
  if (f == "Broadcast") return Op::kBroadcast;
  if (f == "Reduce") return Op::kReduce;
  if (f == "AllGather") return Op::kAllGather;
  if (f == "ReduceScatter") return Op::kReduceScatter;
  if (f == "Send") return Op::kSend;
  if (f == "Recv") return Op::kRecv;
  if (f == "AlltoAll") return Op::kAllToAll;
  if (f == "Gather") return Op::kGather;
  if (f == "Scatter") return Op::kScatter;
  return Op::kNone;
}

const char* FuncNameV1(uint8_t f) {
  static const char* names[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                "AllReduce", "SendRecv", "Send",      "Recv"};
  return f < 8 ? names[f] : "Invalid";
}

// NCCL's datatype strings ("ncclFloat32"; ncclUint8 reads "Unknown") and v1's codes.
DType DTypeOf(std::string_view t) {
  if (t == "ncclFloat32") return DType::kFloat32;
  if (t == "ncclFloat16") return DType::kFloat16;
  if (t == "ncclBfloat16") return DType::kBFloat16;
  if (t == "ncclFloat64") return DType::kFloat64;
  if (t == "ncclInt32" || t == "ncclUint32") return DType::kInt32;
  if (t == "ncclInt64" || t == "ncclUint64") return DType::kInt64;
  if (t == "ncclInt8") return DType::kInt8;
  if (t == "ncclUint8") return DType::kUint8;
  return DType::kOther;
}
DType DTypeOfV1(uint8_t t) {
  static const DType types[] = {DType::kInt8,  DType::kUint8,   DType::kInt32,   DType::kInt32,   DType::kInt64,
                                DType::kInt64, DType::kFloat16, DType::kFloat32, DType::kFloat64, DType::kBFloat16};
  return t < 10 ? types[t] : DType::kOther;
}
size_t DTypeBytes(DType t) {
  switch (t) {
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    default:
      return 1;
  }
}

// One call as the versions' descriptors give it.
struct CallInfo {
  Op op = Op::kNone;
  DType dtype = DType::kNone;
  uint64_t count = 0;
  int peer = -1;
  uint64_t comm_hash = 0;
  const char* func = "";
  const char* algo = nullptr;
  const char* proto = nullptr;
};

int EnvInt(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (!v || !*v) continue;
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (*end == '\0' && x >= 0 && x < (1 << 24)) return static_cast<int>(x);
  }
  return -1;
}

class Profiler {
 public:
  Profiler() {
    const char* f = std::getenv("DSDOCTOR_TRACE_FILE");
    const char* d = std::getenv("DSDOCTOR_TRACE_DIR");
    wanted_ = (f && *f) || (d && *d);
    api_.UsePythonTracerIfLoaded();
  }

  // The events this plugin asks for, by the version NCCL loaded.
  int Mask(int version) const {
    if (!wanted_) return 0;
    return static_cast<int>(kColl | kP2p | (version >= 3 ? uint64_t{kKernelCh} : uint64_t{0}));
  }

  Result Init(int version, void** context, int* mask, const char* name, uint64_t hash, int n_nodes, int n_ranks,
              int rank, Logger log, uint64_t id_v5) {
    auto ctx = std::make_unique<Context>();
    ctx->version = version;
    if (version >= 4) {
      std::lock_guard<std::mutex> lock(mu_);
      ctx->comm = CommOf(hash);
      if (rank_ < 0) rank_ = rank, n_ranks_ = n_ranks;
    }
    ChainInit(ctx.get(), version, mask, name, hash, n_nodes, n_ranks, rank, log, id_v5);
    if (mask) *mask |= Mask(version);
    *context = ctx.release();
    return kSuccess;
  }

  Result Finalize(void* context) {
    auto* ctx = static_cast<Context*>(context);
    if (!ctx) return kSuccess;
    if (ctx->chained) {
      if (const auto* p = static_cast<const PluginV1*>(chain_.plugin[ctx->version])) p->finalize(ctx->chained);
    }
    delete ctx;
    return kSuccess;
  }

  // A collective or send/recv begins (type kColl/kP2p), a child of one begins (kernel channel or
  // proxy op), or another event we only pass on.
  Event* Start(Context* ctx, uint64_t type, void* parent, int rank, const CallInfo* call, int child_pid) {
    std::lock_guard<std::mutex> lock(mu_);
    Event* e = NewEvent();
    e->version = ctx->version;
    if (call && call->op != Op::kNone && Open(rank)) {
      Comm* comm = ctx->comm ? ctx->comm : CommOf(call->comm_hash);
      uint64_t seq;
      if (call->op == Op::kSend || call->op == Op::kRecv)
        seq = ++comm->p2p_seq[static_cast<uint64_t>(call->op) << 32 | static_cast<uint32_t>(call->peer)];
      else
        seq = ++comm->seq;
      char site[48];
      if (call->algo && call->proto)
        std::snprintf(site, sizeof site, "nccl%s %s/%s", call->func, call->algo, call->proto);
      else
        std::snprintf(site, sizeof site, "nccl%s", call->func);
      e->kind = Kind::kCall;
      e->comm = comm;
      e->record = api_.begin(static_cast<int>(call->op) | kAsync, static_cast<int>(call->dtype), 0, seq, call->count,
                             call->count * DTypeBytes(call->dtype), call->peer, comm->id, site);
      comm->open.push_back(e);
    } else if ((type == kKernelCh || type == kProxyOp) && parent && child_pid == ::getpid()) {
      auto* owner = static_cast<Event*>(parent);
      if (owner->kind == Kind::kCall && owner->record) {
        e->kind = Kind::kChild;
        e->call = owner;
        ++owner->children;
        owner->child_seen = true;
        // A kernel of this communicator started: every call it enqueued before has finished.
        if (type == kKernelCh && owner->comm) {
          auto& open = owner->comm->open;
          while (!open.empty() && open.front() != owner) {
            Event* done = open.front();
            open.pop_front();
            End(done);
          }
        }
      }
    }
    return e;
  }

  void Stop(Event* e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (e->kind == Kind::kCall) {
      e->stopped = true;
      // v1/v2: enqueued is all NCCL says of it.
      if (e->version <= 2) End(e);
      MaybeComplete(e);
    } else if (e->kind == Kind::kChild && e->call) {
      Event* call = e->call;
      e->call = nullptr;
      if (call->children > 0) --call->children;
      MaybeComplete(call);
    }
  }

  const Chain& chain() const { return chain_; }
  bool chaining() const { return chain_.lib != nullptr; }

  Event* NewEventLocked() {
    std::lock_guard<std::mutex> lock(mu_);
    return NewEvent();
  }

 private:
  static constexpr size_t kEvents = 1 << 16;

  Event* NewEvent() {
    Event* e = &events_[next_event_++ % kEvents];
    // A handle NCCL still held this long ago is reused: end its record first rather than lose it.
    if (e->kind == Kind::kCall && e->record) End(e);
    *e = Event{};
    return e;
  }

  Comm* CommOf(uint64_t hash) {
    auto& c = comms_[hash];
    if (!c) {
      c = std::make_unique<Comm>();
      c->id = CommId(hash);
    }
    return c.get();
  }

  // Opens the trace at the first call: the rank from the launcher, else the communicator's rank.
  bool Open(int descr_rank) {
    if (!wanted_ || failed_) return false;
    if (opened_) return true;
    int rank = EnvInt({"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"});
    if (rank < 0) rank = rank_ >= 0 ? rank_ : descr_rank;
    int size = EnvInt({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
    if (size <= 0) size = n_ranks_ > 0 ? n_ranks_ : 1;
    int local = EnvInt({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
    std::string path;
    if (const char* f = std::getenv("DSDOCTOR_TRACE_FILE"); f && *f)
      path = f;
    else
      path = std::string(std::getenv("DSDOCTOR_TRACE_DIR")) + "/rank-" + std::to_string(rank) + ".trace";
    // Another writer of this process (the bundled runtime, the PMPI tracer) already keeps this
    // trace: opening it again would truncate the file under its mapping. Its records stand.
    if (!api_.python && WrittenByThisProcess(path)) {
      failed_ = true;
      return false;
    }
    if (api_.open(path.c_str(), rank, size, local < 0 ? 0 : local, "nccl", 0) != 0) {
      std::fprintf(stderr, "dsdoctor: NCCL profiler plugin disabled: %s\n", api_.error());
      failed_ = true;
      return false;
    }
    opened_ = true;
    return true;
  }

  // The trace header's magic and pid (docs/trace.md: pid at offset 36) name this process.
  static bool WrittenByThisProcess(const std::string& path) {
    char head[40] = {};
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    size_t n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    int32_t pid = 0;
    std::memcpy(&pid, head + 36, sizeof pid);
    return n == sizeof head && std::memcmp(head, "DSDTRACE", 8) == 0 && pid == ::getpid();
  }

  void End(Event* e) {
    if (e->record) api_.end(e->record, 1, nullptr);
    e->record = 0;
    if (e->comm) {
      auto& open = e->comm->open;
      for (auto it = open.begin(); it != open.end(); ++it)
        if (*it == e) {
          open.erase(it);
          break;
        }
    }
  }

  void MaybeComplete(Event* call) {
    if (call->record && call->stopped && call->child_seen && call->children == 0) End(call);
  }

  void ChainInit(Context* ctx, int version, int* mask, const char* name, uint64_t hash, int n_nodes, int n_ranks,
                 int rank, Logger log, uint64_t id_v5);

  bool wanted_ = false;
  bool opened_ = false, failed_ = false;
  int rank_ = -1, n_ranks_ = 0;
  TraceApi api_;
  std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<Comm>> comms_;
  std::unique_ptr<Event[]> events_{new Event[kEvents]};
  size_t next_event_ = 0;
  Chain chain_;
  std::once_flag chain_once_;
};

Profiler& P() {
  static Profiler* p = new Profiler;  // leaked: NCCL's proxy threads may call during exit
  return *p;
}

// Loads DSDOCTOR_NCCL_PROFILER_CHAIN as NCCL would (the name as given, else
// libnccl-profiler-<name>.so), once, and initialises it for this communicator.
void Profiler::ChainInit(Context* ctx, int version, int* mask, const char* name, uint64_t hash, int n_nodes,
                         int n_ranks, int rank, Logger log, uint64_t id_v5) {
  std::call_once(chain_once_, [this] {
    const char* want = std::getenv("DSDOCTOR_NCCL_PROFILER_CHAIN");
    if (!want || !*want) return;
    void* lib = ::dlopen(want, RTLD_NOW | RTLD_LOCAL);
    if (!lib && !std::strchr(want, '/'))
      lib = ::dlopen(("libnccl-profiler-" + std::string(want) + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      std::fprintf(stderr, "dsdoctor: NCCL profiler plugin: cannot load %s to chain to it: %s\n", want, ::dlerror());
      return;
    }
    chain_.lib = lib;
    for (int v = 1; v <= 6; ++v) chain_.plugin[v] = ::dlsym(lib, ("ncclProfiler_v" + std::to_string(v)).c_str());
  });
  if (!chain_.lib) return;
  const void* p = chain_.plugin[version];
  if (!p) {
    static std::once_flag warned;
    std::call_once(warned, [version] {
      std::fprintf(stderr, "dsdoctor: NCCL profiler plugin: the chained plugin has no ncclProfiler_v%d; not chained\n",
                   version);
    });
    return;
  }
  int theirs = 0;
  Result r = kSuccess;
  if (version <= 3)
    r = static_cast<const PluginV1*>(p)->init(&ctx->chained, &theirs);
  else if (version == 4)
    r = static_cast<const PluginV4*>(p)->init(&ctx->chained, &theirs, name, hash, n_nodes, n_ranks, rank, log);
  else
    r = static_cast<const PluginV5*>(p)->init(&ctx->chained, id_v5, &theirs, name, n_nodes, n_ranks, rank, log);
  if (r != kSuccess) {
    ctx->chained = nullptr;
    return;
  }
  ctx->chained_mask = theirs;
  if (mask) *mask |= theirs;
}

// ---- per-version entry points ----

// What the descriptor of version V says of a call (nullptr: not a collective or send/recv).
template <class D>
bool Describe(const D& d, uint64_t type, CallInfo* c);

template <>
bool Describe(const DescrV1& d, uint64_t type, CallInfo* c) {
  if (type == kColl) {
    c->func = FuncNameV1(d.coll.func);
    c->op = OpOf(c->func);
    c->dtype = DTypeOfV1(d.coll.datatype);
    c->count = d.coll.count;
    c->comm_hash = d.coll.comm_hash;
    if (c->op == Op::kBroadcast || c->op == Op::kReduce) c->peer = d.coll.root;
    return true;
  }
  if (type == kP2p) {
    c->func = FuncNameV1(d.p2p.func);
    c->op = OpOf(c->func);
    c->dtype = DTypeOfV1(d.p2p.datatype);
    c->count = d.p2p.count;
    c->peer = d.p2p.peer;
    c->comm_hash = d.p2p.comm_hash;
    return true;
  }
  return false;
}

template <class D>
bool DescribeStrings(const D& d, uint64_t type, CallInfo* c, uint64_t comm_hash) {
  if (type == kColl) {
    c->func = d.coll.func ? d.coll.func : "";
    c->op = OpOf(c->func);
    c->dtype = DTypeOf(d.coll.datatype ? d.coll.datatype : "");
    c->count = d.coll.count;
    c->algo = d.coll.algo;
    c->proto = d.coll.proto;
    if (c->op == Op::kBroadcast || c->op == Op::kReduce || c->op == Op::kGather || c->op == Op::kScatter)
      c->peer = d.coll.root;
    c->comm_hash = comm_hash;
    return true;
  }
  if (type == kP2p) {
    c->func = d.p2p.func ? d.p2p.func : "";
    c->op = OpOf(c->func);
    c->dtype = DTypeOf(d.p2p.datatype ? d.p2p.datatype : "");
    c->count = d.p2p.count;
    c->peer = d.p2p.peer;
    c->comm_hash = comm_hash;
    return true;
  }
  return false;
}
template <>
bool Describe(const DescrV2& d, uint64_t type, CallInfo* c) {
  return DescribeStrings(d, type, c, type == kColl ? d.coll.comm_hash : d.p2p.comm_hash);
}
template <>
bool Describe(const DescrV3& d, uint64_t type, CallInfo* c) {
  return DescribeStrings(d, type, c, type == kColl ? d.coll.comm_hash : d.p2p.comm_hash);
}
template <>
bool Describe(const DescrV4& d, uint64_t type, CallInfo* c) {
  return DescribeStrings(d, type, c, 0);
}
template <>
bool Describe(const DescrV5& d, uint64_t type, CallInfo* c) {
  return DescribeStrings(d, type, c, 0);
}

template <class D>
int ChildPid(const D& d, uint64_t type) {
  return type == kProxyOp ? d.proxy_op.pid : ::getpid();  // kernel channels are this process's
}

template <int V, class D, class Args>
struct Entry {
  static Result Start(void* context, void** handle, D* descr) {
    *handle = nullptr;
    auto* ctx = static_cast<Context*>(context);
    if (!ctx || !descr) return kSuccess;
    Profiler& p = P();
    const uint64_t type = descr->type;
    CallInfo call;
    Event* e = nullptr;
    bool ours = (type & static_cast<uint64_t>(p.Mask(V))) != 0 || type == kColl || type == kP2p;
    if (ours) {
      bool is_call = Describe(*descr, type, &call);
      e = p.Start(ctx, type, descr->parent, descr->rank, is_call ? &call : nullptr, ChildPid(*descr, type));
    }
    if (ctx->chained) {
      const auto* plugin = static_cast<const Plugin<D, Args, void*>*>(p.chain().plugin[V]);
      if (!e) e = p.NewEventLocked();
      D copy = *descr;
      auto* parent = static_cast<Event*>(descr->parent);
      // A parent is one of our handles, unless a proxy op of another process (PXN) posted it.
      copy.parent = parent && ChildPid(*descr, type) == ::getpid() ? parent->chained : nullptr;
      plugin->start_event(ctx->chained, &e->chained, &copy);
    }
    *handle = e;
    return kSuccess;
  }

  static Result Stop(void* handle) {
    auto* e = static_cast<Event*>(handle);
    if (!e) return kSuccess;
    Profiler& p = P();
    void* chained = e->chained;
    p.Stop(e);
    if (chained) {
      if (const auto* plugin = static_cast<const Plugin<D, Args, void*>*>(p.chain().plugin[V]))
        plugin->stop_event(chained);
    }
    return kSuccess;
  }

  static Result Record(void* handle, int state, Args* args) {
    auto* e = static_cast<Event*>(handle);
    if (!e || !e->chained) return kSuccess;
    if (const auto* plugin = static_cast<const Plugin<D, Args, void*>*>(P().chain().plugin[V]))
      plugin->record_event_state(e->chained, state, args);
    return kSuccess;
  }

  static Result Finalize(void* context) { return P().Finalize(context); }
};

Result InitV1to3(int version, void** context, int* mask) {
  return P().Init(version, context, mask, nullptr, 0, 0, 0, -1, nullptr, 0);
}

}  // namespace

extern "C" {

// Non-const globals with C linkage: NCCL dlsyms them as data (a const one would not be exported).
PluginV1 ncclProfiler_v1 = {"dsdoctor",
                            [](void** c, int* m) { return InitV1to3(1, c, m); },
                            Entry<1, DescrV1, StateArgsV1>::Start,
                            Entry<1, DescrV1, StateArgsV1>::Stop,
                            Entry<1, DescrV1, StateArgsV1>::Record,
                            Entry<1, DescrV1, StateArgsV1>::Finalize};
PluginV2 ncclProfiler_v2 = {"dsdoctor",
                            [](void** c, int* m) { return InitV1to3(2, c, m); },
                            Entry<2, DescrV2, StateArgsV1>::Start,
                            Entry<2, DescrV2, StateArgsV1>::Stop,
                            Entry<2, DescrV2, StateArgsV1>::Record,
                            Entry<2, DescrV2, StateArgsV1>::Finalize};
PluginV3 ncclProfiler_v3 = {"dsdoctor",
                            [](void** c, int* m) { return InitV1to3(3, c, m); },
                            Entry<3, DescrV3, StateArgsV1>::Start,
                            Entry<3, DescrV3, StateArgsV1>::Stop,
                            Entry<3, DescrV3, StateArgsV1>::Record,
                            Entry<3, DescrV3, StateArgsV1>::Finalize};
PluginV4 ncclProfiler_v4 = {"dsdoctor",
                            [](void** c, int* m, const char* name, uint64_t hash, int nodes, int nranks, int rank,
                               Logger log) { return P().Init(4, c, m, name, hash, nodes, nranks, rank, log, 0); },
                            Entry<4, DescrV4, StateArgsV4>::Start,
                            Entry<4, DescrV4, StateArgsV4>::Stop,
                            Entry<4, DescrV4, StateArgsV4>::Record,
                            Entry<4, DescrV4, StateArgsV4>::Finalize};
PluginV5 ncclProfiler_v5 = {"dsdoctor",
                            [](void** c, uint64_t id, int* m, const char* name, int nodes, int nranks, int rank,
                               Logger log) { return P().Init(5, c, m, name, id, nodes, nranks, rank, log, id); },
                            Entry<5, DescrV5, StateArgsV4>::Start,
                            Entry<5, DescrV5, StateArgsV4>::Stop,
                            Entry<5, DescrV5, StateArgsV4>::Record,
                            Entry<5, DescrV5, StateArgsV4>::Finalize};
PluginV5 ncclProfiler_v6 = {"dsdoctor",
                            [](void** c, uint64_t id, int* m, const char* name, int nodes, int nranks, int rank,
                               Logger log) { return P().Init(6, c, m, name, id, nodes, nranks, rank, log, id); },
                            Entry<6, DescrV5, StateArgsV4>::Start,
                            Entry<6, DescrV5, StateArgsV4>::Stop,
                            Entry<6, DescrV5, StateArgsV4>::Record,
                            Entry<6, DescrV5, StateArgsV4>::Finalize};

}  // extern "C"
