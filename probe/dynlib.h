// Loading shared libraries at run time (NCCL, CUDA runtime, NVML) so dsdoctor has no link
// dependency on them and runs, and says what it found, on machines without them.
// DynamicLibrary owns its handle (move-only, dlclose on destruction). dlopen/dlsym are
// thread-safe in glibc; a DynamicLibrary object itself is thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace dsd::probe {

class DynamicLibrary {
 public:
  DynamicLibrary() = default;
  ~DynamicLibrary();
  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // `name_or_path` as dlopen takes it: a bare soname uses the loader's search
  // (LD_LIBRARY_PATH, ld.so.cache); a path with '/' is opened as is.
  static Result<DynamicLibrary> Open(const std::string& name_or_path);

  bool loaded() const { return handle_ != nullptr; }
  // The absolute path the loader actually mapped.
  const std::string& path() const { return path_; }

  // Typed symbol lookup: Symbol<int (*)(int*)>("ncclGetVersion").
  template <typename Fn>
  Result<Fn> Symbol(const char* name) const {
    auto raw = RawSymbol(name);
    if (!raw.ok()) return raw.status();
    return reinterpret_cast<Fn>(*raw);
  }
  Result<void*> RawSymbol(const char* name) const;

 private:
  void* handle_ = nullptr;
  std::string path_;
};

// Where to look for one library. Order: the override variable (exact path, no fallback when set),
// the loader's own search for each soname, then each directory × soname.
struct LibrarySearch {
  std::string what;               // "NCCL", for messages
  std::string override_env;       // e.g. DSDOCTOR_NCCL_LIBRARY; empty = none
  std::vector<std::string> sonames;
  std::vector<std::string> dirs;  // may contain globs ("/usr/local/lib/python3*/dist-packages/…")
};

struct LoadAttempt {
  std::string candidate;
  std::string error;
};

// Tries each candidate; on failure the Status lists every candidate and why it failed.
// `attempts_out` (optional) receives every failed try either way.
Result<DynamicLibrary> FindAndOpen(const LibrarySearch& search, std::vector<LoadAttempt>* attempts_out = nullptr);

// The directories where CUDA-family libraries are commonly installed ($CUDA_HOME first).
std::vector<std::string> DefaultCudaLibraryDirs();

}  // namespace dsd::probe
