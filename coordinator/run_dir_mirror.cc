#include "coordinator/run_dir_mirror.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"

namespace dsd::coordinator {

namespace {

// A file's modification time, or nullopt when it does not exist.
std::optional<timespec> ModifiedAt(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st.st_mtim;
}

bool NotOlder(const timespec& a, const timespec& b) {
  return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec >= b.tv_nsec);
}

}  // namespace

RunDirMirror::RunDirMirror(RunDir dir, std::string node)
    : dir_(std::move(dir)), monitor_(dir_.path(), std::move(node)) {}

void RunDirMirror::Failed(const std::string& what) {
  log::Get("run")->warn("run dir {}: {}", dir_.path(), what);
  monitor_.NoteWriteError(what);
}

bool RunDirMirror::Adopt(const std::vector<int>& ranks) {
  const auto run_started = ModifiedAt(dir_.RunId());
  if (run_started)
    for (int r : ranks)
      if (auto log = ModifiedAt(dir_.RankLog(r)); log && NotOlder(*log, *run_started)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  used_ = true;
  for (int r : ranks) {
    for (RankFile kind : {RankFile::kTrace, RankFile::kExit, RankFile::kStack})
      ::unlink(dir_.RankPath(r, kind).c_str());
    // The umask decides the mode, as for a node's own logs (0600, 0640 with --share-group).
    const std::string path = dir_.RankLog(r);
    net::Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644));
    if (!fd.valid())
      Failed(RankFileName(r, RankFile::kLog) + ": " + std::strerror(errno) +
             " (the node keeps its own copy of the rank's output)");
    logs_[r] = std::move(fd);
  }
  return true;
}

void RunDirMirror::Resume(const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lock(mu_);
  used_ = true;
  for (int r : ranks) {
    if (logs_.count(r)) continue;
    const std::string path = dir_.RankLog(r);
    net::Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!fd.valid())
      Failed(RankFileName(r, RankFile::kLog) + ": " + std::strerror(errno) +
             " (the node keeps its own copy of the rank's output)");
    logs_[r] = std::move(fd);
  }
}

void RunDirMirror::AppendLog(int rank, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(rank);
  if (it == logs_.end() || !it->second.valid()) {
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
  std::string content;  // the whole file, written below without the lock (it fsyncs)
  {
    std::lock_guard<std::mutex> lock(mu_);
    used_ = true;
    const auto key = std::make_pair(piece.rank, piece.kind);
    std::string& held = partial_[key];
    if (piece.offset == 0) held.clear();  // a new file (a second stack, say)
    if (held.size() != piece.offset || piece.offset + piece.bytes.size() > agent::kMaxFileBytes) {
      Failed(RankFileName(piece.rank, piece.kind) + ": a piece at byte " + std::to_string(piece.offset) + " after " +
             std::to_string(held.size()) + " bytes; the file is dropped");
      partial_.erase(key);
      return;
    }
    held += piece.bytes;
    if (!piece.end) return;
    content = std::move(held);
    partial_.erase(key);
  }
  content.resize(piece.size, '\0');  // the zeros the node did not send (a ring's unused slots)
  std::string path = dir_.RankPath(piece.rank, piece.kind);
  if (piece.kind == RankFile::kFlightRecorder) {
    path = dir_.FlightRecorderDump(piece.incident, piece.rank);
    std::error_code ec;
    std::filesystem::create_directories(dir_.FlightRecorderIncident(piece.incident), ec);
  }
  if (Status st = WriteFileAtomic(path, content); !st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    Failed(path + ": " + st.message());
  }
}

std::optional<diagnosis::LogDirStatus> RunDirMirror::Poll(int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!used_) return std::nullopt;
  auto status = monitor_.Poll(now_ns);
  if (status && !lost_.empty()) {
    uint64_t bytes = 0;
    std::vector<int> ranks;
    for (const auto& [rank, n] : lost_) bytes += n, ranks.push_back(rank);
    status->write_errors.push_back(FormatBytes(static_cast<double>(bytes)) + " of the output of " +
                                   diagnosis::FormatRanks(ranks) +
                                   " not copied here (each node keeps its own rank-<r>.log)");
  }
  return status;
}

uint64_t RunDirMirror::lost_log_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& [rank, bytes] : lost_) n += bytes;
  return n;
}

}  // namespace dsd::coordinator
