#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace dsd {

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
      if (v.empty()) ::unsetenv(k.c_str());
      else ::setenv(k.c_str(), v.c_str(), 1);
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
  // The child may have closed its output yet still run: wait for it, up to the same deadline.
  int status = 0;
  while (!result.timed_out) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() >= deadline) result.timed_out = true;
    else ::usleep(2000);
  }
  if (result.timed_out) {
    log->debug("child {} timed out; sending SIGKILL", pid);
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
  log->debug("child {} ended: {}", pid, DescribeChildEnd(result));
  return result;
}

std::string DescribeChildEnd(const ChildResult& r) {
  if (r.timed_out) return "timed out";
  if (r.signaled) return "signal " + std::to_string(r.term_signal) + " (" + strsignal(r.term_signal) + ")";
  return "exit " + std::to_string(r.exit_code);
}

}  // namespace dsd
