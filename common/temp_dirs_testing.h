// Test helper (header-only, tests only): fresh folders under the system's temp dir that are removed
// when the test binary ends (a gtest environment's TearDown), so that a passing run leaves nothing.
// Not thread-safe: call it from tests' bodies, as gtest runs them (one at a time).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace dsd::testing {

// The folders made so far; removed at the end of the test binary.
struct TempDirs : ::testing::Environment {
  std::vector<std::string> dirs;
  void TearDown() override {
    for (auto& d : dirs) std::filesystem::remove_all(d);
  }
};
inline TempDirs* const kTempDirs = static_cast<TempDirs*>(::testing::AddGlobalTestEnvironment(new TempDirs));

// "<temp>/dsd-<prefix>-<name>-<pid>", empty (whatever an earlier run left there is removed).
inline std::string TempDir(const std::string& prefix, const std::string& name) {
  std::string d =
      std::filesystem::temp_directory_path() / ("dsd-" + prefix + "-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  kTempDirs->dirs.push_back(d);
  return d;
}

}  // namespace dsd::testing
