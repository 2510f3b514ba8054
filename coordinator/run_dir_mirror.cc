#include "coordinator/run_dir_mirror.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/file.h"
#include "common/log.h"

namespace dsd::coordinator {

RunDirMirror::RunDirMirror(RunDir dir, std::string node)
    : dir_(std::move(dir)), monitor_(dir_.path(), std::move(node)) {}

void RunDirMirror::Failed(const std::string& what) {
  log::Get("run")->warn("run dir {}: {}", dir_.path(), what);
  monitor_.NoteWriteError(what);
}

void RunDirMirror::AppendLog(int rank, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  used_ = true;
  auto it = logs_.find(rank);
  if (it == logs_.end()) {
    const std::string path = dir_.RankLog(rank);
    net::Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600));
    if (!fd.valid())
      Failed(RankFileName(rank, RankFile::kLog) + ": " + std::strerror(errno) +
             " (the node keeps its own copy of the rank's output)");
    it = logs_.emplace(rank, std::move(fd)).first;
  }
  if (!it->second.valid()) {
    lost_[rank] += bytes.size();
    return;
  }
  while (!bytes.empty()) {
    const ssize_t n = ::write(it->second.get(), bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (lost_[rank] == 0)  // once per rank: the count says the rest
        Failed(RankFileName(rank, RankFile::kLog) + ": " + std::strerror(n < 0 ? errno : ENOSPC) +
               " (the node keeps its own copy of the rank's output)");
      lost_[rank] += bytes.size();
      return;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void RunDirMirror::Write(const agent::FileMessage& piece) {
  std::lock_guard<std::mutex> lock(mu_);
  used_ = true;
  std::string& content = partial_[{piece.rank, piece.kind}];
  if (piece.offset == 0) content.clear();  // a new file (a second stack, say)
  if (content.size() != piece.offset) {
    Failed(RankFileName(piece.rank, piece.kind) + ": a piece at byte " + std::to_string(piece.offset) + " after " +
           std::to_string(content.size()) + " bytes; the file is dropped");
    partial_.erase({piece.rank, piece.kind});
    return;
  }
  content += piece.bytes;
  if (!piece.end) return;
  content.resize(piece.size, '\0');  // the zeros the node did not send (a ring's unused slots)
  if (Status st = WriteFileAtomic(dir_.RankPath(piece.rank, piece.kind), content); !st.ok())
    Failed(RankFileName(piece.rank, piece.kind) + ": " + st.message());
  partial_.erase({piece.rank, piece.kind});
}

std::optional<diagnosis::LogDirStatus> RunDirMirror::Poll(int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!used_) return std::nullopt;
  return monitor_.Poll(now_ns);
}

uint64_t RunDirMirror::lost_log_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& [rank, bytes] : lost_) n += bytes;
  return n;
}

}  // namespace dsd::coordinator
