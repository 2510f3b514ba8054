// Running work in a child process: isolation for libraries with process-wide one-shot state or
// threads we cannot stop (NCCL's bootstrap), and for anything that may hang or crash.
// Functions here are thread-compatible; RunInChild forks, so call it from a process that holds
// no locks another thread could be holding (the CLI calls it before starting threads).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "common/clock.h"
#include "common/status.h"

namespace dsd {

struct ChildResult {
  int exit_code = -1;      // valid when !signaled
  int term_signal = 0;     // the signal that ended it, when signaled
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

// "exit 3", "signal 9 (Killed)", "timed out".
std::string DescribeChildEnd(const ChildResult& r);

}  // namespace dsd
