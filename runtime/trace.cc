#include "runtime/trace.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>

#include "common/log.h"
#include "common/strings.h"
#include "runtime/trace_clock.h"

namespace dsd::runtime {
namespace {

template <typename T>
std::atomic_ref<T> A(T& field) {
  return std::atomic_ref<T>(field);
}

template <size_t N>
void CopyText(char (&dst)[N], std::string_view src) {
  size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

template <size_t N>
std::string TextOf(const char (&src)[N]) {
  return std::string(src, strnlen(src, N));
}

// Sequence-lock payloads move word by word with relaxed atomics: a reader that races the writer
// reads values it then throws away, which is defined behaviour (and clean under TSan) only when
// every access is atomic. The version word's release/acquire and the fences order the words.
static_assert(sizeof(TraceRecordRaw) % 8 == 0 && kTraceErrorBytes % 8 == 0);
static_assert(offsetof(TraceRecordRaw, version) == 0 && offsetof(TraceHeaderRaw, last_error) % 8 == 0);

void StoreWords(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<uint64_t*>(dst);
  uint64_t word;
  for (size_t i = 0; i < bytes / 8; ++i) {
    std::memcpy(&word, static_cast<const char*>(src) + 8 * i, 8);
    std::atomic_ref<uint64_t>(d[i]).store(word, std::memory_order_relaxed);
  }
}

void LoadWords(void* dst, const void* src, size_t bytes) {
  auto* s = static_cast<uint64_t*>(const_cast<void*>(src));
  for (size_t i = 0; i < bytes / 8; ++i) {
    uint64_t word = std::atomic_ref<uint64_t>(s[i]).load(std::memory_order_relaxed);
    std::memcpy(static_cast<char*>(dst) + 8 * i, &word, 8);
  }
}

// The 8-byte word holding op, dtype, reduce, state and flags: End and SetWaited change only it
// (and ended_ns), so they store one word, not the whole record.
static_assert(offsetof(TraceRecordRaw, op) % 8 == 0 &&
              offsetof(TraceRecordRaw, flags) + 4 == offsetof(TraceRecordRaw, op) + 8);
constexpr size_t kStateInWord = offsetof(TraceRecordRaw, state) - offsetof(TraceRecordRaw, op);
constexpr size_t kFlagsInWord = offsetof(TraceRecordRaw, flags) - offsetof(TraceRecordRaw, op);
uint64_t* StateWord(TraceRecordRaw* r) {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(r) + offsetof(TraceRecordRaw, op));
}
// The word holding comm_id (low half) and peer (high half); Begin composes it, and the state word,
// as little-endian integers (the file's byte order).
static_assert(std::endian::native == std::endian::little);
static_assert(offsetof(TraceRecordRaw, comm_id) % 8 == 0 &&
              offsetof(TraceRecordRaw, peer) == offsetof(TraceRecordRaw, comm_id) + 4);
static_assert(offsetof(TraceRecordRaw, dtype) == offsetof(TraceRecordRaw, op) + 1 &&
              offsetof(TraceRecordRaw, reduce) == offsetof(TraceRecordRaw, op) + 2 &&
              offsetof(TraceRecordRaw, state) == offsetof(TraceRecordRaw, op) + 3 &&
              offsetof(TraceRecordRaw, flags) == offsetof(TraceRecordRaw, op) + 4);
static_assert(offsetof(TraceRecordRaw, callsite) % 8 == 0 && kCallsiteBytes % 8 == 0);
uint64_t* IdsWord(TraceRecordRaw* r) {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(r) + offsetof(TraceRecordRaw, comm_id));
}

// The header and the ring (all a file of a writer older than the callsite table has), and the whole
// file with the table.
size_t RingEnd(uint32_t capacity) { return kTraceHeaderBytes + static_cast<size_t>(capacity) * kTraceRecordBytes; }
size_t MappedBytes(uint32_t capacity) { return RingEnd(capacity) + kTraceStringBytes; }

// The longest prefix of `s` of at most `max` bytes that does not cut a UTF-8 sequence.
std::string_view Utf8Prefix(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// The reference a long callsite's field carries after its head: offset (4 bytes) and length (2) in
// the table, then a two-byte mark that no text field has (a short callsite's field is zero there).
constexpr size_t kRefOffsetAt = 40, kRefLengthAt = 44, kRefMarkAt = 46;
constexpr unsigned char kRefMark[2] = {0xD5, 0x5D};

// Copies the error text under the header's sequence lock; false when it was being written.
bool ReadErrorConsistent(const TraceHeaderRaw& h, std::string* out) {
  auto& hh = const_cast<TraceHeaderRaw&>(h);
  uint64_t v1 = A(hh.error_version).load(std::memory_order_acquire);
  if (v1 & 1) return false;
  char copy[kTraceErrorBytes];
  LoadWords(copy, h.last_error, sizeof copy);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (A(hh.error_version).load(std::memory_order_relaxed) != v1) return false;
  copy[kTraceErrorBytes - 1] = '\0';
  *out = std::string(copy, strnlen(copy, sizeof copy));
  return true;
}

}  // namespace

int64_t TraceNowNs() { return TraceClock::Get().Now(); }

const char* RecordStateName(RecordState s) {
  switch (s) {
    case RecordState::kEmpty:
      return "empty";
    case RecordState::kEnqueued:
      return "enqueued";
    case RecordState::kStarted:
      return "started";
    case RecordState::kCompleted:
      return "completed";
    case RecordState::kFailed:
      return "failed";
    case RecordState::kWithdrawn:
      return "withdrawn";
  }
  return "unknown";
}

std::string DescribeRecord(const TraceRecord& r) {
  std::string s = std::string(OpName(r.op)) + "#" + std::to_string(r.seq);
  if (r.dtype != DType::kNone) s += std::string(" ") + DTypeName(r.dtype) + " x" + std::to_string(r.count);
  if (r.bytes) s += " (" + FormatBytes(static_cast<double>(r.bytes)) + ")";
  if (r.reduce != ReduceOp::kNone) s += std::string(" ") + ReduceOpName(r.reduce);
  if (HasRoot(r.op)) s += " root " + std::to_string(r.peer);
  if (r.op == Op::kSend) s += " to " + std::to_string(r.peer);
  if (r.op == Op::kRecv) s += " from " + std::to_string(r.peer);
  if (!r.callsite.empty()) s += " @" + r.callsite;
  s += std::string(" [") + RecordStateName(r.state) + (r.async ? ", async" : "") + "]";
  return s;
}

namespace {

void WriteHeader(void* base, const TraceIdentity& id, uint32_t capacity) {
  auto* h = static_cast<TraceHeaderRaw*>(base);
  std::memcpy(h->magic, kTraceMagic, sizeof h->magic);
  h->version = kTraceVersion;
  h->header_bytes = kTraceHeaderBytes;
  h->record_bytes = kTraceRecordBytes;
  h->capacity = capacity;
  h->rank = id.rank;
  h->world_size = id.world_size;
  h->local_rank = id.local_rank;
  h->pid = static_cast<int32_t>(::getpid());
  h->created_ns = TraceNowNs();
  h->heartbeat_ns = h->created_ns;
  h->phase_ns = h->created_ns;
  h->strings_bytes = kTraceStringBytes;
  h->strings_used = 0;
  CopyText(h->hostname, id.hostname);
  CopyText(h->backend, id.backend);
}

}  // namespace

Result<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path, const TraceIdentity& id,
                                                         uint32_t capacity) {
  if (capacity == 0) return InvalidArgument("trace capacity must be at least 1 record");
  size_t bytes = MappedBytes(capacity);
  void* base = nullptr;
  if (!path.empty()) {
    // Private like the rest of the log dir (the rank's umask is the user's): 0600, or 0640 when
    // `run --share-group` set DSDOCTOR_TRACE_MODE=0640.
    const char* mode_text = std::getenv("DSDOCTOR_TRACE_MODE");
    const mode_t mode = mode_text && std::string_view(mode_text) == "0640" ? 0640 : 0600;
    // Built aside and renamed over `path` once its header is written: a file already there (an
    // earlier process of the same rank) is replaced, never truncated under a reader that maps it
    // (touching a page past a truncated end is SIGBUS), and no reader ever sees a half-made file.
    const std::string aside = path + ".new." + std::to_string(::getpid());
    int fd = ::open(aside.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return ErrnoError("trace file " + path, errno);
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      int e = errno;
      ::close(fd);
      ::unlink(aside.c_str());
      return ErrnoError("trace file " + path + ": ftruncate", e);
    }
    // Reserve the blocks now: a sparse file on a full disk would SIGBUS the rank at its first write
    // to a new page. A file system without fallocate gets the zeros written instead.
    int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (rc == EOPNOTSUPP || rc == EINVAL) {
      static const char zeros[4096] = {};
      rc = 0;
      for (size_t off = 0; off < bytes && rc == 0; off += sizeof zeros)
        if (::pwrite(fd, zeros, std::min(sizeof zeros, bytes - off), static_cast<off_t>(off)) < 0) rc = errno;
    }
    if (rc != 0) {
      ::close(fd);
      ::unlink(aside.c_str());
      return ErrnoError("trace file " + path + ": reserving " + std::to_string(bytes) + " bytes", rc);
    }
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    ::close(fd);
    if (base == MAP_FAILED) {
      ::unlink(aside.c_str());
      return ErrnoError("trace file " + path + ": mmap", e);
    }
    WriteHeader(base, id, capacity);
    if (::rename(aside.c_str(), path.c_str()) != 0) {
      e = errno;
      ::munmap(base, bytes);
      ::unlink(aside.c_str());
      return ErrnoError("trace file " + path + ": rename into place", e);
    }
  } else {
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return ErrnoError("mmap anonymous trace", errno);
    WriteHeader(base, id, capacity);
  }
  log::Get("runtime")->debug("trace {} for rank {}/{}: {} records", path.empty() ? "(anonymous)" : path, id.rank,
                             id.world_size, capacity);
  return std::unique_ptr<TraceWriter>(new TraceWriter(path, base, bytes, capacity));
}

TraceWriter::TraceWriter(std::string path, void* base, size_t bytes, uint32_t capacity)
    : path_(std::move(path)),
      base_(base),
      bytes_(bytes),
      capacity_(capacity),
      slot_mask_((capacity & (capacity - 1)) == 0 ? capacity - 1 : 0),
      header_(static_cast<TraceHeaderRaw*>(base)),
      strings_(static_cast<char*>(base) + RingEnd(capacity)) {}

void TraceWriter::PutCallsite(char (&field)[kCallsiteBytes], std::string_view site) {
  site = Utf8Prefix(site, kMaxCallsiteBytes);
  if (site.size() < kCallsiteBytes) {
    CopyText(field, site);
    return;
  }
  std::string_view head = Utf8Prefix(site, kCallsiteHeadBytes);
  std::memcpy(field, head.data(), head.size());  // the rest of the field is zero
  uint32_t offset;
  if (auto it = interned_.find(site); it != interned_.end()) {
    offset = it->second;
  } else {
    if (strings_used_ + site.size() + 1 > kTraceStringBytes) return;  // the table is full: the head only
    offset = strings_used_;
    std::memcpy(strings_ + offset, site.data(), site.size());
    strings_[offset + site.size()] = '\0';
    strings_used_ += static_cast<uint32_t>(site.size() + 1);
    interned_.emplace(std::string_view(strings_ + offset, site.size()), offset);
    // The text is in place before any record names it: a reader that sees the record (its version's
    // acquire comes after this release) sees strings_used past it.
    A(header_->strings_used).store(strings_used_, std::memory_order_release);
  }
  uint16_t length = static_cast<uint16_t>(site.size());
  std::memcpy(field + kRefOffsetAt, &offset, sizeof offset);
  std::memcpy(field + kRefLengthAt, &length, sizeof length);
  std::memcpy(field + kRefMarkAt, kRefMark, sizeof kRefMark);
}

TraceWriter::~TraceWriter() {
  // The pages stay in the file; msync is not needed for other readers, only for durability.
  ::munmap(base_, bytes_);
}

TraceRecordRaw* TraceWriter::Slot(uint64_t index) const {
  auto* first = reinterpret_cast<char*>(base_) + kTraceHeaderBytes;
  // A power-of-two ring (the default) masks: a 64-bit division costs more than the rest of Slot.
  const uint64_t slot = slot_mask_ ? index & slot_mask_ : index % capacity_;
  return reinterpret_cast<TraceRecordRaw*>(first + slot * kTraceRecordBytes);
}

uint64_t TraceWriter::Begin(const OpInfo& info) {
  uint64_t index = next_++;
  TraceRecordRaw* r = Slot(index);
  const int64_t now = TraceNowNs();
  // Only the callsite is built aside (its text may go to the table first); the other words are
  // stored straight into the slot under the version: a record built whole on the stack and copied
  // was a fifth of a traced call's cost.
  alignas(8) char site[kCallsiteBytes] = {};
  PutCallsite(site, info.callsite);
  const uint64_t ids = static_cast<uint64_t>(info.comm_id) | static_cast<uint64_t>(static_cast<uint32_t>(info.peer))
                                                                 << 32;
  const uint64_t state_word = static_cast<uint64_t>(static_cast<uint8_t>(info.op)) |
                              static_cast<uint64_t>(static_cast<uint8_t>(info.dtype)) << 8 |
                              static_cast<uint64_t>(static_cast<uint8_t>(info.reduce)) << 16 |
                              static_cast<uint64_t>(RecordState::kStarted) << 24 |
                              static_cast<uint64_t>(info.async ? kRecordFlagAsync : 0) << 32;
  uint64_t v = A(r->version).load(std::memory_order_relaxed);
  A(r->version).store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  A(r->index).store(index, std::memory_order_relaxed);
  A(r->seq).store(info.seq, std::memory_order_relaxed);
  A(r->count).store(info.count, std::memory_order_relaxed);
  A(r->bytes).store(info.bytes, std::memory_order_relaxed);
  A(r->enqueued_ns).store(now, std::memory_order_relaxed);
  A(r->started_ns).store(now, std::memory_order_relaxed);
  A(r->ended_ns).store(0, std::memory_order_relaxed);
  A(*IdsWord(r)).store(ids, std::memory_order_relaxed);
  A(*StateWord(r)).store(state_word, std::memory_order_relaxed);
  StoreWords(r->callsite, site, sizeof site);
  A(r->version).store(v + 2, std::memory_order_release);
  A(header_->next_index).store(index + 1, std::memory_order_release);
  in_flight_plus1_.store(index + 1, std::memory_order_release);
  // The next record's two cache lines: a ring of 512 KiB has left the caches by the time it comes
  // round, and the stores would wait for them.
  const char* next = reinterpret_cast<const char*>(Slot(index + 1));
  __builtin_prefetch(next, 1);
  __builtin_prefetch(next + 64, 1);
  return index;
}

void TraceWriter::End(uint64_t index, RecordState state) {
  TraceRecordRaw* r = Slot(index);
  // An asynchronous call (the Python tracer's) may end after `capacity` newer records lapped its
  // slot: the slot then belongs to another record, which must stay as it is.
  if (index >= next_ || index + capacity_ < next_ || A(r->index).load(std::memory_order_relaxed) != index) return;
  // Only ended_ns and the state's word change: this thread is the slot's only writer, so it reads
  // its own words back and stores those two under the version (a hot path: every traced call).
  // Never before its start: the clock's line may move back a little when it is refitted.
  const int64_t now = std::max(TraceNowNs(), A(r->started_ns).load(std::memory_order_relaxed));
  uint64_t word = A(*StateWord(r)).load(std::memory_order_relaxed);
  std::memcpy(reinterpret_cast<char*>(&word) + kStateInWord, &state, sizeof state);
  uint64_t v = A(r->version).load(std::memory_order_relaxed);
  A(r->version).store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  A(r->ended_ns).store(now, std::memory_order_relaxed);
  A(*StateWord(r)).store(word, std::memory_order_relaxed);
  A(r->version).store(v + 2, std::memory_order_release);
  // Begin and End run on one thread at a time (or under the caller's lock): a plain compare and
  // store, not a locked compare-exchange, clears the mark; readers only load it.
  if (in_flight_plus1_.load(std::memory_order_relaxed) == index + 1)
    in_flight_plus1_.store(0, std::memory_order_release);
}

void TraceWriter::Complete(uint64_t index) { End(index, RecordState::kCompleted); }

void TraceWriter::Fail(uint64_t index, std::string_view error) {
  End(index, RecordState::kFailed);
  SetLastError(error);
}

void TraceWriter::Withdraw(uint64_t index) { End(index, RecordState::kWithdrawn); }

void TraceWriter::SetWaited(uint64_t index, bool waited) {
  TraceRecordRaw* r = Slot(index);
  if (index >= next_ || index + capacity_ < next_ || A(r->index).load(std::memory_order_relaxed) != index) return;
  uint64_t word = A(*StateWord(r)).load(std::memory_order_relaxed);
  RecordState state;
  uint32_t flags;
  std::memcpy(&state, reinterpret_cast<const char*>(&word) + kStateInWord, sizeof state);
  std::memcpy(&flags, reinterpret_cast<const char*>(&word) + kFlagsInWord, sizeof flags);
  const uint32_t wanted = waited ? flags & ~kRecordFlagAsync : flags | kRecordFlagAsync;
  if (wanted == flags || (state != RecordState::kStarted && state != RecordState::kEnqueued)) return;
  std::memcpy(reinterpret_cast<char*>(&word) + kFlagsInWord, &wanted, sizeof wanted);
  uint64_t v = A(r->version).load(std::memory_order_relaxed);
  A(r->version).store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  A(*StateWord(r)).store(word, std::memory_order_relaxed);
  A(r->version).store(v + 2, std::memory_order_release);
}

void TraceWriter::SetPhase(Phase phase) {
  A(header_->phase_ns).store(TraceNowNs(), std::memory_order_relaxed);
  A(header_->phase).store(static_cast<uint32_t>(phase), std::memory_order_release);
}

void TraceWriter::SetStep(uint64_t step) { A(header_->step).store(step, std::memory_order_release); }

void TraceWriter::Heartbeat() { A(header_->heartbeat_ns).store(TraceNowNs(), std::memory_order_release); }

void TraceWriter::SetFlags(uint32_t bits) { A(header_->flags).fetch_or(bits, std::memory_order_acq_rel); }

void TraceWriter::SetLastError(std::string_view error) {
  // Writers of the error text may be different threads (a failing collective, the watchdog): the
  // odd/even protocol needs one writer at a time, which a CAS to odd provides.
  auto ver = A(header_->error_version);
  uint64_t v = ver.load(std::memory_order_relaxed);
  while ((v & 1) || !ver.compare_exchange_weak(v, v + 1, std::memory_order_acquire)) {
    v = ver.load(std::memory_order_relaxed) & ~uint64_t{1};
  }
  std::atomic_thread_fence(std::memory_order_release);
  char text[kTraceErrorBytes] = {};
  CopyText(text, error);
  StoreWords(header_->last_error, text, sizeof text);
  ver.store(v + 2, std::memory_order_release);
}

void TraceWriter::MarkWatchdog(uint64_t index) {
  A(header_->watchdog_index).store(index, std::memory_order_relaxed);
  A(header_->watchdog_ns).store(TraceNowNs(), std::memory_order_relaxed);
  SetFlags(kTraceFlagWatchdogFired);
}

std::optional<TraceWriter::InFlight> TraceWriter::Current() const {
  for (int attempt = 0; attempt < 100; ++attempt) {
    uint64_t plus1 = in_flight_plus1_.load(std::memory_order_acquire);
    if (plus1 == 0) return std::nullopt;
    InFlight f;
    if (!ReadRecordConsistent(*Slot(plus1 - 1), &f.record, strings_, kTraceStringBytes, &header_->strings_used))
      continue;
    if (f.record.index != plus1 - 1 || f.record.ended_ns != 0) continue;  // moved on meanwhile
    return f;
  }
  return std::nullopt;
}

bool ReadRecordConsistent(const TraceRecordRaw& raw, TraceRecord* out, const char* strings, uint32_t strings_bytes,
                          const uint32_t* strings_used) {
  auto& r = const_cast<TraceRecordRaw&>(raw);
  uint64_t v1 = A(r.version).load(std::memory_order_acquire);
  if (v1 & 1) return false;
  TraceRecordRaw copy;
  LoadWords(&copy, &raw, sizeof copy);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (A(r.version).load(std::memory_order_relaxed) != v1) return false;
  out->index = copy.index;
  out->seq = copy.seq;
  out->count = copy.count;
  out->bytes = copy.bytes;
  out->enqueued_ns = copy.enqueued_ns;
  out->started_ns = copy.started_ns;
  out->ended_ns = copy.ended_ns;
  out->comm_id = copy.comm_id;
  out->peer = copy.peer;
  out->op = static_cast<Op>(copy.op);
  out->dtype = static_cast<DType>(copy.dtype);
  out->reduce = static_cast<ReduceOp>(copy.reduce);
  out->state = static_cast<RecordState>(copy.state);
  out->async = copy.flags & kRecordFlagAsync;
  if (std::memcmp(copy.callsite + kRefMarkAt, kRefMark, sizeof kRefMark) == 0) {
    uint32_t offset;
    uint16_t length;
    std::memcpy(&offset, copy.callsite + kRefOffsetAt, sizeof offset);
    std::memcpy(&length, copy.callsite + kRefLengthAt, sizeof length);
    copy.callsite[kCallsiteHeadBytes] = '\0';
    // Loaded after the record: the writer published the text before the record that names it.
    uint32_t used =
        strings && strings_used
            ? std::min(A(*const_cast<uint32_t*>(strings_used)).load(std::memory_order_acquire), strings_bytes)
            : 0;
    if (static_cast<uint64_t>(offset) + length < used) {
      out->callsite.assign(strings + offset, strnlen(strings + offset, length));
      return true;
    }
  }
  copy.callsite[kCallsiteBytes - 1] = '\0';
  out->callsite = TextOf(copy.callsite);
  return true;
}

const TraceRecord* TraceSnapshot::InFlight() const {
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (it->state == RecordState::kStarted || it->state == RecordState::kEnqueued) return &*it;
  }
  return nullptr;
}

const TraceRecord* TraceSnapshot::Last() const { return records.empty() ? nullptr : &records.back(); }

namespace {

// What a TraceReader remembers of its previous read.
struct PreviousRead {
  uint64_t& stamp;
  uint64_t& older_in_flight;
  // Records in [ended_from, ended_to) were seen ended when `ended_writer` wrote the file. An ended
  // record never returns in flight (Begin writes a new index; End only ends), so the search for an
  // older call in flight skips them: a ring of ended records is walked once, not on every read.
  uint64_t& ended_from;
  uint64_t& ended_to;
  uint64_t& ended_writer;
};

// The snapshot of a mapped trace file of `size` bytes (see ReadTrace). With `previous`, records
// are not copied when none changed since (records_unchanged).
Result<TraceSnapshot> SnapshotOf(const void* base, size_t size, const std::string& path, size_t newest,
                                 PreviousRead* previous = nullptr) {
  auto& h = *static_cast<TraceHeaderRaw*>(const_cast<void*>(base));
  auto bad = [&](const std::string& what) { return Corruption("trace file " + path + ": " + what); };
  if (std::memcmp(h.magic, kTraceMagic, sizeof h.magic) != 0) return bad("bad magic (not a dsdoctor trace)");
  if (h.version != kTraceVersion) {
    return bad("version " + std::to_string(h.version) + ", this reader knows " + std::to_string(kTraceVersion));
  }
  if (h.header_bytes != kTraceHeaderBytes || h.record_bytes != kTraceRecordBytes) {
    return bad("header_bytes " + std::to_string(h.header_bytes) + " / record_bytes " + std::to_string(h.record_bytes) +
               " differ from " + std::to_string(kTraceHeaderBytes) + " / " + std::to_string(kTraceRecordBytes));
  }
  if (h.capacity == 0 || RingEnd(h.capacity) > size) {
    return bad("capacity " + std::to_string(h.capacity) + " records needs " + std::to_string(RingEnd(h.capacity)) +
               " bytes, the file has " + std::to_string(size));
  }
  // The callsite table, when the file has one (writers older than it leave strings_bytes 0).
  const uint32_t strings_bytes = A(h.strings_bytes).load(std::memory_order_relaxed);
  const char* strings = nullptr;
  if (strings_bytes > 0 && RingEnd(h.capacity) + strings_bytes <= size)
    strings = static_cast<const char*>(base) + RingEnd(h.capacity);

  TraceSnapshot s;
  s.path = path;
  s.capacity = h.capacity;
  s.rank = h.rank;
  s.world_size = h.world_size;
  s.local_rank = h.local_rank;
  s.pid = h.pid;
  s.created_ns = h.created_ns;
  s.hostname = TextOf(h.hostname);
  s.backend = TextOf(h.backend);
  s.next_index = A(h.next_index).load(std::memory_order_acquire);
  s.heartbeat_ns = A(h.heartbeat_ns).load(std::memory_order_acquire);
  s.step = A(h.step).load(std::memory_order_acquire);
  s.phase = static_cast<Phase>(A(h.phase).load(std::memory_order_acquire));
  s.phase_ns = A(h.phase_ns).load(std::memory_order_relaxed);
  s.flags = A(h.flags).load(std::memory_order_acquire);
  s.watchdog_index = A(h.watchdog_index).load(std::memory_order_relaxed);
  s.watchdog_ns = A(h.watchdog_ns).load(std::memory_order_relaxed);
  for (int attempt = 0; attempt < 1000 && !ReadErrorConsistent(h, &s.last_error); ++attempt) {
  }

  const uint64_t capacity = s.capacity;  // as checked above; the shared header is not read again
  const uint64_t oldest = s.next_index > capacity ? s.next_index - capacity : 0;
  const uint64_t first = s.next_index - oldest > newest ? s.next_index - newest : oldest;
  const char* records = static_cast<const char*>(base) + kTraceHeaderBytes;
  auto raw_at = [&](uint64_t i) -> const TraceRecordRaw& {
    return *reinterpret_cast<const TraceRecordRaw*>(records + (i % capacity) * kTraceRecordBytes);
  };
  // A live writer leaves a record within nanoseconds; a dead one never does.
  auto copy = [&](uint64_t i, TraceRecord* rec) {
    bool ok = false;
    for (int attempt = 0;
         attempt < 64 && !(ok = ReadRecordConsistent(raw_at(i), rec, strings, strings_bytes, &h.strings_used));
         ++attempt) {
    }
    return ok && rec->index == i;  // else torn, or already overwritten by a newer lap of the ring
  };
  // Every write to a record bumps its sequence-lock version: the same writer, the same window and
  // the same versions (and the same older call in flight) mean the same records.
  auto version = [&](uint64_t i) {
    return A(const_cast<uint64_t&>(raw_at(i).version)).load(std::memory_order_acquire);
  };
  auto mix = [](uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; };
  auto window_stamp = [&] {
    uint64_t h = mix(mix(s.next_index * 0x9e3779b97f4a7c15ULL, static_cast<uint64_t>(s.pid)),
                     static_cast<uint64_t>(s.created_ns));
    for (uint64_t i = first; i < s.next_index; ++i) h = mix(h, version(i));
    return h;
  };
  auto with_older = [&](uint64_t h, uint64_t older, uint64_t older_version) {
    return older == UINT64_MAX ? h : mix(mix(h, older), older_version);
  };
  if (previous && previous->stamp) {
    const uint64_t older = previous->older_in_flight;
    if (with_older(window_stamp(), older, older == UINT64_MAX ? 0 : version(older)) == previous->stamp) {
      s.records_unchanged = true;
      return s;
    }
  }
  const uint64_t before = window_stamp();
  s.records.reserve(static_cast<size_t>(s.next_index - first) + 1);
  for (uint64_t i = first; i < s.next_index; ++i) {
    TraceRecord rec;
    if (!copy(i, &rec)) {
      ++s.torn;
      continue;
    }
    if (rec.state == RecordState::kWithdrawn) continue;
    s.records.push_back(std::move(rec));
  }
  uint64_t older = UINT64_MAX, older_version = 0;  // an older record included because it is in flight
  bool older_settled = true;                       // its version did not move while it was copied
  if (first > oldest && !s.InFlight()) {
    const uint64_t writer = mix(static_cast<uint64_t>(s.pid), static_cast<uint64_t>(s.created_ns));
    uint64_t ended_from = 0, ended_to = 0;  // ended records known from earlier reads
    if (previous && previous->ended_writer == writer) {
      ended_from = std::max(previous->ended_from, oldest);
      ended_to = std::min(previous->ended_to, first);
    }
    uint64_t lowest_ended = first;  // [lowest_ended, first) is seen ended by this read
    for (uint64_t i = first; i > oldest;) {
      if (i > ended_from && i <= ended_to) {  // i - 1 lies in the known stretch: jump over it
        i = ended_from;
        lowest_ended = i;
        continue;
      }
      --i;
      auto state = static_cast<RecordState>(
          std::atomic_ref<uint8_t>(const_cast<uint8_t&>(raw_at(i).state)).load(std::memory_order_relaxed));
      if (state != RecordState::kStarted && state != RecordState::kEnqueued) {
        lowest_ended = i;
        continue;
      }
      older_version = version(i);
      TraceRecord rec;
      if (copy(i, &rec) && (rec.state == RecordState::kStarted || rec.state == RecordState::kEnqueued)) {
        s.records.insert(s.records.begin(), std::move(rec));
        older = i;
        older_settled = version(i) == older_version;
      }
      break;
    }
    if (previous) {
      previous->ended_from = lowest_ended;
      previous->ended_to = first;
      previous->ended_writer = writer;
    }
  }
  if (previous) {
    // Remembered only when nothing moved while it was copied: a record that changed between its
    // copy and the stamp would otherwise be reported unchanged, with its old content, for good.
    const bool settled = s.torn == 0 && older_settled && window_stamp() == before;
    previous->stamp = settled ? with_older(before, older, older_version) : 0;
    previous->older_in_flight = older;
  }
  return s;
}

struct MappedFile {
  void* base = nullptr;
  size_t size = 0;
  dev_t dev = 0;
  ino_t ino = 0;
};

Result<MappedFile> MapTrace(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("trace file " + path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoError("trace file " + path + ": fstat", e);
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < sizeof(TraceHeaderRaw)) {
    ::close(fd);
    return Corruption("trace file " + path + ": " + std::to_string(size) + " bytes, shorter than its header");
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (base == MAP_FAILED) return ErrnoError("trace file " + path + ": mmap", e);
  return MappedFile{base, size, st.st_dev, st.st_ino};
}

}  // namespace

Result<TraceSnapshot> ReadTrace(const std::string& path, size_t newest) {
  DSD_ASSIGN_OR_RETURN(MappedFile m, MapTrace(path));
  auto s = SnapshotOf(m.base, m.size, path, newest);
  ::munmap(m.base, m.size);
  return s;
}

TraceReader::~TraceReader() { Unmap(); }

void TraceReader::Unmap() {
  if (base_) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

Result<TraceSnapshot> TraceReader::Read(size_t newest) {
  // A file replaced (a restarted rank) or resized is mapped afresh. While the mapped file's
  // heartbeat moves its writer lives and writes there: no stat needed (a replaced file's writer
  // is gone, so its heartbeat stops and the next read looks at the path again).
  if (base_) {
    const auto& h = *static_cast<const TraceHeaderRaw*>(base_);
    const int64_t heartbeat = A(const_cast<int64_t&>(h.heartbeat_ns)).load(std::memory_order_acquire);
    if (heartbeat != previous_heartbeat_) {
      previous_heartbeat_ = heartbeat;
      PreviousRead previous{previous_stamp_, previous_older_, ended_from_, ended_to_, ended_writer_};
      return SnapshotOf(base_, size_, path_, newest, &previous);
    }
  }
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    Unmap();
    return ErrnoError("trace file " + path_, errno);
  }
  if (!base_ || st.st_dev != dev_ || st.st_ino != ino_ || static_cast<size_t>(st.st_size) != size_) {
    Unmap();
    previous_stamp_ = 0;
    previous_older_ = UINT64_MAX;
    ended_from_ = ended_to_ = ended_writer_ = 0;
    previous_heartbeat_ = 0;
    DSD_ASSIGN_OR_RETURN(MappedFile m, MapTrace(path_));
    base_ = m.base;
    size_ = m.size;
    dev_ = m.dev;
    ino_ = m.ino;
  }
  const auto& h = *static_cast<const TraceHeaderRaw*>(base_);
  previous_heartbeat_ = A(const_cast<int64_t&>(h.heartbeat_ns)).load(std::memory_order_acquire);
  PreviousRead previous{previous_stamp_, previous_older_, ended_from_, ended_to_, ended_writer_};
  return SnapshotOf(base_, size_, path_, newest, &previous);
}

}  // namespace dsd::runtime
