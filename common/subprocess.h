// A child process that runs alongside us (the ranks of a job, test clusters): started with fork +
// execvp, its stdout and stderr appended to one log file (or inherited), its own process group
// so a signal reaches its children too. Only the pid we started is ever signalled.
// A Subprocess is owned by one thread; the destructor neither kills nor waits (call Kill/Wait).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace dsd {

struct SubprocessOptions {
  std::map<std::string, std::string> env;  // overlays ours; an empty value unsets
  std::string log_path;                    // stdout+stderr appended here; empty: inherit ours
  int output_fd = -1;                      // stdout+stderr go to this descriptor instead (a pipe's write end)
  std::string cwd;                         // empty: ours
  bool new_process_group = true;           // Kill() then reaches the child's own children
  int parent_death_signal = 0;             // PR_SET_PDEATHSIG: the child gets it when we die (0: none)
  int umask = -1;                          // the child's umask (-1: ours)
  bool inherit_stdin = false;              // false: stdin is /dev/null
  pid_t ptracer = 0;  // PR_SET_PTRACER: this pid (and its children) may ptrace the child under Yama
};

struct ExitInfo {
  int exit_code = -1;  // valid when !signaled
  int term_signal = 0;
  bool signaled = false;
  std::string Describe() const;  // "exit 3", "signal 9 (Killed)"
};

class Subprocess {
 public:
  // Errors: the log file cannot be opened, fork fails. A program that cannot be executed exits 127.
  static Result<Subprocess> Start(const std::vector<std::string>& argv, const SubprocessOptions& options);

  pid_t pid() const { return pid_; }
  // Non-blocking: the exit, once it happened (reaped at the first call that sees it).
  std::optional<ExitInfo> Poll();
  // Blocks until exit or `timeout`; nullopt on timeout (the child keeps running).
  std::optional<ExitInfo> Wait(Duration timeout);
  // Sends `sig` to the child (its process group when it has one) unless it was already reaped.
  void Signal(int sig);

 private:
  explicit Subprocess(pid_t pid, bool group) : pid_(pid), group_(group) {}
  pid_t pid_ = -1;
  bool group_ = false;
  std::optional<ExitInfo> exit_;
};

}  // namespace dsd
