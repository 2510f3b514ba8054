#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "common/process.h"

namespace dsd {

std::string ExitInfo::Describe() const {
  if (signaled) return "signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) + ")";
  return "exit " + std::to_string(exit_code);
}

Result<Subprocess> Subprocess::Start(const std::vector<std::string>& argv, const SubprocessOptions& options) {
  if (argv.empty()) return InvalidArgument("empty command");
  int log_fd = -1;
  if (!options.log_path.empty() && options.output_fd < 0) {
    log_fd = ::open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return ErrnoError("log file " + options.log_path, errno);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env = MergedEnvironment(options.env);
  std::vector<char*> envp = EnvironmentPointers(env);
  auto path = options.env.find("PATH");  // execvpe searches the PATH of the caller
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    if (log_fd >= 0) ::close(log_fd);
    return ErrnoError("fork", e);
  }
  if (pid == 0) {
    if (options.new_process_group) ::setpgid(0, 0);
    if (options.parent_death_signal) {
      ::prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      if (::getppid() != parent) ::_exit(128 + options.parent_death_signal);  // it died before prctl
    }
    if (options.output_fd >= 0) {
      ::dup2(options.output_fd, 1);
      ::dup2(options.output_fd, 2);
    } else if (log_fd >= 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
    }
    if (!options.inherit_stdin) {
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
    }
    // A watcher that is not our ancestor takes the child's stack (Yama's ptrace_scope 1); the
    // permission outlives exec.
    if (options.ptracer > 0) ::prctl(PR_SET_PTRACER, options.ptracer, 0, 0, 0);
    if (path != options.env.end() && !path->second.empty()) ::setenv("PATH", path->second.c_str(), 1);
    if (options.umask >= 0) ::umask(static_cast<mode_t>(options.umask));
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) {
      std::fprintf(stderr, "dsdoctor: chdir %s: %s\n", options.cwd.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    ::execvpe(args[0], args.data(), envp.data());
    std::fprintf(stderr, "dsdoctor: cannot execute %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  // Both sides call setpgid so the group exists before the parent signals it.
  if (options.new_process_group) ::setpgid(pid, pid);
  log::Get("process")->debug("started pid {}: {}", pid, argv[0]);
  return Subprocess(pid, options.new_process_group);
}

std::optional<ExitInfo> Subprocess::Poll() {
  if (exit_ || pid_ <= 0) return exit_;
  int status = 0;
  pid_t w = ::waitpid(pid_, &status, WNOHANG);
  if (w != pid_) return std::nullopt;
  ExitInfo info;
  if (WIFEXITED(status)) {
    info.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    info.signaled = true;
    info.term_signal = WTERMSIG(status);
  }
  exit_ = info;
  return exit_;
}

std::optional<ExitInfo> Subprocess::Wait(Duration timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto e = Poll()) return e;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Subprocess::Signal(int sig) {
  if (exit_ || pid_ <= 0) return;
  // The child is unreaped, so its pid (and group id) cannot have been reused.
  if (group_)
    ::kill(-pid_, sig);
  else
    ::kill(pid_, sig);
}

}  // namespace dsd
