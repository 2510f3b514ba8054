#include "runtime/trace_c_api.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/trace.h"

namespace {

using dsd::runtime::TraceWriter;

// Leaked on purpose: the heartbeat thread and late callbacks (a Work's future completing during
// interpreter shutdown) may touch the writer after static destructors ran.
std::mutex* g_mu = new std::mutex;
TraceWriter* g_writer = nullptr;  // guarded by g_mu; never freed
std::atomic<bool> g_forked{false};
std::string* g_error = new std::string;
// Set by dsd_trace_set_one_caller: the producer calls one at a time, so g_mu is not taken.
std::atomic<bool> g_one_caller{false};

// g_mu for the entry points that touch the writer, unless the producer said it calls one at a time
// (an uncontended lock and unlock were a fifth of a traced MPI call's cost).
std::unique_lock<std::mutex> LockWriter() {
  return g_one_caller.load(std::memory_order_relaxed) ? std::unique_lock<std::mutex>()
                                                      : std::unique_lock<std::mutex>(*g_mu);
}

void HeartbeatLoop(TraceWriter* w) {
  while (!g_forked.load(std::memory_order_relaxed)) {
    w->Heartbeat();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// A child forked while another thread held g_mu would wait on it forever: entry points check
// g_forked before taking the lock.

// The writer keeps a callsite whole up to kMaxCallsiteBytes (a long one in the trace's callsite
// table); past that it is cut, and a cut inside a UTF-8 sequence would leave bytes no reader can
// decode, so before the sequence's lead byte.
std::string_view Callsite(const char* s) {
  if (!s) return {};
  std::string_view v(s, strnlen(s, dsd::runtime::kMaxCallsiteBytes + 1));
  size_t max = dsd::runtime::kMaxCallsiteBytes;
  if (v.size() <= max) return v;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(v[n]) & 0xC0) == 0x80) --n;
  return v.substr(0, n);
}

constexpr uint64_t kFastHandleModulus = 0x7ffffffe;

TraceWriter* Writer() { return g_forked.load(std::memory_order_relaxed) ? nullptr : g_writer; }

// The index + 1 of the record a dsd_trace_begin_fast handle stands for (0: none). Handles wrap
// below 2^31 (a C int); the record is found from the remainder, since a record still open is at
// most `capacity` behind the newest.
uint64_t FastHandleToPlus1(int handle) {
  if (handle <= 0 || g_forked.load(std::memory_order_relaxed)) return 0;
  auto lock = LockWriter();
  if (!g_writer) return 0;
  uint64_t newest = g_writer->next_index();
  if (newest == 0) return 0;
  uint64_t low = static_cast<uint64_t>(handle - 1);
  uint64_t top = newest - 1;
  uint64_t index = top - (top % kFastHandleModulus + kFastHandleModulus - low) % kFastHandleModulus;
  return index > top ? 0 : index + 1;  // fewer records than the handle says: not ours
}

}  // namespace

extern "C" {

int dsd_trace_open(const char* path, int rank, int world_size, int local_rank, const char* backend, uint32_t capacity) {
  if (g_forked.load(std::memory_order_relaxed)) return -1;
  std::lock_guard<std::mutex> lock(*g_mu);
  if (g_writer) return 0;
  if (g_forked) return -1;
  dsd::runtime::TraceIdentity id;
  id.rank = rank;
  id.world_size = world_size;
  id.local_rank = local_rank;
  char host[64] = {};
  ::gethostname(host, sizeof host - 1);
  id.hostname = host;
  id.backend = backend ? backend : "";
  auto w = TraceWriter::Create(path ? path : "", id, capacity ? capacity : dsd::runtime::kDefaultTraceCapacity);
  if (!w.ok()) {
    *g_error = w.status().message();
    return -1;
  }
  g_writer = w->release();
  g_writer->SetPhase(dsd::runtime::Phase::kInit);
  // A forked child (a DataLoader worker) shares the parent's mapping: it must not write into it.
  static std::once_flag atfork;
  std::call_once(atfork, [] { ::pthread_atfork(nullptr, nullptr, [] { g_forked.store(true); }); });
  std::thread(HeartbeatLoop, g_writer).detach();
  return 0;
}

uint64_t dsd_trace_begin(int op, int dtype, int reduce_op, uint64_t seq, uint64_t count, uint64_t bytes, int peer,
                         uint32_t comm, const char* callsite) {
  if (g_forked.load(std::memory_order_relaxed)) return 0;
  auto lock = LockWriter();
  TraceWriter* w = Writer();
  if (!w) return 0;
  dsd::runtime::OpInfo info;
  info.op = static_cast<dsd::runtime::Op>(op & 0xff);
  info.async = (op & 0x100) != 0;
  info.dtype = static_cast<dsd::runtime::DType>(dtype);
  info.reduce = static_cast<dsd::runtime::ReduceOp>(reduce_op);
  info.seq = seq;
  info.count = count;
  info.bytes = bytes;
  info.peer = peer;
  info.comm_id = comm;
  info.callsite = Callsite(callsite);
  return w->Begin(info) + 1;
}

int dsd_trace_begin_fast(int packed, int seq, int count, int peer, int comm, const char* callsite) {
  if (g_forked.load(std::memory_order_relaxed)) return 0;
  uint64_t elem = (static_cast<uint32_t>(packed) >> 24) & 0x3f;
  int op = (packed & 0xff) | ((packed >> 30) & 1) << 8;
  uint64_t handle = dsd_trace_begin(op, (packed >> 8) & 0xff, (packed >> 16) & 0xff, static_cast<uint32_t>(seq),
                                    static_cast<uint32_t>(count), static_cast<uint32_t>(count) * elem, peer,
                                    static_cast<uint32_t>(comm), callsite);
  // Handles wrap below 2^31 (a C int); dsd_trace_end_fast finds the record from the remainder, since
  // a record still open is at most `capacity` behind the newest.
  return handle == 0 ? 0 : static_cast<int>((handle - 1) % kFastHandleModulus) + 1;
}

void dsd_trace_end_fast(int handle, const char* error) {
  uint64_t plus1 = FastHandleToPlus1(handle);
  if (plus1) dsd_trace_end(plus1, error == nullptr, error);
}

void dsd_trace_end(uint64_t handle, int ok, const char* error) {
  if (handle == 0) return;
  if (g_forked.load(std::memory_order_relaxed)) return;
  auto lock = LockWriter();
  TraceWriter* w = Writer();
  if (!w) return;
  if (ok)
    w->Complete(handle - 1);
  else
    w->Fail(handle - 1, error ? error : "");
}

void dsd_trace_set_waited(uint64_t handle, int waited) {
  if (handle == 0 || g_forked.load(std::memory_order_relaxed)) return;
  auto lock = LockWriter();
  if (TraceWriter* w = Writer()) w->SetWaited(handle - 1, waited != 0);
}

void dsd_trace_withdraw(uint64_t handle) {
  if (handle == 0 || g_forked.load(std::memory_order_relaxed)) return;
  auto lock = LockWriter();
  if (TraceWriter* w = Writer()) w->Withdraw(handle - 1);
}

void dsd_trace_withdraw_fast(int handle) { dsd_trace_withdraw(FastHandleToPlus1(handle)); }

void dsd_trace_set_phase(int phase) {
  if (g_forked.load(std::memory_order_relaxed)) return;
  auto lock = LockWriter();
  if (TraceWriter* w = Writer()) w->SetPhase(static_cast<dsd::runtime::Phase>(phase));
}

void dsd_trace_set_step(uint64_t step) {
  if (g_forked.load(std::memory_order_relaxed)) return;
  auto lock = LockWriter();
  if (TraceWriter* w = Writer()) w->SetStep(step);
}

void dsd_trace_set_flags(uint32_t bits) {
  if (g_forked.load(std::memory_order_relaxed)) return;
  auto lock = LockWriter();
  if (TraceWriter* w = Writer()) w->SetFlags(bits);
}

void dsd_trace_set_error(const char* error) {
  if (g_forked.load(std::memory_order_relaxed)) return;
  auto lock = LockWriter();
  if (TraceWriter* w = Writer()) w->SetLastError(error ? error : "");
}

void dsd_trace_set_one_caller(int yes) {
  std::lock_guard<std::mutex> lock(*g_mu);  // a call in progress on another thread finishes first
  g_one_caller.store(yes != 0, std::memory_order_relaxed);
}

const char* dsd_trace_error(void) { return g_error->c_str(); }

}  // extern "C"
