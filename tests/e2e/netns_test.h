// The fixture of e2e tests that run shell scripts in a private network namespace (`unshare -n`, only
// lo, which the script brings up), so nothing touches the host's network; the namespace disappears
// with the script. Skips (or fails under DSDOCTOR_REQUIRE_NETNS) where namespaces or iptables are
// not available. Each test gets a fresh $DIR.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/file.h"
#include "common/process.h"

namespace dsd::e2e {

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dsd_netns_e2e_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto probe = RunCommand({"unshare", "-n", "sh", "-c", "ip link set lo up && iptables -L OUTPUT -n >/dev/null"}, {});
    if (!probe.ok() || probe->exit_code != 0) {
      if (std::getenv("DSDOCTOR_REQUIRE_NETNS"))
        FAIL() << "network namespaces/iptables required: " << (probe.ok() ? probe->err : "");
      GTEST_SKIP() << "needs root, unshare -n and iptables";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `script` in a fresh network namespace with $DSD (the binary), $DIR and env_ set.
  CommandResult InNamespace(const std::string& script, std::chrono::seconds timeout = std::chrono::seconds(120)) {
    CommandOptions opts;
    opts.env = env_;
    opts.env["DSD"] = DSDOCTOR_BIN;
    opts.env["DIR"] = dir_.string();
    if (!opts.env.count("DSDOCTOR_LOG_LEVEL")) opts.env["DSDOCTOR_LOG_LEVEL"] = "warn";
    opts.timeout = timeout;
    auto r = RunCommand({"unshare", "-n", "bash", "-c", "set -u; ip link set lo up; " + script}, opts);
    EXPECT_TRUE(r.ok());
    EXPECT_FALSE(r.ok() && r->timed_out);
    return r.ok() ? *r : CommandResult{};
  }

  nlohmann::json ReadJson(const std::string& name) {
    auto text = ReadFile((dir_ / name).string());
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  }

  static std::vector<nlohmann::json> FindingsWithCode(const nlohmann::json& doc, const std::string& code) {
    std::vector<nlohmann::json> out;
    for (const auto& f : doc["findings"])
      if (f["code"] == code) out.push_back(f);
    return out;
  }

  std::filesystem::path dir_;
  std::map<std::string, std::string> env_;  // more variables for the scripts
};

}  // namespace dsd::e2e
