// Test helper (header-only, tests only): runs a body in a forked child that has a private mount
// namespace with a small tmpfs mounted at `dir` + "/small", so that a test can fill a file system
// (ENOSPC) without touching the host's. Needs root; the caller skips the test on kNoNamespace.
#pragma once

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace dsd::testing {

inline constexpr int kNoNamespace = -2;  // no root, or no mount namespace here

// The body gets the tmpfs's path and returns the child's exit code (0 for success); the result is
// that code, or kNoNamespace, or -1 when the child did not exit normally.
inline int InSmallTmpfs(const std::string& dir, const char* size, const std::function<int(const std::string&)>& body) {
  if (::geteuid() != 0) return kNoNamespace;
  pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(100);
    const std::string small = dir + "/small";
    const std::string options = std::string("size=") + size;
    if (::mkdir(small.c_str(), 0700) != 0 || ::mount("tmpfs", small.c_str(), "tmpfs", 0, options.c_str()) != 0)
      ::_exit(100);
    ::_exit(body(small));
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status) == 100 ? kNoNamespace : WEXITSTATUS(status);
}

}  // namespace dsd::testing
