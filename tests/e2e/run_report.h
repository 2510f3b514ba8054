// Helpers the `dsdoctor run` e2e tests share: reading the report JSON, a command's time limit,
// and whether Debian's PyTorch is there (REQUIRE_TORCH fails under DSDOCTOR_REQUIRE_TORCH=1, as in
// CI, and skips elsewhere). Header-only; each test binary includes it once.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/process.h"

namespace dsd::e2e {

// The first finding with `code` in a run report, or null.
inline const nlohmann::json* FindingOf(const nlohmann::json& report, const std::string& code) {
  if (!report.is_object() || !report.contains("findings")) return nullptr;
  for (const auto& f : report["findings"])
    if (f["code"] == code) return &f;
  return nullptr;
}

inline std::vector<int> Ranks(const nlohmann::json& f) { return f["ranks"].get<std::vector<int>>(); }

inline CommandOptions WithTimeout(int seconds) {
  CommandOptions o;
  o.timeout = std::chrono::seconds(seconds);
  return o;
}

inline bool TorchAvailable() {
  auto r = RunCommand({"/usr/bin/python3", "-c", "import torch.distributed"}, {});
  return r.ok() && r->exit_code == 0;
}

}  // namespace dsd::e2e

#define REQUIRE_TORCH()                                                                                              \
  if (!::dsd::e2e::TorchAvailable()) {                                                                               \
    if (std::getenv("DSDOCTOR_REQUIRE_TORCH")) FAIL() << "python3-torch is required (scripts/setup.sh installs it)"; \
    GTEST_SKIP() << "python3-torch is not installed";                                                                \
  }
