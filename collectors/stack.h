// Stack capture of a hung rank: `py-spy dump` for Python processes when py-spy is installed
// (DSDOCTOR_PY_SPY names its path, else PATH),
// else `eu-stack` (elfutils), else `gdb -batch`. Each tool attaches with ptrace for a moment and
// detaches; the rank keeps running. ReduceStack (pure) turns a tool's output into a short
// signature of the main thread's innermost frames, so ranks waiting in the same place group into
// one class. Thread-safe free functions.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/clock.h"
#include "common/status.h"

namespace dsd::collectors {

struct StackCapture {
  std::string tool;       // "py-spy", "eu-stack", "gdb"
  std::string text;       // the tool's output (all threads)
  std::string signature;  // "gloo::transport::tcp::UnboundBuffer::waitRecv < c10d::… < …" (main thread)
};

// Whether Python stacks can be taken: DSDOCTOR_PY_SPY names an executable, or py-spy is on PATH.
bool PySpyAvailable();

// Errors: no tool installed, the tool failed (ptrace not permitted: /proc/sys/kernel/yama/ptrace_scope).
Result<StackCapture> CaptureStack(pid_t pid, bool python, Duration timeout = std::chrono::seconds(10));

// The first thread's frames from eu-stack, gdb or py-spy output, innermost first, without
// addresses, arguments and C library wait wrappers, joined by " < ": `frames` of them, and for
// Python stacks more, up to kMaxStackFrames, until the program's own first frame (outside torch,
// DeepSpeed, site-packages and the standard library) is in.
inline constexpr size_t kStackFrames = 4;
inline constexpr size_t kMaxStackFrames = 16;
std::string ReduceStack(const std::string& text, size_t frames = kStackFrames);

}  // namespace dsd::collectors
