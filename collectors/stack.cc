#include "collectors/stack.h"

#include <unistd.h>

#include <regex>
#include <sstream>

#include "common/process.h"
#include "common/strings.h"

namespace dsd::collectors {
namespace {

bool OnPath(const std::string& tool) {
  const char* path = std::getenv("PATH");
  for (const auto& dir : Split(path ? path : "/usr/bin:/bin", ':'))
    if (!dir.empty() && ::access((dir + "/" + tool).c_str(), X_OK) == 0) return true;
  return false;
}

// Frames that say nothing about where the program waits.
bool Boring(const std::string& f) {
  static const char* kSkip[] = {"__futex_abstimed_wait",
                                "futex_wait",
                                "__GI___futex",
                                "__lll_lock_wait",
                                "pthread_cond_wait",
                                "pthread_cond_timedwait",
                                "pthread_cond_clockwait",
                                "___pthread_cond",
                                "__pthread_clockjoin",
                                "__GI___poll",
                                "__poll",
                                "epoll_wait",
                                "__libc_recv",
                                "__libc_read",
                                "nanosleep",
                                "clock_nanosleep",
                                "__GI___clock_nanosleep",
                                "std::condition_variable::wait",
                                "__syscall_cancel",
                                "syscall"};
  for (const char* s : kSkip)
    if (f.find(s) != std::string::npos) return true;
  return f == "??" || f.empty();
}

}  // namespace

std::string ReduceStack(const std::string& text, size_t frames) {
  // eu-stack: "#0  0x00007f… func" ; gdb: "#0  0x… in func (args) at file:line" or "#0  func (…)";
  // py-spy: "    func (file.py:12)" under "Thread 0x… (active)".
  static const std::regex kNative(R"(^#\d+\s+(?:0x[0-9a-f]+\s+)?(?:in\s+)?(.+)$)");
  static const std::regex kPy(R"(^\s+(\S+) \(([^)]+)\)\s*$)");
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> out;
  int threads = 0;
  bool py = false;
  bool reached_user_code = false;
  while (std::getline(in, line)) {
    if (line.size() > 4096) continue;  // no tool prints such a frame; never feed one to std::regex
    if (StartsWith(line, "TID ") || StartsWith(line, "Thread ")) {
      if (++threads > 1) break;  // the first thread is the main thread
      py = line.find("(active") != std::string::npos || line.find("(idle") != std::string::npos ||
           line.find("\"MainThread\"") != std::string::npos;
      continue;
    }
    std::smatch m;
    if (!py && std::regex_search(line, m, kNative)) {
      std::string f = m[1].str();
      for (size_t p; (p = f.find("(anonymous namespace)")) != std::string::npos;) f.replace(p, 21, "{anon}");
      if (StartsWith(f, "std::_Function_handler") || StartsWith(f, "std::function")) continue;
      // Drop gdb's "(args) at file:line" / "from lib", eu-stack's " - module", symbol versions.
      for (const char* cut : {" - ", " at ", " from ", "@"})
        if (size_t p = f.find(cut); p != std::string::npos) f.resize(p);
      if (size_t p = f.find(" ("); p != std::string::npos) f.resize(p);
      if (size_t p = f.find('('); p != std::string::npos) f.resize(p);
      f = std::string(Trim(f));
      if (!Boring(f) && !StartsWith(f, "0x")) out.push_back(f);
    } else if (py && std::regex_search(line, m, kPy)) {
      std::string where = m[2].str();
      // Our own frames (the generated wrappers, the tracer's module) are not the program's.
      if (StartsWith(where, "<dsdoctor tracer") || where.find("dsdoctor_tracer.py") != std::string::npos) continue;
      size_t slash = where.rfind('/');
      out.push_back(m[1].str() + " (" + (slash == std::string::npos ? where : where.substr(slash + 1)) + ")");
      // The program's own frame says most (train.py:92 under engine.save_checkpoint): keep going
      // through torch/DeepSpeed/library frames until it is in, up to kMaxStackFrames.
      // py-spy prints package-relative paths ("torch/distributed/distributed_c10d.py") or absolute ones.
      std::string w = "/" + where;
      reached_user_code = w.find("/torch/") == std::string::npos && w.find("/deepspeed/") == std::string::npos &&
                          w.find("-packages/") == std::string::npos && w.find("/lib/python") == std::string::npos &&
                          w.find("<frozen") == std::string::npos && w.find("/threading.py") == std::string::npos;
      if (out.size() >= frames && (reached_user_code || out.size() >= kMaxStackFrames)) break;
      continue;
    }
    if (out.size() >= frames) break;
  }
  return Join(out, " < ");
}

bool PySpyAvailable() {
  const char* py_spy = std::getenv("DSDOCTOR_PY_SPY");
  return (py_spy && *py_spy && ::access(py_spy, X_OK) == 0) || OnPath("py-spy");
}

Result<StackCapture> CaptureStack(pid_t pid, bool python, Duration timeout) {
  std::vector<std::pair<std::string, std::vector<std::string>>> tools;
  const char* py_spy = std::getenv("DSDOCTOR_PY_SPY");  // an exact path (scripts/setup.sh fetches one into .deps)
  if (python && py_spy && *py_spy && ::access(py_spy, X_OK) == 0)
    tools.push_back({"py-spy", {py_spy, "dump", "--pid", std::to_string(pid)}});
  else if (python && OnPath("py-spy"))
    tools.push_back({"py-spy", {"py-spy", "dump", "--pid", std::to_string(pid)}});
  if (OnPath("eu-stack")) tools.push_back({"eu-stack", {"eu-stack", "-p", std::to_string(pid)}});
  if (OnPath("gdb"))
    tools.push_back(
        {"gdb", {"gdb", "-p", std::to_string(pid), "-batch", "-nx", "-q", "-ex", "thread apply all bt 30"}});
  if (tools.empty()) return NotFound("stack capture: none of py-spy, eu-stack, gdb is installed");
  std::string errors;
  for (auto& [name, argv] : tools) {
    CommandOptions opts;
    opts.timeout = timeout;
    auto r = RunCommand(argv, opts);
    if (r.ok() && r->exit_code == 0 && !r->out.empty()) {
      StackCapture c{name, r->out, ""};
      c.signature = ReduceStack(r->out);
      return c;
    }
    errors += (errors.empty() ? "" : "; ") + name + ": " +
              (r.ok() ? std::string(Trim(r->err)).substr(0, 200) : r.status().message());
  }
  return Unavailable("stack capture of pid " + std::to_string(pid) + " failed: " + errors);
}

}  // namespace dsd::collectors
