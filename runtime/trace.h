// The per-rank collective trace: a memory-mapped file (docs/trace.md) holding a header (identity,
// heartbeat, step, phase, watchdog marks, last error) and a ring of fixed-size records, one per
// collective/barrier/p2p call. Another process (the agent, a test, `dsdoctor analyze`) reads it
// without the rank's help: every record and the error text are guarded by a sequence lock, so a
// reader sees each record whole or knows it was torn, even when the rank is frozen or was killed
// mid-write. The pages live in the page cache, so a SIGKILLed rank's trace stays readable.
//
// TraceWriter: owned by the rank (the runtime's ProcessGroup holds it through a shared_ptr).
// Begin/Complete/Fail are called by one thread at a time (the thread issuing collectives); the
// header setters (phase, step, heartbeat, flags, watchdog) and InFlight() are safe from any thread.
// ReadTrace is a pure reader; it is thread-safe and never blocks on the writer.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "runtime/types.h"

namespace dsd::runtime {

inline constexpr char kTraceMagic[8] = {'D', 'S', 'D', 'T', 'R', 'A', 'C', 'E'};
inline constexpr uint32_t kTraceVersion = 1;
inline constexpr size_t kTraceHeaderBytes = 4096;
inline constexpr size_t kTraceRecordBytes = 128;
inline constexpr size_t kCallsiteBytes = 48;
// A callsite longer than the record's field keeps its whole text in the callsite table after the
// ring (docs/trace.md, "Callsites"): the field holds its first bytes (at most kCallsiteHeadBytes, what
// a reader of the field alone shows), a NUL, and where the text lies in the table.
inline constexpr size_t kCallsiteHeadBytes = 39;
inline constexpr size_t kMaxCallsiteBytes = 1024;         // longer ones are cut (at a UTF-8 boundary)
inline constexpr uint32_t kTraceStringBytes = 64 * 1024;  // the table: ~1,000 distinct long callsites
inline constexpr size_t kTraceErrorBytes = 512;
inline constexpr uint32_t kDefaultTraceCapacity = 4096;

// kWithdrawn: the library refused the call before it communicated (the Python tracer learns it
// only once the call raised): readers leave such a record out, as if it had never been begun.
enum class RecordState : uint8_t {
  kEmpty = 0,
  kEnqueued = 1,
  kStarted = 2,
  kCompleted = 3,
  kFailed = 4,
  kWithdrawn = 5
};
const char* RecordStateName(RecordState s);

// Record flag bits.
inline constexpr uint32_t kRecordFlagAsync = 1u << 0;  // the call returned at once (async_op, isend, DDP bucket): in
                                                       // flight means not finished yet, not that the rank waits in it

// Header flag bits.
inline constexpr uint32_t kTraceFlagFinished = 1u << 0;       // the engine shut down cleanly
inline constexpr uint32_t kTraceFlagWatchdogFired = 1u << 1;  // see watchdog_index / watchdog_ns
inline constexpr uint32_t kTraceFlagAborted = 1u << 2;        // the watchdog's abort policy ended the rank
// The rank's Python tracer watches for Flight Recorder requests (docs/flight-recorder.md): its node
// waits for its dump of an incident.
inline constexpr uint32_t kTraceFlagFlightRecorder = 1u << 3;

// On-disk layout. Plain data: fields read or written concurrently are accessed through
// std::atomic_ref. Little-endian, as written by the (x86-64 / aarch64) machine that ran the rank.
struct TraceRecordRaw {
  uint64_t version;  // sequence lock: odd while the writer is inside, even when stable
  uint64_t index;    // 0-based number of this record since the trace began (slot = index % capacity)
  uint64_t seq;      // collectives: per-group sequence from 1; send/recv: per-peer sequence from 1
  uint64_t count;    // elements
  uint64_t bytes;
  int64_t enqueued_ns, started_ns, ended_ns;  // CLOCK_REALTIME nanoseconds; 0 = not yet
  uint32_t comm_id;                           // process group id (0 = world)
  int32_t peer;  // root (broadcast), peer (send/recv), world size (rendezvous); -1 otherwise
  uint8_t op, dtype, reduce, state;
  uint32_t flags;                 // kRecordFlag* (was `reserved`, always 0 before the Python tracer)
  char callsite[kCallsiteBytes];  // NUL-terminated, truncated
};
static_assert(sizeof(TraceRecordRaw) <= kTraceRecordBytes);

struct TraceHeaderRaw {
  char magic[8];
  uint32_t version, header_bytes, record_bytes, capacity;
  int32_t rank, world_size, local_rank, pid;
  int64_t created_ns;
  char hostname[64];
  char backend[16];
  uint64_t next_index;      // records begun so far
  int64_t heartbeat_ns;     // refreshed by the watchdog thread while the process runs
  uint64_t step;            // optimizer steps taken (engine.global_steps)
  uint32_t phase;           // runtime::Phase
  uint32_t flags;           // kTraceFlag*
  int64_t phase_ns;         // when the current phase began
  uint64_t watchdog_index;  // the record the watchdog fired on
  int64_t watchdog_ns;
  uint64_t error_version;  // sequence lock of last_error
  char last_error[kTraceErrorBytes];
  // The callsite table after the ring: its size (0 in files of writers older than the table) and the
  // bytes used so far (release-stored once a callsite's text is in place).
  uint32_t strings_bytes;
  uint32_t strings_used;
};
static_assert(sizeof(TraceHeaderRaw) <= kTraceHeaderBytes);

struct TraceIdentity {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string hostname;
  std::string backend;
};

// What a call is about to do; the writer adds index, timestamps and state.
struct OpInfo {
  Op op = Op::kNone;
  DType dtype = DType::kNone;
  ReduceOp reduce = ReduceOp::kNone;
  uint64_t seq = 0;
  uint64_t count = 0;
  uint64_t bytes = 0;
  int peer = -1;
  uint32_t comm_id = 0;
  std::string_view callsite;
  bool async = false;  // kRecordFlagAsync
};

// One record as a reader sees it.
struct TraceRecord {
  uint64_t index = 0, seq = 0, count = 0, bytes = 0;
  int64_t enqueued_ns = 0, started_ns = 0, ended_ns = 0;
  uint32_t comm_id = 0;
  int peer = -1;
  Op op = Op::kNone;
  DType dtype = DType::kNone;
  ReduceOp reduce = ReduceOp::kNone;
  RecordState state = RecordState::kEmpty;
  bool async = false;
  std::string callsite;
};

// "all_reduce#42 float32 x1024 (4 KiB) sum @engine.step [completed]"
std::string DescribeRecord(const TraceRecord& r);

class TraceWriter {
 public:
  // Creates (truncating) the file at `path` and maps it; an empty path maps anonymous memory, so
  // the watchdog still works when nobody asked for a trace file. The file is mode 0600 (0640 with
  // DSDOCTOR_TRACE_MODE=0640) and its blocks are reserved up front, so a full disk fails here, not
  // with SIGBUS at a later write.
  static Result<std::unique_ptr<TraceWriter>> Create(const std::string& path, const TraceIdentity& identity,
                                                     uint32_t capacity = kDefaultTraceCapacity);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  const std::string& path() const { return path_; }
  // Records begun so far (the writer thread's view).
  uint64_t next_index() const { return next_; }
  uint32_t capacity() const { return capacity_; }

  // Records a call as started (the runtime's backends block, so enqueued == started) and returns
  // its index for Complete/Fail. Several calls may be in flight (asynchronous ones, from the Python
  // tracer); Complete/Fail of a record that a newer lap of the ring overwrote does nothing.
  uint64_t Begin(const OpInfo& info);
  void Complete(uint64_t index);
  // Marks the record failed and stores `error` as the trace's last error.
  void Fail(uint64_t index, std::string_view error);
  // Takes back a record of a call that never communicated (kWithdrawn): ReadTrace leaves it out.
  void Withdraw(uint64_t index);
  // Whether the program blocks on an asynchronous call still in flight (MPI_Wait on its request):
  // while it does, the record loses kRecordFlagAsync, so readers see where the rank waits; a wait
  // that returns with the call unfinished (MPI_Waitany) gives the flag back. Ended or lapped: nothing.
  void SetWaited(uint64_t index, bool waited);

  void SetPhase(Phase phase);
  void SetStep(uint64_t step);
  void Heartbeat();
  void SetFlags(uint32_t bits);
  void SetLastError(std::string_view error);
  void MarkWatchdog(uint64_t index);

  // The call in progress, if any (any thread; the watchdog's view).
  struct InFlight {
    TraceRecord record;
  };
  std::optional<InFlight> Current() const;

 private:
  TraceWriter(std::string path, void* base, size_t bytes, uint32_t capacity);
  TraceRecordRaw* Slot(uint64_t index) const;
  void End(uint64_t index, RecordState state);
  // Puts `site` into the record's field, and its whole text into the callsite table when longer.
  void PutCallsite(char (&field)[kCallsiteBytes], std::string_view site);

  std::string path_;
  void* base_;
  size_t bytes_;
  uint32_t capacity_;
  uint64_t slot_mask_;  // capacity - 1 when the capacity is a power of two, else 0 (Slot divides)
  TraceHeaderRaw* header_;
  uint64_t next_ = 0;                                        // writer thread only
  char* strings_ = nullptr;                                  // the callsite table (kTraceStringBytes)
  uint32_t strings_used_ = 0;                                // writer thread only; published in the header
  std::unordered_map<std::string_view, uint32_t> interned_;  // text (in the table) → its offset
  std::atomic<uint64_t> in_flight_plus1_{0};                 // index + 1 of the call in progress; 0 = none
};

// Reads a record or the error text under its sequence lock; false when the writer was inside
// (retry) or died inside (stays torn).
// `strings`: the file's callsite table of `strings_bytes`, where a long callsite's text is, and
// `strings_used` its header word of published bytes (none: the field's head is the callsite).
bool ReadRecordConsistent(const TraceRecordRaw& raw, TraceRecord* out, const char* strings = nullptr,
                          uint32_t strings_bytes = 0, const uint32_t* strings_used = nullptr);

struct TraceSnapshot {
  std::string path;
  uint32_t capacity = 0;
  int rank = 0, world_size = 0, local_rank = 0, pid = 0;
  int64_t created_ns = 0;
  std::string hostname, backend;
  uint64_t next_index = 0;  // records ever begun; records below next_index - capacity were overwritten
  int64_t heartbeat_ns = 0;
  uint64_t step = 0;
  Phase phase = Phase::kStartup;
  int64_t phase_ns = 0;
  uint32_t flags = 0;
  uint64_t watchdog_index = 0;
  int64_t watchdog_ns = 0;
  std::string last_error;
  std::vector<TraceRecord> records;  // oldest first
  uint64_t torn = 0;                 // records skipped because a writer was (or died) inside them
  // TraceReader only: no record changed since its previous read, and `records` was left empty
  // (the header fields above are fresh).
  bool records_unchanged = false;

  // The newest record that has not ended (started or enqueued), if any.
  const TraceRecord* InFlight() const;
  // The newest record of any state, if any.
  const TraceRecord* Last() const;
};

// Maps `path` read-only and copies out a consistent snapshot. Errors name the file and the field
// (bad magic, version, sizes, truncated file).
// With `newest`, only the newest `newest` records are copied, plus, when none of those is in
// flight, the newest older record that is (found by its state alone): InFlight() and Last() are as
// for the whole ring, and a watcher sampling 5 times a second pays for its window, not for 4,096
// records.
Result<TraceSnapshot> ReadTrace(const std::string& path, size_t newest = SIZE_MAX);

// ReadTrace for a watcher that reads the same file again and again: the file stays mapped between
// reads (no mmap, munmap and page faults per read) and is mapped afresh when the path names
// another file or its size changed. Used by one thread.
class TraceReader {
 public:
  explicit TraceReader(std::string path) : path_(std::move(path)) {}
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;
  TraceReader(TraceReader&& o) noexcept
      : path_(std::move(o.path_)),
        base_(std::exchange(o.base_, nullptr)),
        size_(o.size_),
        dev_(o.dev_),
        ino_(o.ino_),
        previous_stamp_(o.previous_stamp_),
        previous_older_(o.previous_older_),
        ended_from_(o.ended_from_),
        ended_to_(o.ended_to_),
        ended_writer_(o.ended_writer_),
        previous_heartbeat_(o.previous_heartbeat_) {}
  TraceReader& operator=(TraceReader&&) = delete;

  // As ReadTrace(path, newest), except that when no record changed since the previous Read the
  // snapshot's records are left empty and records_unchanged is set: a rank waiting in a call, or
  // between steps, costs a header read. The path is looked at again (stat) only when the mapped
  // file's heartbeat did not move since the previous read.
  Result<TraceSnapshot> Read(size_t newest = SIZE_MAX);

 private:
  void Unmap();
  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
  uint64_t dev_ = 0, ino_ = 0;
  uint64_t previous_stamp_ = 0;           // the records' versions at the previous read
  uint64_t previous_older_ = UINT64_MAX;  // the older in-flight record it included, if any
  // Records [ended_from_, ended_to_) of the writer ended_writer_ were seen ended: the search for an
  // older call in flight does not read them again.
  uint64_t ended_from_ = 0, ended_to_ = 0, ended_writer_ = 0;
  int64_t previous_heartbeat_ = 0;  // the mapped header's heartbeat at the previous read
};

// CLOCK_REALTIME in nanoseconds: the trace's time base (comparable across processes and, with
// synchronised clocks, nodes). Read through TraceClock (runtime/trace_clock.h): the scaled
// time-stamp counter where the kernel keeps time with it.
int64_t TraceNowNs();

}  // namespace dsd::runtime
