// One rank of a job as its node sees it: the child process (started with the rank environment,
// stdout+stderr through a pipe that an OutputPump drains into its log file, so that the log's
// file system never fails the rank; without a pump, appended by the kernel to the file), and each
// Tick its exit, its trace ring, its /proc state and the new bytes of its log. Used by the agent
// (`dsdoctor run` over agents) and by the coordinator's direct mode. Owned and ticked by one thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "collectors/output_pump.h"
#include "collectors/proc_stat.h"
#include "common/net.h"
#include "common/run_files.h"
#include "common/subprocess.h"
#include "diagnosis/state.h"
#include "runtime/trace.h"

namespace dsd::collectors {

class RankMonitor {
 public:
  // The rank's files are rank-<r>.log, .trace and .exit in `dir` (common/run_files.h).
  RankMonitor(int rank, int local_rank, std::string node, const RunDir& dir);

  // Truncates the rank's old files and starts it; its death signal is SIGKILL when we die. With a
  // pump (borrowed; it outlives this object), its output goes through the pump's pipe.
  Status Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               const std::string& cwd, OutputPump* pump = nullptr, size_t pipe_bytes = 1u << 20);
  // Polls the exit, reads the trace and /proc, appends the log's new bytes to *new_log. Returns
  // true when the rank's exit was seen in this tick (its `.exit` file is then written).
  bool Tick(int64_t now_ns, std::string* new_log, size_t recent = 64);
  void Signal(int sig);

  // A rank started by someone else and handed over (`dsdoctor run` for MPI programs,
  // collectors/rank_exec.h): ClearFiles at the run's start, AdoptOutput when its starter asks for
  // its output pipe (the write end, for the program's stdout and stderr), Adopted with its pid once
  // it runs, AdoptedExit when its starter reports its end (polling the exit needs a parent).
  void ClearFiles();
  Result<net::Fd> AdoptOutput(OutputPump* pump, size_t pipe_bytes);
  bool output_adopted() const { return pump_ != nullptr; }
  // `parent`: the starter's pid; the program is watched only if it is still that process's child
  // (else it has ended already and its pid may be another's).
  void Adopted(pid_t pid, pid_t parent = 0);
  // exit_ns: when its starter saw it end (0: unknown, then the tick that learns of it).
  void AdoptedExit(int exit_code, int signal, int64_t exit_ns = 0);

  const diagnosis::RankState& state() const { return state_; }
  diagnosis::RankState& state() { return state_; }
  const std::string& log_path() const { return log_path_; }
  const std::string& trace_path() const { return trace_path_; }
  // The newest failed write of ours into the log dir ("rank-3.exit: No space left on device");
  // the rank is watched on regardless.
  const std::string& write_error() const { return write_error_; }
  // Its output's journey to the log (all zero without a pump).
  OutputPump::Stats output() const { return pump_ ? pump_->stats(pump_index_) : OutputPump::Stats{}; }

 private:
  diagnosis::RankState state_;
  std::string log_path_, trace_path_, exit_path_;
  std::string write_error_;
  std::optional<Subprocess> proc_;
  std::optional<std::pair<int, int>> adopted_exit_;  // an adopted rank's (exit code, signal), once told
  int64_t adopted_exit_ns_ = 0;
  // An adopted rank's pidfd (Linux 5.3+): its end is seen even before its starter reaps it, so a
  // signal never reaches a process that took over its pid. Invalid: signals go by pid (older
  // kernels) unless `adopted_unsafe_` (it had ended before we looked).
  net::Fd adopted_pidfd_;
  bool adopted_unsafe_ = false;
  OutputPump* pump_ = nullptr;
  size_t pump_index_ = 0;
  runtime::TraceReader trace_;
  // The rank's /proc files and its log stay open while it runs (3 descriptors per rank: the agent
  // and direct mode raise the open-file limit for them).
  std::optional<ProcStatReader> proc_stat_;  // the rank's /proc files, open while it runs
  net::Fd log_fd_;                           // its log, open from the first tick that finds it
  size_t log_offset_ = 0;
  uint64_t last_cpu_ticks_ = 0, ref_ticks_ = 0;
  // The tree below the rank: its CPU ticks at the walk before last and at the last walk, when that
  // was, and the time between the two.
  uint64_t descendant_from_ = 0, descendant_to_ = 0;
  int64_t descendants_read_ns_ = 0, descendant_span_ns_ = 0;
  int64_t last_sample_ns_ = 0, ref_ns_ = 0;
};

// An exited rank's status as a shell reports it (rank-<r>.exit): the code, or 128 + the signal.
inline int ShellExitStatus(const diagnosis::RankState& r) { return r.signal ? 128 + r.signal : r.exit_code; }

// Rank output made safe for JSON strings: bytes outside printable ASCII (and \n, \t) become '?'.
// Only the streamed copy is changed; the log file keeps the bytes.
std::string SanitizeForStream(std::string_view bytes);

// Raises this process's open-file limit for watching `ranks` ranks at once (each RankMonitor holds
// its rank's log and two /proc files open). Returns a warning to log when the limit stays too low
// for them, "" otherwise.
std::string RaiseOpenFileLimitFor(size_t ranks);

}  // namespace dsd::collectors
