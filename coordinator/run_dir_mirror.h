// The coordinator's copy of the rank files of nodes that do not share its run dir (docs/run.md
// "Nodes that share nothing"): each rank's output as it streams in, and the exit status, stack and
// trace ring the node sends (agent/run_protocol.h FileMessage), so the coordinator's run dir alone
// gives `analyze` and the final report what a shared run dir would. A write that fails costs that
// write, never the job: it is counted (bytes not written) and reported as a log dir error of the
// coordinator's node (LOG_DIR_FULL on ENOSPC).
// Thread-safe: the agents' reader threads call it at once (each for its own ranks); disk writes of
// whole files happen outside its lock.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/run_protocol.h"
#include "collectors/log_dir_space.h"
#include "common/net.h"
#include "common/run_files.h"
#include "diagnosis/state.h"

namespace dsd::coordinator {

class RunDirMirror {
 public:
  // `node`: the coordinator's own node name in reports.
  RunDirMirror(RunDir dir, std::string node);

  // A node that did not find the run's run.id says so: its `ranks` are to be copied here. False when
  // their logs turn out to be here after all, made since run.id (a shared file system that was slow
  // to show run.id to the node): then nothing is copied, and the node's own files are left alone.
  // Otherwise the ranks' files of an earlier run in this dir are removed and empty logs started, so
  // nothing stale is read as this run's and a rank that never prints still has its log.
  bool Adopt(const std::vector<int>& ranks);
  // Ranks of a run taken over (`dsdoctor attach`, or a link made again): their logs here are
  // appended to, never restarted; ranks copied already are left as they are.
  void Resume(const std::vector<int>& ranks);
  // Appends a rank's output to rank-<r>.log.
  void AppendLog(int rank, std::string_view bytes);
  // One piece of a rank's file; the file replaces any older one, atomically, with its last piece.
  void Write(const agent::FileMessage& piece);
  // The coordinator's run dir file system with the writes that failed and the output not copied,
  // when a report is due (once a second) and anything was copied; nothing otherwise.
  std::optional<diagnosis::LogDirStatus> Poll(int64_t now_ns);
  // Bytes of rank output not written so far (a full disk).
  uint64_t lost_log_bytes() const;

 private:
  void Failed(const std::string& what);  // mu_ held

  const RunDir dir_;
  mutable std::mutex mu_;
  std::map<int, net::Fd> logs_;                              // open for appending
  std::map<std::pair<int, RankFile>, std::string> partial_;  // files whose last piece has not come
  std::map<int, uint64_t> lost_;                             // by rank: output bytes not written
  collectors::LogDirMonitor monitor_;
  bool used_ = false;
};

}  // namespace dsd::coordinator
