#include "probe/dynlib.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <cstdlib>
#include <set>

#include "common/log.h"
#include "common/strings.h"

namespace dsd::probe {

DynamicLibrary::~DynamicLibrary() {
  if (handle_) ::dlclose(handle_);
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(other.handle_), path_(std::move(other.path_)) {
  other.handle_ = nullptr;
}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_) ::dlclose(handle_);
    handle_ = other.handle_;
    path_ = std::move(other.path_);
    other.handle_ = nullptr;
  }
  return *this;
}

Result<DynamicLibrary> DynamicLibrary::Open(const std::string& name_or_path) {
  ::dlerror();
  // Lazy binding: NCCL has thousands of function relocations and we call a handful; binding them
  // all (RTLD_NOW) cost every agent a few ms, which 250 simulated nodes on one machine add up.
  void* h = ::dlopen(name_or_path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char* err = ::dlerror();
    return NotFound(err ? err : name_or_path + ": dlopen failed");
  }
  DynamicLibrary lib;
  lib.handle_ = h;
  link_map* map = nullptr;
  if (::dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) {
    char* real = ::realpath(map->l_name, nullptr);
    lib.path_ = real ? real : map->l_name;
    std::free(real);
  } else {
    lib.path_ = name_or_path;
  }
  return lib;
}

Result<void*> DynamicLibrary::RawSymbol(const char* name) const {
  if (!handle_) return Internal("symbol lookup on an unloaded library");
  ::dlerror();
  void* sym = ::dlsym(handle_, name);
  if (!sym) return NotFound(std::string(name) + " not found in " + path_);
  return sym;
}

namespace {

std::vector<std::string> ExpandGlob(const std::string& pattern) {
  if (pattern.find_first_of("*?[") == std::string::npos) return {pattern};
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  return out;
}

}  // namespace

Result<DynamicLibrary> FindAndOpen(const LibrarySearch& search, std::vector<LoadAttempt>* attempts_out) {
  auto log = log::Get("probe");
  std::vector<LoadAttempt> attempts;
  auto finish = [&](Result<DynamicLibrary> r) {
    if (attempts_out) *attempts_out = attempts;
    return r;
  };
  if (!search.override_env.empty()) {
    if (const char* forced = std::getenv(search.override_env.c_str()); forced && *forced) {
      log->debug("{}: {}={} (no fallback)", search.what, search.override_env, forced);
      auto lib = DynamicLibrary::Open(forced);
      if (lib.ok()) return finish(std::move(lib));
      attempts.push_back({forced, lib.status().message()});
      return finish(NotFound(search.what + " not loadable from " + search.override_env + "=" + forced + ": " +
                             lib.status().message()));
    }
  }
  std::vector<std::string> candidates = search.sonames;
  for (const auto& dir : search.dirs) {
    for (const auto& expanded : ExpandGlob(dir)) {
      for (const auto& soname : search.sonames) candidates.push_back(expanded + "/" + soname);
    }
  }
  std::set<std::string> seen;
  for (const auto& candidate : candidates) {
    if (!seen.insert(candidate).second) continue;
    auto lib = DynamicLibrary::Open(candidate);
    if (lib.ok()) {
      log->debug("{}: loaded {} as {}", search.what, candidate, lib->path());
      return finish(std::move(lib));
    }
    log->trace("{}: {} failed: {}", search.what, candidate, lib.status().message());
    attempts.push_back({candidate, lib.status().message()});
  }
  log->debug("{}: not found after {} candidates", search.what, attempts.size());
  return finish(NotFound(search.what + " not found (tried " + std::to_string(attempts.size()) + " locations; set " +
                         (search.override_env.empty() ? "LD_LIBRARY_PATH" : search.override_env) + " to its path)"));
}

std::vector<std::string> DefaultCudaLibraryDirs() {
  std::vector<std::string> dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* home = std::getenv(var); home && *home) {
      dirs.push_back(std::string(home) + "/lib64");
      dirs.push_back(std::string(home) + "/lib");
    }
  }
  for (const char* d : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib",
                        "/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"}) {
    dirs.push_back(d);
  }
  return dirs;
}

}  // namespace dsd::probe
