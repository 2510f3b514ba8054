#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/log.h"
#include "common/strings.h"

namespace dsd {

namespace {

// Waits for `pid` until `deadline` (the child may have closed its output yet still run), then
// SIGKILLs it by pid; fills the exit fields of a ChildResult or CommandResult.
template <typename R>
void ReapWithDeadline(pid_t pid, MonoTime deadline, R& result) {
  int status = 0;
  while (!result.timed_out) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() >= deadline)
      result.timed_out = true;
    else
      ::usleep(2000);
  }
  if (result.timed_out) {
    log::Get("process")->debug("pid {} timed out; sending SIGKILL", pid);
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signaled = true;
    result.term_signal = WTERMSIG(status);
  }
}

}  // namespace

Result<ChildResult> RunInChild(const std::function<int()>& body, const ChildOptions& options) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ErrnoError("fork", e);
  }
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    for (const auto& [k, v] : options.env) {
      if (v.empty())
        ::unsetenv(k.c_str());
      else
        ::setenv(k.c_str(), v.c_str(), 1);
    }
    int rc = 0;
    try {
      rc = body();
    } catch (...) {
      rc = 125;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(rc);
  }
  ::close(fds[1]);
  auto log = log::Get("process");
  log->debug("child {} started", pid);

  ChildResult result;
  const MonoTime deadline = std::chrono::steady_clock::now() + options.timeout;
  char buf[8192];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (pr < 0 && errno != EINTR) break;
    if (pr <= 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child (and anything it forked) closed the pipe
    size_t room = options.max_output > result.output.size() ? options.max_output - result.output.size() : 0;
    if (static_cast<size_t>(n) > room) result.truncated = true;
    result.output.append(buf, std::min<size_t>(static_cast<size_t>(n), room));
  }
  ::close(fds[0]);
  ReapWithDeadline(pid, deadline, result);
  log->debug("child {} ended: {}", pid, DescribeChildEnd(result));
  return result;
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options) {
  if (argv.empty()) return InvalidArgument("RunCommand: empty argv");
  int out_pipe[2], err_pipe[2], in_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<std::string> env = MergedEnvironment(options.env);
  std::vector<char*> envp = EnvironmentPointers(env);
  auto path = options.env.find("PATH");  // execvpe searches the PATH of the caller
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork", errno);
  if (pid == 0) {
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    if (path != options.env.end() && !path->second.empty()) ::setenv("PATH", path->second.c_str(), 1);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(127);
    ::execvpe(cargv[0], cargv.data(), envp.data());
    std::fprintf(stderr, "exec %s: %s\n", cargv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  auto log = log::Get("process");
  log->debug("started {} as pid {}", argv[0], pid);
  // Small inputs only (tokens, scripts): fits the pipe buffer, so no interleaving with reads.
  if (!options.stdin_data.empty()) {
    ssize_t ignored = ::write(in_pipe[1], options.stdin_data.data(), options.stdin_data.size());
    (void)ignored;
  }
  ::close(in_pipe[1]);

  CommandResult result;
  const MonoTime deadline = std::chrono::steady_clock::now() + options.timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buf[8192];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    int pr = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (pr < 0 && errno != EINTR) break;
    if (pr <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      size_t room = options.max_output > sinks[i]->size() ? options.max_output - sinks[i]->size() : 0;
      sinks[i]->append(buf, std::min<size_t>(static_cast<size_t>(n), room));
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  ReapWithDeadline(pid, deadline, result);
  log->debug("pid {} ({}) ended: exit {} signal {}", pid, argv[0], result.exit_code, result.term_signal);
  return result;
}

std::string DescribeChildEnd(const ChildResult& r) {
  if (r.timed_out) return "timed out";
  if (r.signaled) return "signal " + std::to_string(r.term_signal) + " (" + strsignal(r.term_signal) + ")";
  return "exit " + std::to_string(r.exit_code);
}

std::vector<std::string> MergedEnvironment(const std::map<std::string, std::string>& overlay) {
  std::map<std::string_view, std::string_view> merged;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string_view::npos && eq > 0) merged.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  for (const auto& [k, v] : overlay) {
    if (v.empty())
      merged.erase(k);
    else
      merged[k] = v;
  }
  std::vector<std::string> out;
  out.reserve(merged.size());
  for (const auto& [k, v] : merged) {
    std::string kv;
    kv.reserve(k.size() + v.size() + 1);
    kv.append(k).append(1, '=').append(v);
    out.push_back(std::move(kv));
  }
  return out;
}

std::vector<char*> EnvironmentPointers(std::vector<std::string>& env) {
  std::vector<char*> out;
  out.reserve(env.size() + 1);
  for (auto& kv : env) out.push_back(kv.data());
  out.push_back(nullptr);
  return out;
}

bool SetCommandLine(const std::vector<std::string>& args) {
  // arg_start, arg_end, env_start and env_end are fields 48 to 51 of /proc/self/stat, counted
  // after the command name in parentheses (which may hold spaces).
  FILE* f = std::fopen("/proc/self/stat", "re");
  if (!f) return false;
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');
  if (!p) return false;
  unsigned long long field[53] = {};  // 1-based; 52 fields since Linux 3.5
  int index = 2;                      // the next field after ')' is the 3rd (state)
  for (++p; *p && index < 52;) {
    while (*p == ' ') ++p;
    if (!*p) break;
    ++index;
    field[index] = std::strtoull(p, nullptr, 10);
    while (*p && *p != ' ') ++p;
  }
  if (index < 51) return false;
  char* arg_start = reinterpret_cast<char*>(field[48]);
  char* arg_end = reinterpret_cast<char*>(field[49]);
  char* env_start = reinterpret_cast<char*>(field[50]);
  char* env_end = reinterpret_cast<char*>(field[51]);
  if (!arg_start || arg_end <= arg_start) return false;

  std::string joined;
  for (const auto& a : args) joined.append(a).push_back('\0');
  const size_t arg_room = static_cast<size_t>(arg_end - arg_start);
  if (joined.size() <= arg_room) {
    // Fits where the arguments were: NUL-separated, as the kernel laid them out.
    std::memcpy(arg_start, joined.data(), joined.size());
    std::memset(arg_start + joined.size(), 0, arg_room - joined.size());
    return true;
  }
  // Longer: one string running on into the environment's area. The kernel shows it when the last
  // byte of the argument area is not NUL, up to the first NUL after it.
  char* end = arg_end;
  if (env_start == arg_end && env_end > env_start && environ) {
    size_t count = 0;
    while (environ[count]) ++count;
    char** moved = new char*[count + 1];  // kept for the life of the process, as environ is
    for (size_t i = 0; i < count; ++i) {
      bool inside = environ[i] >= env_start && environ[i] < env_end;
      moved[i] = inside ? ::strdup(environ[i]) : environ[i];
    }
    moved[count] = nullptr;
    environ = moved;
    end = env_end;
  }
  std::string line = Join(args, " ");
  size_t room = static_cast<size_t>(end - arg_start) - 1;
  if (line.size() > room) line.resize(room);
  std::memcpy(arg_start, line.data(), line.size());
  std::memset(arg_start + line.size(), 0, static_cast<size_t>(end - arg_start) - line.size());
  return true;
}

FdLimit RaiseFdLimit(uint64_t wanted) {
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0) return {};
  if (l.rlim_cur != RLIM_INFINITY && l.rlim_cur < wanted) {
    rlimit raised = l;
    raised.rlim_cur = l.rlim_max == RLIM_INFINITY ? wanted : std::min<rlim_t>(wanted, l.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) l = raised;
  }
  auto value = [](rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(v); };
  return {value(l.rlim_cur), value(l.rlim_max)};
}

Status WriteToPipe(int fd, std::string_view bytes) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  int error = 0;
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno;
      break;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  if (error == EPIPE) {
    // The SIGPIPE this write raised is pending on this thread: take it back before unblocking.
    const timespec now{0, 0};
    while (::sigtimedwait(&pipe_only, nullptr, &now) == SIGPIPE) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return error ? ErrnoError("write to a pipe", error) : Status::Ok();
}

}  // namespace dsd
