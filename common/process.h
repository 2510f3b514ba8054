// Running work in a child process: isolation for libraries with process-wide one-shot state or
// threads we cannot stop (NCCL's bootstrap), and for anything that may hang or crash.
// Functions here are thread-compatible; RunInChild forks, so call it from a process that holds
// no locks another thread could be holding (the CLI calls it before starting threads).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace dsd {

struct ChildResult {
  int exit_code = -1;   // valid when !signaled
  int term_signal = 0;  // the signal that ended it, when signaled
  bool signaled = false;
  bool timed_out = false;  // we killed it at the deadline
  std::string output;      // stdout and stderr interleaved, truncated at max_output
  bool truncated = false;
};

struct ChildOptions {
  Duration timeout = std::chrono::seconds(30);
  size_t max_output = 1u << 20;
  // Set in the child before `body` runs; an empty value unsets the variable.
  std::map<std::string, std::string> env;
};

// Forks; the child points stdout/stderr into a pipe, applies options.env, runs `body`, and exits
// with its return value. The parent collects output until exit or timeout (then SIGKILLs the child
// by pid and reaps it).
Result<ChildResult> RunInChild(const std::function<int()>& body, const ChildOptions& options);

struct CommandResult {
  int exit_code = -1;
  int term_signal = 0;
  bool signaled = false;
  bool timed_out = false;
  std::string out, err;  // stdout and stderr, each truncated at max_output
};

struct CommandOptions {
  Duration timeout = std::chrono::seconds(60);
  size_t max_output = 4u << 20;
  std::map<std::string, std::string> env;  // overlays ours; an empty value unsets
  std::string stdin_data;                  // written to the child's stdin, then closed
  std::string cwd;                         // empty: ours
};

// fork + execvp of argv[0]; collects stdout and stderr separately until exit or the timeout
// (then SIGKILL by pid). Exit code 127 means the program could not be executed.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options);

// "exit 3", "signal 9 (Killed)", "timed out".
std::string DescribeChildEnd(const ChildResult& r);

// The environment a started program gets: ours with `overlay` applied (an empty value unsets), as
// "K=V" strings for execvpe. Built before fork in O(n log n): setenv per variable in the child was
// quadratic (100,000 variables took minutes) and allocates after fork.
std::vector<std::string> MergedEnvironment(const std::map<std::string, std::string>& overlay);
// Pointers into `env` (which must outlive them), null-terminated.
std::vector<char*> EnvironmentPointers(std::vector<std::string>& env);

// Sets what /proc/self/cmdline (ps, pgrep -f) shows: `args`, written over the memory that held this
// process's own arguments and, when they need more room, its environment strings (copied elsewhere
// first, so getenv keeps working), as setproctitle does. Text past that room is cut. For a forked
// child that goes on as another command without exec. False when the area cannot be found.
bool SetCommandLine(const std::vector<std::string>& args);

// Writes all of `bytes` to a pipe whose reader may already be gone (a child that exited at once):
// EPIPE is returned, never a SIGPIPE that would end this process. The signal is blocked in this
// thread for the write and a SIGPIPE it raised is taken back, so the process's disposition (which
// children inherit across exec) is never changed.
Status WriteToPipe(int fd, std::string_view bytes);

// Open-file limits (RLIMIT_NOFILE) of this process.
struct FdLimit {
  uint64_t soft = 0;
  uint64_t hard = 0;
};
// Raises the soft limit to `wanted` when the hard limit allows (never lowers it) and returns the
// limits now in force: a coordinator of thousands of agents needs more than the usual 1,024.
FdLimit RaiseFdLimit(uint64_t wanted);

}  // namespace dsd
