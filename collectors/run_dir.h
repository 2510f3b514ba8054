// What a run leaves on disk, read back for `dsdoctor analyze` (docs/run.md):
//   <dir>/rank-<r>.log     the rank's stdout+stderr
//   <dir>/rank-<r>.trace   its trace ring (bundled runtime only; docs/trace.md)
//   <dir>/rank-<r>.exit    its exit status as a shell reports it ("0", "1", "139" = 128+SIGSEGV),
//                          written by examples/run_local.sh; or
//   <dir>/rank-<r>.stack   the stack `dsdoctor run` captured when the rank hung ("# tool" first)
//   <dir>/run.json         the coordinator's manifest (ranks, nodes, exits, thresholds; when
//                          "stopped_by_dsdoctor" is set, the .exit of a rank it saw running is our
//                          signal, so the rank is described as it was before it)
// Also the conversion of a trace snapshot into the engine's RankState, shared with the agent.
// Free functions; thread-safe.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"
#include "diagnosis/state.h"
#include "runtime/trace.h"

namespace dsd::collectors {

// Newest records passed to the engine per rank (mismatch and straggler rules look this far back).
inline constexpr size_t kRecentRecords = 64;
// Ranks a log dir may claim (run.json's world_size, rank-<r> file names).
inline constexpr int kMaxRanks = 1 << 20;

// Fills the trace fields of `rank` from a snapshot (one with records_unchanged updates the header
// fields and leaves the calls as the previous snapshot set them).
void ApplyTrace(const runtime::TraceSnapshot& trace, diagnosis::RankState* rank, size_t recent = kRecentRecords);
diagnosis::OpRecord ToOpRecord(const runtime::TraceRecord& r);

struct RunDirOptions {
  double stall_after_s = 60;
  double hang_after_s = 5;
  // The analysis's wall clock, CLOCK_REALTIME ns (0: the clock now): how old the traces' heartbeats are.
  int64_t now_ns = 0;
  // Standard input or a FIFO that stays open and silent for 2 s: called once with its name, so the
  // person knows analyze waits for its writer (LogScanOptions::on_idle).
  std::function<void(const std::string&)> on_idle;
};

// Reads every rank's log, trace and exit status. Errors: the folder is missing or holds no rank
// files; a corrupt trace or run.json names the file (a corrupt trace is reported, not fatal:
// the rank is analysed from its log). Logs are streamed (log_scan.h): any size, bounded memory.
Result<diagnosis::JobState> LoadRunDir(const std::string& dir, const RunDirOptions& options,
                                       std::vector<std::string>* warnings);

// What `dsdoctor analyze PATH…` reads: one run dir, or any number of log files ("-" is standard
// input) — per-rank logs (rank-<r>.log) or combined logs of any launcher, split per rank by their
// prefixes. Errors: a path that cannot be opened (named), or a dir mixed with other paths.
Result<diagnosis::JobState> LoadLogs(const std::vector<std::string>& paths, const RunDirOptions& options,
                                     std::vector<std::string>* warnings);

// Adds what combined logs beside a run dir say (a Slurm job's output file, with slurmstepd's own
// lines) to `job`: their events, ranks from their own prefixes, hosts kept. Errors name the file.
Status AddCombinedLogs(const std::vector<std::string>& paths, diagnosis::JobState* job,
                       std::vector<std::string>* warnings);

}  // namespace dsd::collectors
