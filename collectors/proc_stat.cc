#include "collectors/proc_stat.h"

#include <dirent.h>

#include <cstdlib>
#include <vector>

#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"

namespace dsd::collectors {

Result<ProcStat> ParseProcStat(const std::string& content) {
  size_t open = content.find('(');
  size_t close = content.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return Corruption("/proc stat: no '(comm)' field");
  }
  ProcStat s;
  try {
    s.pid = static_cast<pid_t>(std::stol(content.substr(0, open)));
  } catch (...) {
    return Corruption("/proc stat: bad pid field");
  }
  s.comm = content.substr(open + 1, close - open - 1);
  auto f = SplitWhitespace(Trim(std::string_view(content).substr(close + 1)));
  // After comm: state(3) ppid(4) ... utime(14) stime(15) ... num_threads(20); f[0] is field 3.
  if (f.size() < 18 || f[0].size() != 1) return Corruption("/proc stat: too few fields");
  try {
    s.state = f[0][0];
    s.ppid = static_cast<pid_t>(std::stol(f[1]));
    s.utime_ticks = std::stoull(f[11]);
    s.stime_ticks = std::stoull(f[12]);
    s.num_threads = std::stoull(f[17]);
  } catch (...) {
    return Corruption("/proc stat: non-numeric field");
  }
  return s;
}

Result<ProcStat> ReadProcStat(pid_t pid) {
  std::string base = "/proc/" + std::to_string(pid);
  DSD_ASSIGN_OR_RETURN(std::string content, ReadFile(base + "/stat", 8192));
  DSD_ASSIGN_OR_RETURN(ProcStat s, ParseProcStat(content));
  if (auto wchan = ReadFile(base + "/wchan", 256); wchan.ok()) s.wchan = std::string(Trim(*wchan));
  log::Get("collectors")->trace("pid {} state {} cpu {} wchan {}", pid, s.state, s.cpu_ticks(), s.wchan);
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
      auto st = ReadProcStat(p);
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
