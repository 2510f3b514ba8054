// How full the file system under a log dir is: statvfs for the space, /proc/self/mountinfo for
// which file system it is. `run` reports it from every node so that a full disk is named
// (LOG_DIR_FULL) rather than showing up as ranks that died or stopped printing.
// Free functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "diagnosis/state.h"

namespace dsd::collectors {

// Space and identity of the file system holding `dir`. `node` and `write_errors` are left empty.
Result<diagnosis::LogDirStatus> ProbeLogDir(const std::string& dir);

// The mount point and type of the mount that holds `path` (an absolute, resolved path), from the
// text of a mountinfo file: the longest mount point that is a path prefix of `path`. Pure.
void MountOf(std::string_view mountinfo, const std::string& path, std::string* mount, std::string* fs_type);

// What one node reports about its log dir during a run: the file system, at most once a second or
// sooner when a new write failed, and the newest distinct failed writes (at most 8). Used by the
// agent and by `run --direct`. Owned by one thread.
class LogDirMonitor {
 public:
  LogDirMonitor(std::string dir, std::string node) : dir_(std::move(dir)), node_(std::move(node)) {}
  // A write of ours into the log dir failed ("rank-3.exit: No space left on device").
  void NoteWriteError(const std::string& what);
  // A rank's output that waits in memory for the log's file system, and what was lost of it; a
  // change makes the next Poll report at once.
  void NoteOutput(int rank, uint64_t held, uint64_t lost, const std::string& error);
  // A fresh report when one is due at `now_ns` (a monotonic or trace clock), else nothing.
  std::optional<diagnosis::LogDirStatus> Poll(int64_t now_ns);

 private:
  std::string dir_, node_;
  std::vector<std::string> write_errors_;
  std::map<int, diagnosis::OutputLoss> output_;  // ranks whose output waits or was lost
  bool errors_changed_ = false;
  int64_t next_probe_ns_ = 0;
};

}  // namespace dsd::collectors
