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
//   and gets the events it asked for (and their parents), with its own handles, context and mask
//   word, as if NCCL had loaded it.
// - When the Python tracer's library is in the process (DSDOCTOR_TRACER_LIB), records go through it:
//   one writer per trace file.
//
// Thread-safety: NCCL calls from the enqueueing threads, CUDA's host-callback thread and its proxy
// threads; one mutex orders the plugin's state.
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/trace_c_api.h"
#include "runtime/types.h"
#include "tracers/launcher_env.h"
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

enum class Kind : uint8_t { kOther, kGroup, kCall, kChild };

// What a handle given to NCCL stands for. NCCL keeps using a collective's handle for its kernel
// events after stopping it, so a call's event lives until it is stopped, ended and childless, then
// waits in a quarantine of 4,096 before it is reused; other events are released at their stop.
struct Event {
  Kind kind = Kind::kOther;
  int version = 0;        // of the plugin NCCL loaded
  uint64_t record = 0;    // trace handle of a call (0: ended or untraced)
  uint64_t plan = 0;      // a call's kernel plan (NCCL's Group event), or a Group event's own number
  Event* call = nullptr;  // a child's collective or send/recv
  struct Comm* comm = nullptr;
  int children = 0;       // kernel channels running
  int channels = 0;       // channels NCCL says the call uses (v4 on; 0: unknown)
  int channels_done = 0;  // kernel channels that stopped
  bool child_seen = false;
  bool stopped = false;  // NCCL stopped the event (a call's: it is enqueued)
  bool released = false;
  void* chained = nullptr;
  int chained_version = 0;  // the chained plugin's struct version that got it
};

struct Comm {
  uint32_t id = 0;
  uint64_t seq = 0;
  std::map<uint64_t, uint64_t> p2p_seq;  // (op << 32 | peer) -> sends/recvs begun
  std::deque<Event*> open;               // calls begun and not yet completed, in enqueue order
};

struct Context {
  int version = 0;
  Comm* comm = nullptr;     // v4 on; v1-v3 name the communicator in each descriptor
  std::vector<Comm*> seen;  // the communicators of its calls (v1-v3: as descriptors named them)
  void* chained = nullptr;
  int chained_version = 0;  // the version of the chained plugin's struct in use (v5 for v6)
};

// The plugin we chain to, by the versions it exports.
struct Chain {
  void* lib = nullptr;
  const void* plugin[7] = {};
  int mask = 0;  // its activation mask: its own int (it may keep the pointer and write it later)
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
// Bytes per element: the trace's sizes; the types it has no name for are NCCL's fp8 ones (1 byte).
size_t DTypeBytes(DType t) {
  size_t n = dsd::runtime::DTypeSize(t);
  return n ? n : 1;
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

// Appends C strings into a fixed buffer, always NUL-terminated, cut where it is full (as snprintf
// would cut "%s%s…"). A null string appends "(null)", as glibc's snprintf did for it.
class SiteText {
 public:
  SiteText(char* buf, size_t cap) : buf_(buf), cap_(cap) { buf_[0] = '\0'; }
  SiteText& Add(const char* s) {
    if (!s) s = "(null)";
    while (*s && n_ + 1 < cap_) buf_[n_++] = *s++;
    buf_[n_] = '\0';
    return *this;
  }

 private:
  char* buf_;
  size_t cap_;
  size_t n_ = 0;
};

class Profiler {
 public:
  Profiler() : wanted_(dsd::tracers::TraceRequested()) {}

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
      ctx->seen.push_back(ctx->comm);
      if (rank_ < 0) rank_ = rank, n_ranks_ = n_ranks;
    }
    ChainInit(ctx.get(), version, name, hash, n_nodes, n_ranks, rank, log, id_v5);
    if (mask) *mask |= Mask(version) | chain_.mask;
    *context = ctx.release();
    return kSuccess;
  }

  Result Finalize(void* context) {
    auto* ctx = static_cast<Context*>(context);
    if (!ctx) return kSuccess;
    if (ctx->chained) {
      if (const auto* p = static_cast<const PluginV1*>(chain_.plugin[ctx->chained_version])) p->finalize(ctx->chained);
    }
    {
      // The communicator is destroyed: NCCL finished (or aborted) what it had enqueued.
      std::lock_guard<std::mutex> lock(mu_);
      for (Comm* c : ctx->seen)
        while (!c->open.empty()) End(c->open.front());
    }
    delete ctx;
    return kSuccess;
  }

  // An event starts: a Group (a kernel plan), a collective or send/recv (`call`), a kernel channel
  // of one, or another we only pass on. nullptr: not tracked (NCCL accepts null handles).
  Event* Start(Context* ctx, uint64_t type, void* parent, int rank, const CallInfo* call, uint64_t plan_parent,
               int channels) {
    std::lock_guard<std::mutex> lock(mu_);
    Event* e = nullptr;
    if (type == kGroup) {
      if ((e = NewEvent())) {
        e->kind = Kind::kGroup;
        e->plan = ++plans_;
      }
    } else if (call && call->op != Op::kNone && Open(rank)) {
      if (!(e = NewEvent())) return nullptr;
      Comm* comm = ctx->comm;
      if (!comm) {
        comm = CommOf(call->comm_hash);
        if (std::find(ctx->seen.begin(), ctx->seen.end(), comm) == ctx->seen.end()) ctx->seen.push_back(comm);
      }
      uint64_t seq;
      if (call->op == Op::kSend || call->op == Op::kRecv)
        seq = ++comm->p2p_seq[static_cast<uint64_t>(call->op) << 32 | static_cast<uint32_t>(call->peer)];
      else
        seq = ++comm->seq;
      // "ncclAllReduce Ring/Simple", cut at the field's 47 bytes; built by hand, since snprintf was a
      // quarter of the plugin's cost per call.
      char site[48];
      SiteText text(site, sizeof site);
      text.Add("nccl").Add(call->func);
      if (call->algo && call->proto) text.Add(" ").Add(call->algo).Add("/").Add(call->proto);
      e->kind = Kind::kCall;
      e->comm = comm;
      e->channels = channels;
      auto* group = static_cast<Event*>(reinterpret_cast<void*>(plan_parent));
      e->plan = group && group->kind == Kind::kGroup ? group->plan : 0;
      e->record = api_.begin(static_cast<int>(call->op) | kAsync, static_cast<int>(call->dtype), 0, seq, call->count,
                             call->count * DTypeBytes(call->dtype), call->peer, comm->id, site);
      comm->open.push_back(e);
    } else if (type == kKernelCh && parent) {
      auto* owner = static_cast<Event*>(parent);
      if (owner->kind == Kind::kCall && !owner->released && (e = NewEvent())) {
        e->kind = Kind::kChild;
        e->call = owner;
        ++owner->children;
        owner->child_seen = true;
        // A kernel of this communicator started: the calls of earlier plans have finished (one
        // stream, in order). Calls of its own plan (grouped sends and receives) run beside it.
        if (owner->comm && owner->plan) {
          auto& open = owner->comm->open;
          while (!open.empty() && open.front() != owner && open.front()->plan && open.front()->plan < owner->plan)
            End(open.front());
        }
      }
    }
    if (!e && ctx->chained) e = NewEvent();  // a handle to carry the chained plugin's
    if (e) e->version = ctx->version;
    return e;
  }

  // NCCL stopped the event.
  void Stop(Event* e) {
    std::lock_guard<std::mutex> lock(mu_);
    e->stopped = true;
    if (e->kind == Kind::kCall) {
      // v1/v2: enqueued is all NCCL says of it.
      if (e->version <= 2) End(e);
      MaybeComplete(e);
      MaybeRelease(e);
    } else if (e->kind == Kind::kChild) {
      Event* call = e->call;
      e->call = nullptr;
      if (call && !call->released) {
        if (call->children > 0) --call->children;
        ++call->channels_done;
        MaybeComplete(call);
        MaybeRelease(call);
      }
      Release(e);
    } else {
      Release(e);
    }
  }

  const Chain& chain() const { return chain_; }

 private:
  static constexpr size_t kMaxEvents = 1 << 20;  // live handles at most (64 MiB); more go untracked
  static constexpr size_t kQuarantine = 4096;

  Event* NewEvent() {
    Event* e;
    if (!free_.empty()) {
      e = free_.back();
      free_.pop_back();
    } else if (owned_.size() < kMaxEvents) {
      owned_.push_back(std::make_unique<Event>());
      e = owned_.back().get();
    } else {
      return nullptr;
    }
    *e = Event{};
    return e;
  }

  // Back to the pool through the quarantine: a late event of NCCL's still naming it finds it inert.
  void Release(Event* e) {
    if (e->released) return;
    e->released = true;
    quarantine_.push_back(e);
    if (quarantine_.size() > kQuarantine) {
      free_.push_back(quarantine_.front());
      quarantine_.pop_front();
    }
  }

  void MaybeRelease(Event* call) {
    if (call->stopped && !call->record && call->children == 0) Release(call);
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
    api_.UsePythonTracerIfLoaded();  // loaded at start-up by sitecustomize, long before NCCL's first call
    int rank = dsd::tracers::LauncherInt({"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"});
    if (rank < 0) rank = rank_ >= 0 ? rank_ : descr_rank;
    int size = dsd::tracers::LauncherInt({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
    if (size <= 0) size = n_ranks_ > 0 ? n_ranks_ : 1;
    int local =
        dsd::tracers::LauncherInt({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
    std::string path = dsd::tracers::TracePathFor(rank);
    // Another writer of this process (the bundled runtime, the PMPI tracer) keeps this trace:
    // opening it again would truncate the file under its mapping. Its records stand.
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

  // The trace header (docs/trace.md) names this process (pid at 36) and its heartbeat (at 136,
  // refreshed every 100 ms by a live writer) is fresh: a file left by an earlier process with the
  // same pid (containers) is not one.
  static bool WrittenByThisProcess(const std::string& path) {
    char head[144] = {};
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    size_t n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    int32_t pid = 0;
    int64_t heartbeat = 0;
    std::memcpy(&pid, head + 36, sizeof pid);
    std::memcpy(&heartbeat, head + 136, sizeof heartbeat);
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    const int64_t now_ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
    return n == sizeof head && std::memcmp(head, "DSDTRACE", 8) == 0 && pid == ::getpid() &&
           now_ns - heartbeat < 2000000000;
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
    MaybeRelease(e);
  }

  // Done when NCCL stopped it and its kernel's channels ended: all of those NCCL said it uses (v4
  // on), else every one that started.
  void MaybeComplete(Event* call) {
    if (!call->record || !call->stopped || !call->child_seen || call->children > 0) return;
    if (call->channels > 0 && call->channels_done < call->channels) return;
    End(call);
  }

  void ChainInit(Context* ctx, int version, const char* name, uint64_t hash, int n_nodes, int n_ranks, int rank,
                 Logger log, uint64_t id_v5);

  bool wanted_ = false;
  bool opened_ = false, failed_ = false;
  int rank_ = -1, n_ranks_ = 0;
  TraceApi api_;
  std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<Comm>> comms_;
  // Every handle ever made (the pool owns them: NCCL may hold one for good, e.g. a kernel that never
  // ends); free_ and quarantine_ point into it.
  std::vector<std::unique_ptr<Event>> owned_;
  std::vector<Event*> free_;
  std::deque<Event*> quarantine_;
  uint64_t plans_ = 0;
  Chain chain_;
  std::once_flag chain_once_;
};

Profiler& P() {
  static Profiler* p = new Profiler;  // leaked: NCCL's proxy threads may call during exit
  return *p;
}

// Loads DSDOCTOR_NCCL_PROFILER_CHAIN as NCCL would (the name as given, else
// libnccl-profiler-<name>.so), once, and initialises it for this communicator. A leading '?' marks
// a plugin that may not exist (NCCL's default libnccl-profiler.so): then nothing is said.
void Profiler::ChainInit(Context* ctx, int version, const char* name, uint64_t hash, int n_nodes, int n_ranks, int rank,
                         Logger log, uint64_t id_v5) {
  std::call_once(chain_once_, [this] {
    const char* want = std::getenv("DSDOCTOR_NCCL_PROFILER_CHAIN");
    if (!want || !*want) return;
    const bool optional = want[0] == '?';
    if (optional) ++want;
    void* lib = ::dlopen(want, RTLD_NOW | RTLD_LOCAL);
    if (!lib && !std::strchr(want, '/'))
      lib = ::dlopen(("libnccl-profiler-" + std::string(want) + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      if (!optional)
        std::fprintf(stderr, "dsdoctor: NCCL profiler plugin: cannot load %s to chain to it: %s\n", want, ::dlerror());
      return;
    }
    chain_.lib = lib;
    for (int v = 1; v <= 6; ++v) chain_.plugin[v] = ::dlsym(lib, ("ncclProfiler_v" + std::to_string(v)).c_str());
  });
  if (!chain_.lib) return;
  // v6 and v5 share their layout: a v5 plugin gets everything but the copy-engine events, as NCCL
  // 2.29 would give it. Other versions need NCCL's own adapters: not chained.
  int use = chain_.plugin[version] ? version : version == 6 && chain_.plugin[5] ? 5 : 0;
  if (!use) {
    static std::once_flag warned;
    std::call_once(warned, [version] {
      std::fprintf(stderr, "dsdoctor: NCCL profiler plugin: the chained plugin has no ncclProfiler_v%d; not chained\n",
                   version);
    });
    return;
  }
  const void* p = chain_.plugin[use];
  Result r = kSuccess;
  if (use <= 3)
    r = static_cast<const PluginV1*>(p)->init(&ctx->chained, &chain_.mask);
  else if (use == 4)
    r = static_cast<const PluginV4*>(p)->init(&ctx->chained, &chain_.mask, name, hash, n_nodes, n_ranks, rank, log);
  else
    r = static_cast<const PluginV5*>(p)->init(&ctx->chained, id_v5, &chain_.mask, name, n_nodes, n_ranks, rank, log);
  if (r != kSuccess) {
    ctx->chained = nullptr;
    return;
  }
  ctx->chained_version = use;
  if (use == 5) chain_.mask &= ~static_cast<int>(kCeColl | kCeSync | kCeBatch);
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

// The kernel plan (NCCL's Group event) a call belongs to, and the channels it uses (v4 on).
template <class D>
void* PlanOf(const D& d) {
  if constexpr (std::is_same_v<D, DescrV5>)
    return d.type == kColl ? d.coll.parent_group : d.p2p.parent_group;
  else
    return d.parent;
}
template <class D>
int ChannelsOf(const D& d) {
  if constexpr (std::is_same_v<D, DescrV4> || std::is_same_v<D, DescrV5>)
    return d.type == kColl ? d.coll.n_channels : d.p2p.n_channels;
  else
    return 0;
}

// The events a plugin that asked for `mask` gets from NCCL: those and their parents.
int Implied(int mask) {
  uint64_t m = static_cast<uint32_t>(mask);
  if (m & kNetPlugin) m |= kProxyStep;
  if (m & kProxyStep) m |= kProxyOp;
  if (m & (kProxyOp | kKernelCh)) m |= kColl | kP2p;
  if (m & kColl) m |= kCollApi | kGroup;
  if (m & kP2p) m |= kP2pApi | kGroup;
  if (m & (kCollApi | kP2pApi | kKernelLaunch)) m |= kGroupApi;
  return static_cast<int>(m);
}

template <int V, class D, class Args>
struct Entry {
  using Chained = Plugin<D, Args, void*>;

  static Result Start(void* context, void** handle, D* descr) {
    if (!handle) return kSuccess;
    *handle = nullptr;
    auto* ctx = static_cast<Context*>(context);
    if (!ctx || !descr) return kSuccess;
    Profiler& p = P();
    if (p.Mask(V) == 0 && !ctx->chained) return kSuccess;
    const uint64_t type = descr->type;
    CallInfo call;
    const bool is_call = (type == kColl || type == kP2p) && Describe(*descr, type, &call);
    // A proxy op posted by another process (PXN) names a parent that is not ours.
    const bool own_parent = type != kProxyOp || descr->proxy_op.pid == ::getpid();
    Event* e = p.Start(ctx, type, own_parent ? descr->parent : nullptr, descr->rank, is_call ? &call : nullptr,
                       is_call ? reinterpret_cast<uint64_t>(PlanOf(*descr)) : 0, is_call ? ChannelsOf(*descr) : 0);
    if (e && ctx->chained && (static_cast<uint64_t>(Implied(p.chain().mask)) & type)) {
      // Its own handles: every parent is translated to the chained plugin's handle of it.
      auto theirs = [&](void* ours) { return ours ? static_cast<Event*>(ours)->chained : nullptr; };
      D copy = *descr;
      copy.parent = own_parent ? theirs(descr->parent) : nullptr;
      if constexpr (std::is_same_v<D, DescrV5>) {
        if (type == kColl) copy.coll.parent_group = theirs(descr->coll.parent_group);
        if (type == kP2p) copy.p2p.parent_group = theirs(descr->p2p.parent_group);
      }
      const auto* plugin = static_cast<const Chained*>(p.chain().plugin[ctx->chained_version]);
      plugin->start_event(ctx->chained, &e->chained, &copy);
      e->chained_version = ctx->chained_version;
    }
    *handle = e;
    return kSuccess;
  }

  static Result Stop(void* handle) {
    auto* e = static_cast<Event*>(handle);
    if (!e) return kSuccess;
    Profiler& p = P();
    void* chained = e->chained;
    const int version = e->chained_version;
    p.Stop(e);
    if (chained) {
      if (const auto* plugin = static_cast<const Chained*>(p.chain().plugin[version])) plugin->stop_event(chained);
    }
    return kSuccess;
  }

  static Result Record(void* handle, int state, Args* args) {
    auto* e = static_cast<Event*>(handle);
    if (!e || !e->chained) return kSuccess;
    if (const auto* plugin = static_cast<const Chained*>(P().chain().plugin[e->chained_version]))
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
