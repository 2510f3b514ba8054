// Streams log files of any size through the classifier in bounded memory, splitting combined
// logs into per-rank streams by their launcher prefixes (log_prefix.h), for `dsdoctor analyze`.
//
// Per input: blocks of a few MiB are read; a pre-scanner (log_matcher.h) finds the few lines any
// pattern could match and only those (plus every line of a stream while a traceback or table is
// open) are parsed and classified. Lines longer than max_line_bytes are classified by their start.
// Events carry file:line, byte offset, node, pid and time; each stream keeps at most
// max_events_per_kind events of one kind (the rest are counted and reported as a warning).
// At Finish() streams are resolved to ranks: the prefix's rank, the file's own rank
// (rank-<r>.log), NCCL's "comm … rank R nranks N" line, a watchdog's [Rank R] of the default
// group, or another stream of the same host and pid / local rank. What stays unattributed is kept
// with rank -1 (job-level evidence), never dropped.
// Not thread-safe; one scanner per analysis.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "diagnosis/state.h"

namespace dsd::collectors {

struct LogInput {
  std::string path;  // "-" reads standard input
  int rank = -1;     // the file is this rank's own log (rank-<r>.log): unprefixed lines are that rank's
  std::string name;  // how evidence names the file ("" = path; "<stdin>" for "-")
  // The launcher's output of dsdoctor's own agents (a run dir's launcher.log): srun's "task N" there is
  // agent N (a node), not rank N.
  bool agents = false;
};

struct LogScanOptions {
  size_t block_bytes = 4 << 20;
  size_t max_line_bytes = 64 << 10;
  size_t max_events_per_kind = 32;  // per stream and kind
  size_t max_events = 100000;       // in all: hostile logs (a new "host" per line) stay bounded
  size_t max_streams = 1 << 16;
  // Called once per input that is not a regular file (standard input, a FIFO) when nothing has come
  // from it for idle_notice while it stays open: a writer that never closes it would otherwise keep
  // analyze waiting without a word. Its argument is the input's name.
  std::function<void(const std::string&)> on_idle;
  Duration idle_notice = std::chrono::seconds(2);
};

struct RankLogFacts {
  std::string host;
  std::string nccl_version;
  std::string version_where;  // file:line of the version line
};

struct LogScanResult {
  std::vector<diagnosis::LogEvent> events;  // in input order; rank -1 when no prefix or context names it
  int world_size = 0;                       // the largest rank or world size the logs name
  std::map<int, RankLogFacts> ranks;        // every rank that printed a line that was looked at
  std::vector<std::string> warnings;
  // Counters for docs/performance.md and --verbose output.
  uint64_t bytes = 0, lines = 0, candidate_lines = 0;
  std::string engine;  // pre-scanner: "hyperscan" | "re2"
};

class LogScanner {
 public:
  explicit LogScanner(LogScanOptions options = {});
  ~LogScanner();
  LogScanner(const LogScanner&) = delete;
  LogScanner& operator=(const LogScanner&) = delete;

  // Reads the whole input. Errors name the file (cannot open, read error); a partial read keeps
  // what was read.
  // The total size of the inputs about to be added, when known: picks the faster pre-scanner
  // for big inputs from the start.
  void ExpectBytes(uint64_t bytes);
  Status Add(const LogInput& input);
  Status AddFd(int fd, const LogInput& input);
  void AddText(std::string_view text, const LogInput& input);
  LogScanResult Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsd::collectors
