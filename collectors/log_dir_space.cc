#include "collectors/log_dir_space.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <sstream>

#include "common/file.h"
#include "common/run_files.h"

namespace dsd::collectors {

namespace {

// mountinfo escapes space, tab, newline and backslash in paths as \ooo.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    auto octal = [&](size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '7'; };
    if (s[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out += static_cast<char>(((s[i + 1] - '0') << 6 | (s[i + 2] - '0') << 3 | (s[i + 3] - '0')) & 0xff);
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool UnderMount(const std::string& path, const std::string& mount) {
  if (mount == "/") return true;
  return path.compare(0, mount.size(), mount) == 0 && (path.size() == mount.size() || path[mount.size()] == '/');
}

}  // namespace

void MountOf(std::string_view mountinfo, const std::string& path, std::string* mount, std::string* fs_type) {
  // Each line: id parent major:minor root mount-point options [optional fields…] - type source super-options
  std::istringstream in{std::string(mountinfo)};
  std::string line;
  size_t best = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    if (!(f >> id >> parent >> dev >> root >> point)) continue;
    std::string word, type;
    while (f >> word && word != "-") {
    }
    if (word != "-" || !(f >> type)) continue;
    std::string mp = Unescape(point);
    // The later of two equal mount points is the one on top.
    if (UnderMount(path, mp) && mp.size() >= best) {
      best = mp.size();
      *mount = mp;
      *fs_type = type;
    }
  }
}

Result<diagnosis::LogDirStatus> ProbeLogDir(const std::string& dir) {
  diagnosis::LogDirStatus s;
  s.path = dir;
  struct statvfs v {};
  if (::statvfs(dir.c_str(), &v) != 0) return ErrnoError("statvfs " + dir, errno);
  const uint64_t unit = v.f_frsize ? v.f_frsize : v.f_bsize;
  // Root may write into the blocks reserved for it; everyone else stops at f_bavail.
  s.free_bytes = static_cast<uint64_t>(::geteuid() == 0 ? v.f_bfree : v.f_bavail) * unit;
  s.total_bytes = static_cast<uint64_t>(v.f_blocks) * unit;
  std::error_code ec;
  std::string resolved = std::filesystem::weakly_canonical(dir, ec).string();
  if (ec || resolved.empty()) resolved = dir;
  if (auto info = ReadFile("/proc/self/mountinfo", 4u << 20); info.ok()) MountOf(*info, resolved, &s.mount, &s.fs_type);
  return s;
}

void LogDirMonitor::NoteWriteError(const std::string& what) {
  if (std::find(write_errors_.begin(), write_errors_.end(), what) != write_errors_.end()) return;
  if (write_errors_.size() >= 8) write_errors_.erase(write_errors_.begin());
  write_errors_.push_back(what);
  errors_changed_ = true;
}

void LogDirMonitor::NoteOutput(int rank, uint64_t held, uint64_t lost, const std::string& error) {
  auto it = output_.find(rank);
  if (held == 0 && lost == 0) {
    if (it != output_.end() && (it->second.held_bytes || it->second.lost_bytes)) errors_changed_ = true;
    if (it != output_.end()) output_.erase(it);
    return;
  }
  diagnosis::OutputLoss now{rank, held, lost};
  if (it == output_.end() || it->second.held_bytes != held || it->second.lost_bytes != lost) {
    // Every change of what is lost is told at once; bytes that wait, once a second with the rest.
    if (it == output_.end() || it->second.lost_bytes != lost) errors_changed_ = true;
    output_[rank] = now;
  }
  if (!error.empty()) NoteWriteError(RankFileName(rank, RankFile::kLog) + ": " + error);
}

std::optional<diagnosis::LogDirStatus> LogDirMonitor::Poll(int64_t now_ns) {
  if (now_ns < next_probe_ns_ && !errors_changed_) return std::nullopt;
  next_probe_ns_ = now_ns + 1'000'000'000LL;
  errors_changed_ = false;
  auto space = ProbeLogDir(dir_);
  if (!space.ok()) return std::nullopt;
  space->node = node_;
  space->write_errors = write_errors_;
  for (const auto& [rank, loss] : output_) space->output.push_back(loss);
  return std::move(*space);
}

}  // namespace dsd::collectors
