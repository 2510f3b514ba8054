// /proc/<pid>/stat and wchan: is a rank running, sleeping in the kernel, or stopped, and is its
// CPU time growing (spinning) or flat (blocked)? ReadProcStat touches /proc; ParseProcStat is pure.
// Thread-safe free functions.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/net.h"
#include "common/status.h"

namespace dsd::collectors {

struct ProcStat {
  pid_t pid = 0;
  std::string comm;  // executable name as the kernel keeps it (may contain spaces or ')')
  char state = '?';  // R running, S sleeping, D disk sleep, T stopped, t traced, Z zombie
  pid_t ppid = 0;
  uint64_t utime_ticks = 0, stime_ticks = 0;
  uint64_t num_threads = 0;
  std::string wchan;  // kernel function it sleeps in ("" or "0" when running)
  uint64_t cpu_ticks() const { return utime_ticks + stime_ticks; }
};

// Parses the content of /proc/<pid>/stat. comm is delimited by the first '(' and the *last* ')'.
Result<ProcStat> ParseProcStat(std::string_view content);
Result<ProcStat> ReadProcStat(pid_t pid, bool with_wchan = true);

// ReadProcStat for a process read again and again (a rank, 5 times a second): its stat and wchan
// files stay open and are re-read with pread, so a read costs no path lookups; the descriptors
// belong to that process, so a reused pid is never read in its place. wchan is read only when the
// process is not running, and for a process that sleeps on, again when its state changed or after
// a second. Not thread-safe.
class ProcStatReader {
 public:
  explicit ProcStatReader(pid_t pid);
  // NotFound once the process is gone (or was never there).
  Result<ProcStat> Read();
  pid_t pid() const { return pid_; }
  bool open() const { return stat_.valid(); }  // false when its stat file could not be opened

 private:
  pid_t pid_;
  net::Fd stat_, wchan_;
  char last_state_ = '?';
  std::string last_wchan_;
  int64_t wchan_read_ns_ = 0;  // CLOCK_MONOTONIC_COARSE
};

const char* DescribeProcState(char state);  // "running", "sleeping", ...

// CPU ticks of all descendants of `pid` (DataLoader workers, compiler children; not `pid` itself,
// whose stat the caller has read already), found through /proc/<pid>/task/<tid>/children; at most
// `max_processes` are read. Processes that end meanwhile are skipped (their time is gone from the
// sum, which a caller sees as no growth, never as growth).
uint64_t DescendantsCpuTicks(pid_t pid, size_t max_processes = 256);

}  // namespace dsd::collectors
