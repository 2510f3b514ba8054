// libdsdoctor-pmpi.so: traces an unmodified MPI program through MPI's profiling interface (PMPI).
// Loaded with LD_PRELOAD (by hand under mpirun: docs/trace.md, "Producers"), its
// MPI_* functions come before the MPI library's; each records the call into the rank's trace ring
// through the C ABI (runtime/trace_c_api.h) and calls the library's PMPI_* twin. The diagnosis
// engine, `analyze` and the TUI read these ranks like any other.
//
// - The trace opens at MPI_Init when DSDOCTOR_TRACE_FILE or DSDOCTOR_TRACE_DIR is set (otherwise
//   every wrapper is a plain forward). The rank comes from the launcher's environment (mpirun,
//   PMIx, PMI, Slurm) before MPI_Init, so a rank stuck in MPI_Init shows a rendezvous in flight;
//   without one it opens after MPI_Init from MPI_COMM_WORLD.
// - Collectives (blocking and non-blocking) carry the communicator's id and a per-communicator
//   sequence number; roots and peers are MPI_COMM_WORLD ranks. Communicator ids are the same on
//   every member: a hash of the members' world ranks and of how many communicators with those
//   members this process made before (communicators are made collectively, in the same order).
// - Non-blocking calls are async records; MPI_Wait* marks them waited while it blocks and ends them
//   when their requests complete; MPI_Test* ends the ones that completed.
// - A call made inside a traced call (an MPI library that calls MPI_* itself) belongs to that one.
//
// Thread-safety: every entry point may be called from any thread (MPI_THREAD_MULTIPLE); one mutex
// guards the tables, and the trace's C ABI orders its own writes. Below MPI_THREAD_MULTIPLE the
// program makes one MPI call at a time (MPI's own rule), so the mutex is skipped: it was a sixth of
// a traced call's cost.
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/trace_c_api.h"
#include "runtime/types.h"
#include "tracers/flat_map.h"
#include "tracers/launcher_env.h"

namespace {

using dsd::runtime::DType;
using dsd::runtime::Op;
using dsd::runtime::ReduceOp;

constexpr int kAsync = 0x100;  // dsd_trace_begin: `op | 0x100` marks an asynchronous call

struct Comm {
  uint32_t id = 0;
  uint64_t seq = 0;                                      // collectives begun on it
  std::vector<int> world;                                // comm rank -> world rank; empty: MPI_COMM_WORLD
  dsd::tracers::FlatMap<uint64_t, uint64_t> p2p_seq{0};  // (op << 32 | world peer) -> sends/recvs begun
};

// What one call is, as the trace records it.
struct Call {
  Op op = Op::kNone;
  MPI_Datatype dtype = MPI_DATATYPE_NULL;
  uint64_t count = 0;
  MPI_Op reduce = MPI_OP_NULL;
  int root = -1;  // comm rank of the root, or peer of a send/recv (MPI_ANY_SOURCE: -1)
};

class Tracer {
 public:
  bool on() const { return on_; }

  // Before PMPI_Init: opens the trace when the launcher says which rank this is.
  void BeforeInit() {
    if (!dsd::tracers::TraceRequested()) return;
    int rank = dsd::tracers::LauncherInt({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"});
    int size = dsd::tracers::LauncherInt({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
    if (rank < 0 || size <= 0) return;
    Open(rank, size);
    if (on_) init_handle_ = dsd_trace_begin(static_cast<int>(Op::kRendezvous), 0, 0, 1, 0, 0, size, 0, "MPI_Init");
  }

  // After PMPI_Init: ends the rendezvous, or opens the trace now that MPI_COMM_WORLD says the rank.
  void AfterInit(int rc) {
    if (on_) {
      dsd_trace_end(init_handle_, rc == MPI_SUCCESS, rc == MPI_SUCCESS ? nullptr : ErrorText("MPI_Init", rc).c_str());
    } else if (rc == MPI_SUCCESS && dsd::tracers::TraceRequested()) {
      int rank = 0, size = 1;
      PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
      PMPI_Comm_size(MPI_COMM_WORLD, &size);
      Open(rank, size);
    }
    if (on_) dsd_trace_set_phase(static_cast<int>(dsd::runtime::Phase::kUser));
    int level = MPI_THREAD_MULTIPLE;
    if (rc == MPI_SUCCESS && PMPI_Query_thread(&level) == MPI_SUCCESS) multiple_ = level == MPI_THREAD_MULTIPLE;
    // Below MPI_THREAD_MULTIPLE MPI is called one call at a time, and so is the trace: its lock goes.
    if (on_ && !multiple_) dsd_trace_set_one_caller(1);
  }

  void Finalizing() {
    if (!on_) return;
    dsd_trace_set_phase(static_cast<int>(dsd::runtime::Phase::kFinished));
    dsd_trace_set_flags(1);  // kTraceFlagFinished: the rank ended its MPI work cleanly
  }

  void Aborting(MPI_Comm, int code) {
    if (!on_) return;
    dsd_trace_set_error(("MPI_Abort called with error code " + std::to_string(code)).c_str());
  }

  // Records a call as begun; returns its handle (0: not traced).
  uint64_t Begin(const char* name, MPI_Comm comm, const Call& call, bool async, const void* caller) {
    auto lock = Lock();
    Comm& c = CommOf(comm);
    uint64_t seq;
    int peer = call.root < 0 ? -1 : WorldRank(c, call.root);  // MPI_ROOT, MPI_PROC_NULL: -1
    if (call.op == Op::kSend || call.op == Op::kRecv)
      seq = ++c.p2p_seq.Get(static_cast<uint64_t>(call.op) << 32 | static_cast<uint32_t>(peer));
    else
      seq = ++c.seq;
    int size = 0;
    // At an intercommunicator's MPI_ROOT / MPI_PROC_NULL the buffers and types are not significant.
    const bool rootless =
        call.root == MPI_ROOT || (call.root == MPI_PROC_NULL && call.op != Op::kSend && call.op != Op::kRecv);
    if (call.dtype != MPI_DATATYPE_NULL && !rootless) PMPI_Type_size(call.dtype, &size);
    return dsd_trace_begin(static_cast<int>(call.op) | (async ? kAsync : 0), static_cast<int>(DTypeOf(call.dtype)),
                           static_cast<int>(ReduceOf(call.reduce)), seq, call.count,
                           call.count * static_cast<uint64_t>(size > 0 ? size : 0), peer, c.id,
                           Callsite(name, caller).c_str());
  }

  void End(uint64_t handle, const char* name, int rc) {
    if (!handle) return;
    if (rc == MPI_SUCCESS)
      dsd_trace_end(handle, 1, nullptr);
    else
      dsd_trace_end(handle, 0, ErrorText(name, rc).c_str());
  }

  // Requests of non-blocking calls.
  void Remember(MPI_Request request, uint64_t handle) {
    if (!handle) return;
    if (request == MPI_REQUEST_NULL) {  // nothing left to wait for: done already
      dsd_trace_end(handle, 1, nullptr);
      return;
    }
    auto lock = Lock();
    bool fresh = false;
    uint64_t& stored = requests_.Get(request, &fresh);
    // A handle MPI reused: the call it stood for completed where we did not see it (a wait we do
    // not wrap), so it ends here rather than staying in flight for good.
    if (!fresh) dsd_trace_end(stored, 1, nullptr);
    stored = handle;
  }
  uint64_t Lookup(MPI_Request request) {
    if (request == MPI_REQUEST_NULL) return 0;
    auto lock = Lock();
    const uint64_t* handle = requests_.Find(request);
    return handle ? *handle : 0;
  }
  // Forgets `request` if it still stands for `handle`: another thread may have been given the same
  // handle value for a new call since MPI freed it (MPI_THREAD_MULTIPLE).
  void Forget(MPI_Request request, uint64_t handle) {
    auto lock = Lock();
    const uint64_t* stored = requests_.Find(request);
    if (stored && *stored == handle) requests_.Erase(request);
  }

  // Communicators made by the program: registered at creation, so every member numbers them alike.
  void Made(MPI_Comm comm) {
    if (!on_ || comm == MPI_COMM_NULL) return;
    auto lock = Lock();
    comms_.erase(comm);  // a handle value freed where we did not see it (MPI_Comm_disconnect)
    last_comm_ = nullptr;
    CommOf(comm, /*made=*/true);
  }
  void Freed(MPI_Comm comm) {
    if (!on_) return;
    auto lock = Lock();
    comms_.erase(comm);
    last_comm_ = nullptr;
  }

  static std::string ErrorText(const char* name, int rc) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    if (PMPI_Error_string(rc, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "error %d", rc);
    return std::string(name) + ": " + text;
  }

 private:
  void Open(int rank, int size) {
    std::string path = dsd::tracers::TracePathFor(rank);
    if (path.empty()) return;
    int local = dsd::tracers::LauncherInt({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
    if (dsd_trace_open(path.c_str(), rank, size, local < 0 ? 0 : local, "mpi", 0) != 0) {
      std::fprintf(stderr, "dsdoctor: MPI tracer disabled: %s\n", dsd_trace_error());
      return;
    }
    on_ = true;
  }

  // The communicator's record, made on first sight. Caller holds mu_.
  // `made`: registered where it was created (collectively, in the same order on every member), so
  // the count of communicators made before with the same members is part of its id. Others (made
  // by a function not wrapped) are seen first at different calls on different ranks: their id is
  // their members' alone.
  Comm& CommOf(MPI_Comm comm, bool made = false) {
    // A loop calls on one communicator: the last one found is kept (map nodes stay put until erased).
    if (last_comm_ && last_comm_key_ == comm) return *last_comm_;
    auto it = comms_.find(comm);
    if (it != comms_.end()) {
      last_comm_key_ = comm;
      last_comm_ = &it->second;
      return it->second;
    }
    Comm& c = comms_[comm];
    if (comm == MPI_COMM_WORLD) return c;  // id 0, identity ranks
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    // Peers are named in the remote group of an intercommunicator; its id hashes both groups, in
    // world-rank order, so the two sides agree.
    c.world = Members(comm, inter != 0);
    std::vector<int> members = c.world;
    if (inter) {
      std::vector<int> local = Members(comm, false);
      members.insert(members.end(), local.begin(), local.end());
      std::sort(members.begin(), members.end());
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ULL; };
    mix(static_cast<uint64_t>(inter));
    for (int r : members) mix(static_cast<uint32_t>(r));
    mix(made ? made_[h]++ : 0xffffffffULL);
    c.id = static_cast<uint32_t>(h ^ (h >> 32));
    if (c.id == 0) c.id = 1;  // 0 is MPI_COMM_WORLD
    return c;
  }

  // World ranks of a communicator's (remote) group, by comm rank; MPI_UNDEFINED where none.
  static std::vector<int> Members(MPI_Comm comm, bool remote) {
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    if ((remote ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group)) != MPI_SUCCESS) return {};
    int n = 0;
    PMPI_Group_size(group, &n);
    std::vector<int> ranks(n), out(n, MPI_UNDEFINED);
    for (int i = 0; i < n; ++i) ranks[i] = i;
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_translate_ranks(group, n, ranks.data(), world, out.data());
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
    return out;
  }

  static int WorldRank(const Comm& c, int rank) {
    if (c.world.empty()) return rank;
    if (rank < 0 || rank >= static_cast<int>(c.world.size())) return -1;
    return c.world[rank] == MPI_UNDEFINED ? -1 : c.world[rank];
  }

  static DType DTypeOf(MPI_Datatype t) {
    if (t == MPI_DATATYPE_NULL) return DType::kNone;
    if (t == MPI_FLOAT) return DType::kFloat32;
    if (t == MPI_DOUBLE) return DType::kFloat64;
    if (t == MPI_INT || t == MPI_INT32_T || t == MPI_UNSIGNED || t == MPI_UINT32_T) return DType::kInt32;
    if (t == MPI_LONG || t == MPI_LONG_LONG || t == MPI_INT64_T || t == MPI_UNSIGNED_LONG || t == MPI_UINT64_T ||
        t == MPI_UNSIGNED_LONG_LONG)
      return DType::kInt64;
    if (t == MPI_BYTE || t == MPI_CHAR || t == MPI_UNSIGNED_CHAR || t == MPI_UINT8_T) return DType::kUint8;
    if (t == MPI_SIGNED_CHAR || t == MPI_INT8_T) return DType::kInt8;
    if (t == MPI_SHORT || t == MPI_INT16_T || t == MPI_UNSIGNED_SHORT || t == MPI_UINT16_T) return DType::kInt16;
    if (t == MPI_C_BOOL) return DType::kBool;
    if (t == MPI_C_FLOAT_COMPLEX) return DType::kComplex64;
    if (t == MPI_C_DOUBLE_COMPLEX) return DType::kComplex128;
    return DType::kOther;
  }

  static ReduceOp ReduceOf(MPI_Op o) {
    if (o == MPI_OP_NULL) return ReduceOp::kNone;
    if (o == MPI_SUM) return ReduceOp::kSum;
    if (o == MPI_MAX) return ReduceOp::kMax;
    if (o == MPI_MIN) return ReduceOp::kMin;
    if (o == MPI_PROD) return ReduceOp::kProduct;
    if (o == MPI_BAND) return ReduceOp::kBand;
    if (o == MPI_BOR) return ReduceOp::kBor;
    if (o == MPI_BXOR) return ReduceOp::kBxor;
    if (o == MPI_LAND) return ReduceOp::kLand;
    if (o == MPI_LOR) return ReduceOp::kLor;
    if (o == MPI_LXOR) return ReduceOp::kLxor;
    if (o == MPI_MAXLOC) return ReduceOp::kMaxloc;
    if (o == MPI_MINLOC) return ReduceOp::kMinloc;
    return ReduceOp::kOther;
  }

  // "MPI_Allreduce@prog+0x11a9": the MPI function and where the program called it, as a module
  // and an offset that `addr2line -e` resolves (or the nearest exported symbol). Cached per return
  // address: dladdr walks symbol tables. A loop's few call sites (an Irecv, an Isend, a Waitall)
  // are answered by a small direct-mapped cache in front of the map. Caller holds mu_.
  const std::string& Callsite(const char* name, const void* caller) {
    auto key = std::make_pair(static_cast<const void*>(name), caller);
    const uintptr_t mix = reinterpret_cast<uintptr_t>(caller) ^ reinterpret_cast<uintptr_t>(name) >> 4;
    RecentCallsite& recent = recent_callsites_[(mix ^ mix >> 7) % kRecentCallsites];
    if (recent.text && recent.key == key) return *recent.text;
    auto it = callsites_.find(key);
    if (it != callsites_.end()) {
      recent = {key, &it->second};
      return it->second;
    }
    std::string where;
    Dl_info info{};
    if (caller && ::dladdr(caller, &info) && info.dli_fname) {
      std::string module = info.dli_fname;
      module = module.substr(module.rfind('/') + 1);
      char off[32];
      if (module.find("mpi4py") != std::string::npos || module.rfind("MPI.cpython", 0) == 0) {
        where = "mpi4py";  // its Python line is in the rank's stack
      } else if (info.dli_sname && info.dli_saddr) {
        std::snprintf(off, sizeof off, "+0x%zx",
                      static_cast<size_t>(static_cast<const char*>(caller) - static_cast<const char*>(info.dli_saddr)));
        where = std::string(info.dli_sname) + off;
      } else {
        std::snprintf(off, sizeof off, "+0x%zx",
                      static_cast<size_t>(static_cast<const char*>(caller) - static_cast<const char*>(info.dli_fbase)));
        where = module + off;
      }
    }
    if (callsites_.size() > 4096) {  // bounded however many call sites a program has
      callsites_.clear();
      for (RecentCallsite& r : recent_callsites_) r = {};
    }
    recent = {key, &(callsites_[key] = where.empty() ? std::string(name) : std::string(name) + "@" + where)};
    return *recent.text;
  }

  struct PairHash {
    size_t operator()(const std::pair<const void*, const void*>& p) const {
      return std::hash<const void*>()(p.first) * 31 + std::hash<const void*>()(p.second);
    }
  };

  // mu_, held only when the program may call MPI from several threads at once.
  std::unique_lock<std::mutex> Lock() {
    return multiple_ ? std::unique_lock<std::mutex>(mu_) : std::unique_lock<std::mutex>();
  }

  bool on_ = false;  // set once at MPI_Init, before the program's threads use MPI
  // Whether MPI_Init granted MPI_THREAD_MULTIPLE; set once there, like on_ (true until then: safe).
  bool multiple_ = true;
  uint64_t init_handle_ = 0;
  std::mutex mu_;
  MPI_Comm last_comm_key_ = MPI_COMM_NULL;  // CommOf's last answer (nullptr: none); mu_
  Comm* last_comm_ = nullptr;
  struct RecentCallsite {
    std::pair<const void*, const void*> key;
    const std::string* text = nullptr;  // in callsites_; nullptr: none
  };
  static constexpr size_t kRecentCallsites = 32;
  RecentCallsite recent_callsites_[kRecentCallsites] = {};  // Callsite's recent answers; mu_
  std::unordered_map<MPI_Comm, Comm> comms_;
  std::unordered_map<uint64_t, uint64_t> made_;  // members' hash -> communicators made with them
  dsd::tracers::FlatMap<MPI_Request, uint64_t> requests_{MPI_REQUEST_NULL};
  std::unordered_map<std::pair<const void*, const void*>, std::string, PairHash> callsites_;
};

Tracer& T() {
  static Tracer* t = new Tracer;  // leaked: MPI calls may come from threads that outlive static destructors
  return *t;
}

// > 0 inside a traced call: nested MPI calls belong to it. initial-exec: a preloaded library's TLS
// is in the static block, read at a fixed offset instead of through __tls_get_addr.
__attribute__((tls_model("initial-exec"))) thread_local int t_depth = 0;

// Runs a blocking call between its begin and end.
template <class F>
int Blocking(const char* name, MPI_Comm comm, const Call& call, const void* caller, F&& f) {
  Tracer& t = T();
  if (!t.on() || t_depth) return f();
  ++t_depth;
  uint64_t h = t.Begin(name, comm, call, false, caller);
  int rc = f();
  t.End(h, name, rc);
  --t_depth;
  return rc;
}

// Runs a non-blocking call: an async record that its request's completion ends.
template <class F>
int Nonblocking(const char* name, MPI_Comm comm, const Call& call, MPI_Request* request, const void* caller, F&& f) {
  Tracer& t = T();
  if (!t.on() || t_depth) return f();
  ++t_depth;
  uint64_t h = t.Begin(name, comm, call, true, caller);
  int rc = f();
  if (rc != MPI_SUCCESS)
    t.End(h, name, rc);
  else
    t.Remember(*request, h);
  --t_depth;
  return rc;
}

// A wait's or test's per-request arrays: inline for the usual handful (two heap allocations were a
// third of a traced MPI_Waitall), on the heap past that.
template <class T>
class CallArray {
 public:
  explicit CallArray(int n) : n_(n > 0 ? n : 0) {
    if (n_ > kInline) heap_.resize(n_);
  }
  CallArray(const CallArray&) = delete;
  CallArray& operator=(const CallArray&) = delete;
  T* data() { return n_ > kInline ? heap_.data() : inline_; }
  const T* data() const { return n_ > kInline ? heap_.data() : inline_; }
  T& operator[](int i) { return data()[i]; }
  const T& operator[](int i) const { return data()[i]; }
  int size() const { return n_; }

 private:
  static constexpr int kInline = 16;
  int n_;
  T inline_[kInline] = {};
  std::vector<T> heap_;
};

// The requests a wait or test is about to complete, as they were before the call, and their
// handles (0 where untraced).
struct Pending {
  explicit Pending(int n, const MPI_Request* requests) : before(n), handles(n) {
    for (int i = 0; i < before.size(); ++i) {
      before[i] = requests[i];
      handles[i] = T().Lookup(requests[i]);
    }
  }
  CallArray<MPI_Request> before;
  CallArray<uint64_t> handles;
};

void SetWaited(const CallArray<uint64_t>& handles, bool waited) {
  for (int i = 0; i < handles.size(); ++i)
    if (handles[i]) dsd_trace_set_waited(handles[i], waited);
}

// Ends the record of a request that completed (or failed with `rc`) and forgets the request.
void Completed(uint64_t handle, MPI_Request before, int rc, const char* name) {
  if (!handle) return;
  T().End(handle, name, rc);
  T().Forget(before, handle);
}

// The same for request i of an array.
void Completed(const Pending& p, int i, int rc, const char* name) {
  if (i >= 0 && i < p.handles.size()) Completed(p.handles[i], p.before[i], rc, name);
}

// With MPI_ERR_IN_STATUS each request's status says how it ended; MPI_ERR_PENDING: not yet (still
// active). -1: unknown (no statuses were asked for), so its record is left as it is.
int StatusError(const MPI_Status* statuses, int i) {
  if (statuses == MPI_STATUSES_IGNORE) return -1;
  return statuses[i].MPI_ERROR;
}

// Whether a wait/test's outcome for request i ends its record, and with which code.
bool Ends(int rc, const MPI_Status* statuses, int i, int* code) {
  if (rc != MPI_ERR_IN_STATUS) {
    *code = rc;
    return true;
  }
  *code = StatusError(statuses, i);
  return *code != -1 && *code != MPI_ERR_PENDING;
}

int Size(MPI_Comm comm) {
  int n = 0;
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter)
    PMPI_Comm_remote_size(comm, &n);
  else
    PMPI_Comm_size(comm, &n);
  return n;
}

uint64_t Sum(const int* counts, MPI_Comm comm) {
  uint64_t s = 0;
  if (!counts) return 0;
  int n = 0;
  PMPI_Comm_size(comm, &n);  // recvcounts has an entry per rank of the local group
  for (int i = 0; i < n; ++i) s += counts[i] > 0 ? static_cast<uint64_t>(counts[i]) : 0;
  return s;
}

uint64_t U(int n) { return n > 0 ? static_cast<uint64_t>(n) : 0; }

#define DSD_CALLER __builtin_return_address(0)

}  // namespace

extern "C" {

// ---- start and end ----

int MPI_Init(int* argc, char*** argv) {
  T().BeforeInit();
  int rc = PMPI_Init(argc, argv);
  T().AfterInit(rc);
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  T().BeforeInit();
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  T().AfterInit(rc);
  return rc;
}

int MPI_Finalize(void) {
  T().Finalizing();
  return PMPI_Finalize();
}

int MPI_Abort(MPI_Comm comm, int code) {
  T().Aborting(comm, code);
  return PMPI_Abort(comm, code);
}

// ---- communicators ----

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out) {
  int rc = PMPI_Comm_dup(comm, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out) {
  int rc = PMPI_Comm_split(comm, color, key, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* out) {
  int rc = PMPI_Comm_split_type(comm, type, key, info, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* out) {
  int rc = PMPI_Comm_create(comm, group, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* out) {
  int rc = PMPI_Comm_create_group(comm, group, tag, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm* out) {
  int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* out) {
  int rc = PMPI_Comm_dup_with_info(comm, info, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* out) {
  int rc = PMPI_Cart_sub(comm, remain_dims, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm* out) {
  int rc = PMPI_Graph_create(comm, nnodes, index, edges, reorder, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm* out) {
  int rc = PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree, destinations, destweights,
                                           info, reorder, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Intercomm_create(MPI_Comm local, int local_leader, MPI_Comm peer, int remote_leader, int tag, MPI_Comm* out) {
  int rc = PMPI_Intercomm_create(local, local_leader, peer, remote_leader, tag, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Intercomm_merge(MPI_Comm inter, int high, MPI_Comm* out) {
  int rc = PMPI_Intercomm_merge(inter, high, out);
  if (rc == MPI_SUCCESS) T().Made(*out);
  return rc;
}

int MPI_Comm_free(MPI_Comm* comm) {
  if (comm) T().Freed(*comm);
  return PMPI_Comm_free(comm);
}

// ---- blocking collectives ----

int MPI_Barrier(MPI_Comm comm) {
  return Blocking("MPI_Barrier", comm, {Op::kBarrier}, DSD_CALLER, [&] { return PMPI_Barrier(comm); });
}

int MPI_Bcast(void* buf, int count, MPI_Datatype t, int root, MPI_Comm comm) {
  return Blocking("MPI_Bcast", comm, {Op::kBroadcast, t, U(count), MPI_OP_NULL, root}, DSD_CALLER,
                  [&] { return PMPI_Bcast(buf, count, t, root, comm); });
}

int MPI_Reduce(const void* s, void* r, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm) {
  return Blocking("MPI_Reduce", comm, {Op::kReduce, t, U(count), op, root}, DSD_CALLER,
                  [&] { return PMPI_Reduce(s, r, count, t, op, root, comm); });
}

int MPI_Allreduce(const void* s, void* r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  return Blocking("MPI_Allreduce", comm, {Op::kAllReduce, t, U(count), op}, DSD_CALLER,
                  [&] { return PMPI_Allreduce(s, r, count, t, op, comm); });
}

int MPI_Allgather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm comm) {
  const bool in_place = s == MPI_IN_PLACE;
  return Blocking("MPI_Allgather", comm, {Op::kAllGather, in_place ? rt : st, U(in_place ? rc : sc)}, DSD_CALLER,
                  [&] { return PMPI_Allgather(s, sc, st, r, rc, rt, comm); });
}

int MPI_Allgatherv(const void* s, int sc, MPI_Datatype st, void* r, const int rcs[], const int displs[],
                   MPI_Datatype rt, MPI_Comm comm) {
  return Blocking("MPI_Allgatherv", comm, {Op::kAllGatherV, rt, Sum(rcs, comm)}, DSD_CALLER,
                  [&] { return PMPI_Allgatherv(s, sc, st, r, rcs, displs, rt, comm); });
}

int MPI_Gather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root, MPI_Comm comm) {
  const bool in_place = s == MPI_IN_PLACE;
  return Blocking("MPI_Gather", comm, {Op::kGather, in_place ? rt : st, U(in_place ? rc : sc), MPI_OP_NULL, root},
                  DSD_CALLER, [&] { return PMPI_Gather(s, sc, st, r, rc, rt, root, comm); });
}

int MPI_Gatherv(const void* s, int sc, MPI_Datatype st, void* r, const int rcs[], const int displs[], MPI_Datatype rt,
                int root, MPI_Comm comm) {
  return Blocking("MPI_Gatherv", comm, {Op::kGatherV, s == MPI_IN_PLACE ? rt : st, 0, MPI_OP_NULL, root}, DSD_CALLER,
                  [&] { return PMPI_Gatherv(s, sc, st, r, rcs, displs, rt, root, comm); });
}

int MPI_Scatter(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root, MPI_Comm comm) {
  const bool in_place = r == MPI_IN_PLACE;
  return Blocking("MPI_Scatter", comm, {Op::kScatter, in_place ? st : rt, U(in_place ? sc : rc), MPI_OP_NULL, root},
                  DSD_CALLER, [&] { return PMPI_Scatter(s, sc, st, r, rc, rt, root, comm); });
}

int MPI_Scatterv(const void* s, const int scs[], const int displs[], MPI_Datatype st, void* r, int rc, MPI_Datatype rt,
                 int root, MPI_Comm comm) {
  return Blocking("MPI_Scatterv", comm, {Op::kScatterV, r == MPI_IN_PLACE ? st : rt, 0, MPI_OP_NULL, root}, DSD_CALLER,
                  [&] { return PMPI_Scatterv(s, scs, displs, st, r, rc, rt, root, comm); });
}

int MPI_Alltoall(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm comm) {
  const bool in_place = s == MPI_IN_PLACE;
  return Blocking("MPI_Alltoall", comm, {Op::kAllToAll, in_place ? rt : st, U(in_place ? rc : sc)}, DSD_CALLER,
                  [&] { return PMPI_Alltoall(s, sc, st, r, rc, rt, comm); });
}

int MPI_Alltoallv(const void* s, const int scs[], const int sd[], MPI_Datatype st, void* r, const int rcs[],
                  const int rd[], MPI_Datatype rt, MPI_Comm comm) {
  return Blocking("MPI_Alltoallv", comm, {Op::kAllToAllV, s == MPI_IN_PLACE ? rt : st, 0}, DSD_CALLER,
                  [&] { return PMPI_Alltoallv(s, scs, sd, st, r, rcs, rd, rt, comm); });
}

int MPI_Reduce_scatter(const void* s, void* r, const int rcs[], MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  return Blocking("MPI_Reduce_scatter", comm, {Op::kReduceScatter, t, Sum(rcs, comm), op}, DSD_CALLER,
                  [&] { return PMPI_Reduce_scatter(s, r, rcs, t, op, comm); });
}

int MPI_Reduce_scatter_block(const void* s, void* r, int rc, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  return Blocking("MPI_Reduce_scatter_block", comm, {Op::kReduceScatter, t, U(rc) * U(Size(comm)), op}, DSD_CALLER,
                  [&] { return PMPI_Reduce_scatter_block(s, r, rc, t, op, comm); });
}

int MPI_Scan(const void* s, void* r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  return Blocking("MPI_Scan", comm, {Op::kScan, t, U(count), op}, DSD_CALLER,
                  [&] { return PMPI_Scan(s, r, count, t, op, comm); });
}

int MPI_Exscan(const void* s, void* r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  return Blocking("MPI_Exscan", comm, {Op::kExscan, t, U(count), op}, DSD_CALLER,
                  [&] { return PMPI_Exscan(s, r, count, t, op, comm); });
}

// ---- non-blocking collectives ----

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* q) {
  return Nonblocking("MPI_Ibarrier", comm, {Op::kBarrier}, q, DSD_CALLER, [&] { return PMPI_Ibarrier(comm, q); });
}

int MPI_Ibcast(void* buf, int count, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request* q) {
  return Nonblocking("MPI_Ibcast", comm, {Op::kBroadcast, t, U(count), MPI_OP_NULL, root}, q, DSD_CALLER,
                     [&] { return PMPI_Ibcast(buf, count, t, root, comm, q); });
}

int MPI_Ireduce(const void* s, void* r, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm, MPI_Request* q) {
  return Nonblocking("MPI_Ireduce", comm, {Op::kReduce, t, U(count), op, root}, q, DSD_CALLER,
                     [&] { return PMPI_Ireduce(s, r, count, t, op, root, comm, q); });
}

int MPI_Iallreduce(const void* s, void* r, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Request* q) {
  return Nonblocking("MPI_Iallreduce", comm, {Op::kAllReduce, t, U(count), op}, q, DSD_CALLER,
                     [&] { return PMPI_Iallreduce(s, r, count, t, op, comm, q); });
}

int MPI_Iallgather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm comm,
                   MPI_Request* q) {
  const bool in_place = s == MPI_IN_PLACE;
  return Nonblocking("MPI_Iallgather", comm, {Op::kAllGather, in_place ? rt : st, U(in_place ? rc : sc)}, q, DSD_CALLER,
                     [&] { return PMPI_Iallgather(s, sc, st, r, rc, rt, comm, q); });
}

int MPI_Iallgatherv(const void* s, int sc, MPI_Datatype st, void* r, const int rcs[], const int displs[],
                    MPI_Datatype rt, MPI_Comm comm, MPI_Request* q) {
  return Nonblocking("MPI_Iallgatherv", comm, {Op::kAllGatherV, rt, Sum(rcs, comm)}, q, DSD_CALLER,
                     [&] { return PMPI_Iallgatherv(s, sc, st, r, rcs, displs, rt, comm, q); });
}

int MPI_Igather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root, MPI_Comm comm,
                MPI_Request* q) {
  const bool in_place = s == MPI_IN_PLACE;
  return Nonblocking("MPI_Igather", comm, {Op::kGather, in_place ? rt : st, U(in_place ? rc : sc), MPI_OP_NULL, root},
                     q, DSD_CALLER, [&] { return PMPI_Igather(s, sc, st, r, rc, rt, root, comm, q); });
}

int MPI_Iscatter(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root, MPI_Comm comm,
                 MPI_Request* q) {
  const bool in_place = r == MPI_IN_PLACE;
  return Nonblocking("MPI_Iscatter", comm, {Op::kScatter, in_place ? st : rt, U(in_place ? sc : rc), MPI_OP_NULL, root},
                     q, DSD_CALLER, [&] { return PMPI_Iscatter(s, sc, st, r, rc, rt, root, comm, q); });
}

int MPI_Ialltoall(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm comm,
                  MPI_Request* q) {
  const bool in_place = s == MPI_IN_PLACE;
  return Nonblocking("MPI_Ialltoall", comm, {Op::kAllToAll, in_place ? rt : st, U(in_place ? rc : sc)}, q, DSD_CALLER,
                     [&] { return PMPI_Ialltoall(s, sc, st, r, rc, rt, comm, q); });
}

int MPI_Ireduce_scatter_block(const void* s, void* r, int rc, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                              MPI_Request* q) {
  return Nonblocking("MPI_Ireduce_scatter_block", comm, {Op::kReduceScatter, t, U(rc) * U(Size(comm)), op}, q,
                     DSD_CALLER, [&] { return PMPI_Ireduce_scatter_block(s, r, rc, t, op, comm, q); });
}

// ---- point to point ----

int MPI_Send(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  if (dest == MPI_PROC_NULL) return PMPI_Send(buf, count, t, dest, tag, comm);
  return Blocking("MPI_Send", comm, {Op::kSend, t, U(count), MPI_OP_NULL, dest}, DSD_CALLER,
                  [&] { return PMPI_Send(buf, count, t, dest, tag, comm); });
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  if (dest == MPI_PROC_NULL) return PMPI_Ssend(buf, count, t, dest, tag, comm);
  return Blocking("MPI_Ssend", comm, {Op::kSend, t, U(count), MPI_OP_NULL, dest}, DSD_CALLER,
                  [&] { return PMPI_Ssend(buf, count, t, dest, tag, comm); });
}

int MPI_Bsend(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  if (dest == MPI_PROC_NULL) return PMPI_Bsend(buf, count, t, dest, tag, comm);
  return Blocking("MPI_Bsend", comm, {Op::kSend, t, U(count), MPI_OP_NULL, dest}, DSD_CALLER,
                  [&] { return PMPI_Bsend(buf, count, t, dest, tag, comm); });
}

int MPI_Rsend(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm) {
  if (dest == MPI_PROC_NULL) return PMPI_Rsend(buf, count, t, dest, tag, comm);
  return Blocking("MPI_Rsend", comm, {Op::kSend, t, U(count), MPI_OP_NULL, dest}, DSD_CALLER,
                  [&] { return PMPI_Rsend(buf, count, t, dest, tag, comm); });
}

int MPI_Recv(void* buf, int count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Status* st) {
  if (source == MPI_PROC_NULL) return PMPI_Recv(buf, count, t, source, tag, comm, st);
  return Blocking("MPI_Recv", comm, {Op::kRecv, t, U(count), MPI_OP_NULL, source == MPI_ANY_SOURCE ? -1 : source},
                  DSD_CALLER, [&] { return PMPI_Recv(buf, count, t, source, tag, comm, st); });
}

// Both halves are in flight until it returns; the send is async (the rank waits on the receive).
int MPI_Sendrecv(const void* sb, int sc, MPI_Datatype st, int dest, int stag, void* rb, int rc, MPI_Datatype rt,
                 int source, int rtag, MPI_Comm comm, MPI_Status* status) {
  Tracer& t = T();
  if (!t.on() || t_depth) return PMPI_Sendrecv(sb, sc, st, dest, stag, rb, rc, rt, source, rtag, comm, status);
  ++t_depth;
  const void* caller = DSD_CALLER;
  uint64_t hs = dest == MPI_PROC_NULL
                    ? 0
                    : t.Begin("MPI_Sendrecv", comm, {Op::kSend, st, U(sc), MPI_OP_NULL, dest}, true, caller);
  uint64_t hr =
      source == MPI_PROC_NULL
          ? 0
          : t.Begin("MPI_Sendrecv", comm, {Op::kRecv, rt, U(rc), MPI_OP_NULL, source == MPI_ANY_SOURCE ? -1 : source},
                    false, caller);
  int rcode = PMPI_Sendrecv(sb, sc, st, dest, stag, rb, rc, rt, source, rtag, comm, status);
  t.End(hr, "MPI_Sendrecv", rcode);
  t.End(hs, "MPI_Sendrecv", rcode);
  --t_depth;
  return rcode;
}

int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype t, int dest, int stag, int source, int rtag, MPI_Comm comm,
                         MPI_Status* status) {
  Tracer& tr = T();
  if (!tr.on() || t_depth) return PMPI_Sendrecv_replace(buf, count, t, dest, stag, source, rtag, comm, status);
  ++t_depth;
  const void* caller = DSD_CALLER;
  uint64_t hs = dest == MPI_PROC_NULL
                    ? 0
                    : tr.Begin("MPI_Sendrecv_replace", comm, {Op::kSend, t, U(count), MPI_OP_NULL, dest}, true, caller);
  uint64_t hr =
      source == MPI_PROC_NULL
          ? 0
          : tr.Begin("MPI_Sendrecv_replace", comm,
                     {Op::kRecv, t, U(count), MPI_OP_NULL, source == MPI_ANY_SOURCE ? -1 : source}, false, caller);
  int rcode = PMPI_Sendrecv_replace(buf, count, t, dest, stag, source, rtag, comm, status);
  tr.End(hr, "MPI_Sendrecv_replace", rcode);
  tr.End(hs, "MPI_Sendrecv_replace", rcode);
  --t_depth;
  return rcode;
}

int MPI_Isend(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request* q) {
  if (dest == MPI_PROC_NULL) return PMPI_Isend(buf, count, t, dest, tag, comm, q);
  return Nonblocking("MPI_Isend", comm, {Op::kSend, t, U(count), MPI_OP_NULL, dest}, q, DSD_CALLER,
                     [&] { return PMPI_Isend(buf, count, t, dest, tag, comm, q); });
}

int MPI_Issend(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request* q) {
  if (dest == MPI_PROC_NULL) return PMPI_Issend(buf, count, t, dest, tag, comm, q);
  return Nonblocking("MPI_Issend", comm, {Op::kSend, t, U(count), MPI_OP_NULL, dest}, q, DSD_CALLER,
                     [&] { return PMPI_Issend(buf, count, t, dest, tag, comm, q); });
}

int MPI_Ibsend(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request* q) {
  if (dest == MPI_PROC_NULL) return PMPI_Ibsend(buf, count, t, dest, tag, comm, q);
  return Nonblocking("MPI_Ibsend", comm, {Op::kSend, t, U(count), MPI_OP_NULL, dest}, q, DSD_CALLER,
                     [&] { return PMPI_Ibsend(buf, count, t, dest, tag, comm, q); });
}

int MPI_Irsend(const void* buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request* q) {
  if (dest == MPI_PROC_NULL) return PMPI_Irsend(buf, count, t, dest, tag, comm, q);
  return Nonblocking("MPI_Irsend", comm, {Op::kSend, t, U(count), MPI_OP_NULL, dest}, q, DSD_CALLER,
                     [&] { return PMPI_Irsend(buf, count, t, dest, tag, comm, q); });
}

int MPI_Irecv(void* buf, int count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Request* q) {
  if (source == MPI_PROC_NULL) return PMPI_Irecv(buf, count, t, source, tag, comm, q);
  return Nonblocking("MPI_Irecv", comm, {Op::kRecv, t, U(count), MPI_OP_NULL, source == MPI_ANY_SOURCE ? -1 : source},
                     q, DSD_CALLER, [&] { return PMPI_Irecv(buf, count, t, source, tag, comm, q); });
}

// ---- completion ----

int MPI_Wait(MPI_Request* q, MPI_Status* status) {
  if (!T().on() || t_depth || !q) return PMPI_Wait(q, status);
  MPI_Request before = *q;
  uint64_t h = T().Lookup(before);
  ++t_depth;
  if (h) dsd_trace_set_waited(h, true);
  int rc = PMPI_Wait(q, status);
  Completed(h, before, rc, "MPI_Wait");
  --t_depth;
  return rc;
}

int MPI_Waitall(int n, MPI_Request qs[], MPI_Status statuses[]) {
  if (!T().on() || t_depth || n <= 0 || !qs) return PMPI_Waitall(n, qs, statuses);
  Pending p(n, qs);
  CallArray<uint64_t>& h = p.handles;
  ++t_depth;
  SetWaited(h, true);
  int rc = PMPI_Waitall(n, qs, statuses);
  for (int i = 0, code = 0; i < n; ++i) {
    if (Ends(rc, statuses, i, &code))
      Completed(p, i, code, "MPI_Waitall");
    else if (h[i])
      dsd_trace_set_waited(h[i], false);  // still active: nobody waits on it now
  }
  --t_depth;
  return rc;
}

int MPI_Waitany(int n, MPI_Request qs[], int* index, MPI_Status* status) {
  if (!T().on() || t_depth || n <= 0 || !qs) return PMPI_Waitany(n, qs, index, status);
  Pending p(n, qs);
  CallArray<uint64_t>& h = p.handles;
  ++t_depth;
  SetWaited(h, true);
  int rc = PMPI_Waitany(n, qs, index, status);
  if (index && *index >= 0 && *index < n) {  // MPI_UNDEFINED, or whatever a failed call left there: none
    Completed(p, *index, rc, "MPI_Waitany");
    h[*index] = 0;
  }
  SetWaited(h, false);  // the others are still in flight, and nobody waits on them now
  --t_depth;
  return rc;
}

// The indices a Waitsome/Testsome reported, trusted only when the call says they are valid.
int Reported(int rc, int n, const int* outcount) {
  if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || !outcount || *outcount == MPI_UNDEFINED) return 0;
  return *outcount < 0 ? 0 : (*outcount > n ? n : *outcount);
}

int MPI_Waitsome(int n, MPI_Request qs[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (!T().on() || t_depth || n <= 0 || !qs) return PMPI_Waitsome(n, qs, outcount, indices, statuses);
  Pending p(n, qs);
  CallArray<uint64_t>& h = p.handles;
  ++t_depth;
  SetWaited(h, true);
  int rc = PMPI_Waitsome(n, qs, outcount, indices, statuses);
  for (int k = 0, code = 0, got = Reported(rc, n, outcount); k < got; ++k) {
    int i = indices[k];
    if (i < 0 || i >= n) continue;
    if (Ends(rc, statuses, k, &code)) {
      Completed(p, i, code, "MPI_Waitsome");
      h[i] = 0;
    }
  }
  SetWaited(h, false);
  --t_depth;
  return rc;
}

int MPI_Test(MPI_Request* q, int* flag, MPI_Status* status) {
  if (!T().on() || t_depth || !q) return PMPI_Test(q, flag, status);
  MPI_Request before = *q;
  uint64_t h = T().Lookup(before);
  int rc = PMPI_Test(q, flag, status);
  if (rc != MPI_SUCCESS || (flag && *flag)) Completed(h, before, rc, "MPI_Test");
  return rc;
}

int MPI_Testall(int n, MPI_Request qs[], int* flag, MPI_Status statuses[]) {
  if (!T().on() || t_depth || n <= 0 || !qs) return PMPI_Testall(n, qs, flag, statuses);
  Pending p(n, qs);
  int rc = PMPI_Testall(n, qs, flag, statuses);
  if (rc != MPI_SUCCESS || (flag && *flag))
    for (int i = 0, code = 0; i < n; ++i)
      if (Ends(rc, statuses, i, &code)) Completed(p, i, code, "MPI_Testall");
  return rc;
}

int MPI_Testany(int n, MPI_Request qs[], int* index, int* flag, MPI_Status* status) {
  if (!T().on() || t_depth || n <= 0 || !qs) return PMPI_Testany(n, qs, index, flag, status);
  Pending p(n, qs);
  int rc = PMPI_Testany(n, qs, index, flag, status);
  if (flag && *flag && index && *index >= 0 && *index < n) Completed(p, *index, rc, "MPI_Testany");
  return rc;
}

int MPI_Testsome(int n, MPI_Request qs[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (!T().on() || t_depth || n <= 0 || !qs) return PMPI_Testsome(n, qs, outcount, indices, statuses);
  Pending p(n, qs);
  int rc = PMPI_Testsome(n, qs, outcount, indices, statuses);
  for (int k = 0, code = 0, got = Reported(rc, n, outcount); k < got; ++k) {
    int i = indices[k];
    if (i >= 0 && i < n && Ends(rc, statuses, k, &code)) Completed(p, i, code, "MPI_Testsome");
  }
  return rc;
}

// A freed request is never waited on: its call ends here as far as the trace can know.
int MPI_Request_free(MPI_Request* q) {
  if (T().on() && q) {
    MPI_Request before = *q;
    Completed(T().Lookup(before), before, MPI_SUCCESS, "MPI_Request_free");
  }
  return PMPI_Request_free(q);
}

}  // extern "C"
