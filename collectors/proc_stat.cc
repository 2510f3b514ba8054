#include "collectors/proc_stat.h"

#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"

namespace dsd::collectors {

namespace {

int64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // a vDSO read: no system call
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

// One decimal field, all of it; false when it is not one.
template <typename T>
bool ParseNumber(std::string_view text, T* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

Result<ProcStat> ParseProcStat(std::string_view content) {
  size_t open = content.find('(');
  size_t close = content.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return Corruption("/proc stat: no '(comm)' field");
  }
  ProcStat s;
  if (!ParseNumber(Trim(content.substr(0, open)), &s.pid)) return Corruption("/proc stat: bad pid field");
  s.comm = std::string(content.substr(open + 1, close - open - 1));
  // After comm: state(3) ppid(4) ... utime(14) stime(15) ... num_threads(20); f[0] is field 3.
  std::string_view f[18];
  size_t n = 0;
  std::string_view rest = content.substr(close + 1);
  while (n < 18) {
    size_t b = rest.find_first_not_of(" \t\n");
    if (b == std::string_view::npos) break;
    size_t e = rest.find_first_of(" \t\n", b);
    f[n++] = rest.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
    if (e == std::string_view::npos) break;
    rest = rest.substr(e);
  }
  if (n < 18 || f[0].size() != 1) return Corruption("/proc stat: too few fields");
  s.state = f[0][0];
  if (!ParseNumber(f[1], &s.ppid) || !ParseNumber(f[11], &s.utime_ticks) || !ParseNumber(f[12], &s.stime_ticks) ||
      !ParseNumber(f[17], &s.num_threads))
    return Corruption("/proc stat: non-numeric field");
  return s;
}

Result<ProcStat> ReadProcStat(pid_t pid, bool with_wchan) {
  std::string base = "/proc/" + std::to_string(pid);
  DSD_ASSIGN_OR_RETURN(std::string content, ReadFile(base + "/stat", 8192));
  DSD_ASSIGN_OR_RETURN(ProcStat s, ParseProcStat(content));
  if (!with_wchan) return s;
  if (auto wchan = ReadFile(base + "/wchan", 256); wchan.ok()) s.wchan = std::string(Trim(*wchan));
  log::Get("collectors")->trace("pid {} state {} cpu {} wchan {}", pid, s.state, s.cpu_ticks(), s.wchan);
  return s;
}

ProcStatReader::ProcStatReader(pid_t pid) : pid_(pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  stat_ = net::Fd(::open((base + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
  wchan_ = net::Fd(::open((base + "/wchan").c_str(), O_RDONLY | O_CLOEXEC));
}

Result<ProcStat> ProcStatReader::Read() {
  if (!stat_.valid()) return NotFound("/proc/" + std::to_string(pid_) + "/stat: not open");
  char buf[4096];
  ssize_t n = ::pread(stat_.get(), buf, sizeof buf, 0);
  // The process is gone (reaped: ESRCH) — the descriptor names that process, never a reused pid.
  if (n <= 0) return NotFound("/proc/" + std::to_string(pid_) + "/stat: " + (n < 0 ? std::strerror(errno) : "empty"));
  DSD_ASSIGN_OR_RETURN(ProcStat s, ParseProcStat(std::string_view(buf, static_cast<size_t>(n))));
  // A running task sleeps nowhere: the kernel shows "0" without our reading it. A task that sleeps
  // on is read again when its state changes or a second has passed (where a rank waits changes
  // with what it waits for, which takes seconds to matter).
  const int64_t now = MonotonicNs();
  if (s.state == 'R') {
    s.wchan = "0";
  } else if (s.state == last_state_ && now - wchan_read_ns_ < 1'000'000'000 && !last_wchan_.empty()) {
    s.wchan = last_wchan_;
  } else if (wchan_.valid()) {
    char w[256];
    ssize_t m = ::pread(wchan_.get(), w, sizeof w, 0);
    if (m > 0) s.wchan = std::string(Trim(std::string_view(w, static_cast<size_t>(m))));
    wchan_read_ns_ = now;
  }
  last_state_ = s.state;
  last_wchan_ = s.wchan;
  return s;
}

const char* DescribeProcState(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "uninterruptible sleep";
    case 'T':
      return "stopped";
    case 't':
      return "traced";
    case 'Z':
      return "zombie";
    case 'X':
      return "dead";
    case 'I':
      return "idle";
  }
  return "unknown";
}

uint64_t DescendantsCpuTicks(pid_t pid, size_t max_processes) {
  uint64_t total = 0;
  std::vector<pid_t> todo{pid};
  size_t seen = 0;
  while (!todo.empty() && seen < max_processes) {
    pid_t p = todo.back();
    todo.pop_back();
    ++seen;
    if (p != pid) {
      auto st = ReadProcStat(p, /*with_wchan=*/false);
      if (!st.ok()) continue;
      total += st->cpu_ticks();
    }
    std::string task_dir = "/proc/" + std::to_string(p) + "/task";
    DIR* d = ::opendir(task_dir.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      auto children = ReadFile(task_dir + "/" + e->d_name + "/children", 1 << 16);
      if (!children.ok()) continue;
      for (const auto& c : SplitWhitespace(*children)) {
        char* end = nullptr;
        long v = std::strtol(c.c_str(), &end, 10);
        if (end && *end == '\0' && v > 0) todo.push_back(static_cast<pid_t>(v));
      }
    }
    ::closedir(d);
  }
  return total;
}

}  // namespace dsd::collectors
