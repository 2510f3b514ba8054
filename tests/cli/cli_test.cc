// Smoke tests of the real `dsdoctor` binary: flags, exit codes, output formats.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/process.h"
#include "probe/nccl.h"

namespace dsd {
namespace {

CommandResult Dsdoctor(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), DSDOCTOR_BIN);
  CommandOptions opts;
  opts.env = std::move(env);
  opts.timeout = std::chrono::seconds(60);
  auto r = RunCommand(args, opts);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : CommandResult{};
}

TEST(CliTest, HelpListsReportAndExitsZero) {
  auto r = Dsdoctor({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("report"), std::string::npos);
  EXPECT_NE(r.out.find("--log-level"), std::string::npos);
}

TEST(CliTest, VersionPrintsTheProjectVersion) {
  auto r = Dsdoctor({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, std::string("dsdoctor ") + DSDOCTOR_VERSION + "\n");
}

TEST(CliTest, UnknownFlagOrSubcommandIsUsageError) {
  EXPECT_EQ(Dsdoctor({"report", "--bogus"}).exit_code, 2);
  EXPECT_EQ(Dsdoctor({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(Dsdoctor({}).exit_code, 2);
}

TEST(CliTest, ReportJsonParsesAndFollowsTheSchema) {
  auto r = Dsdoctor({"report", "--json"}, {{"NCCL_SOCKET_IFNAME", ""}});
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  auto j = nlohmann::json::parse(r.out);  // throws (fails the test) on invalid JSON
  EXPECT_EQ(j["schema"], "dsdoctor.report/1");
  EXPECT_TRUE(j["inventory"]["system"]["interfaces"].is_array());
  EXPECT_TRUE(j["inventory"]["nccl"].contains("found"));
  EXPECT_FALSE(j["checks"].empty());
  EXPECT_EQ(r.exit_code, j["summary"]["fail"].get<int>() > 0 ? 1 : 0);
}

TEST(CliTest, ReportTextHasMarksAndSummary) {
  auto r = Dsdoctor({"report"});
  EXPECT_NE(r.out.find("dsdoctor report: "), std::string::npos);
  EXPECT_NE(r.out.find("interfaces"), std::string::npos);
  EXPECT_NE(r.out.find(" checks\n"), std::string::npos);
  EXPECT_EQ(r.out.find("\033["), std::string::npos);  // not a terminal: no colour codes
}

TEST(CliTest, BadSocketIfnameReportsTheBootstrapFailure) {
  if (!probe::InspectNccl().found) {
    if (std::getenv("DSDOCTOR_REQUIRE_NCCL")) FAIL() << "NCCL required but not found";
    GTEST_SKIP() << "no NCCL on this machine";
  }
  auto r = Dsdoctor({"report"}, {{"NCCL_SOCKET_IFNAME", "nosuch0"}});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("[FAIL]  NCCL bootstrap"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NCCL_SOCKET_IFNAME=nosuch0"), std::string::npos);
  EXPECT_NE(r.out.find("NCCL WARN Bootstrap : no socket interface found"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(Dsdoctor({"report", "--json"}, {{"NCCL_SOCKET_IFNAME", "nosuch0"}}).out);
  EXPECT_EQ(j["inventory"]["nccl_bootstrap"]["ok"], false);
}

TEST(CliTest, DebugLevelFromEnvironmentLogsEveryComponentToStderr) {
  auto r = Dsdoctor({"report", "--json"}, {{"DSDOCTOR_LOG_LEVEL", "debug"}});
  EXPECT_NE(r.err.find("[probe]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[cli]"), std::string::npos);
  EXPECT_NO_THROW({ auto parsed = nlohmann::json::parse(r.out); (void)parsed; });  // logs never pollute stdout
  auto quiet = Dsdoctor({"report", "--json", "--log-level", "error"}, {{"DSDOCTOR_LOG_LEVEL", "debug"}});
  EXPECT_EQ(quiet.err.find("DEBUG"), std::string::npos) << quiet.err;  // the flag overrides the env
}

TEST(CliTest, InvalidLogLevelWarnsNamingValidLevels) {
  auto r = Dsdoctor({"report", "--json"}, {{"DSDOCTOR_LOG_LEVEL", "loud"}});
  EXPECT_NE(r.err.find("trace|debug|info|warn|error|off"), std::string::npos) << r.err;
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1);
}

TEST(CliTest, DeepSpeedEnvProblemsAreReportedWithFileAndLine) {
  std::string dir = ::testing::TempDir() + "/dsd_cli_dsenv";
  std::filesystem::create_directories(dir);
  std::string file = dir + "/my_env";
  FILE* f = std::fopen(file.c_str(), "w");
  std::fputs("NCCL_IB_DISABLE=1\n# comment\n", f);
  std::fclose(f);
  auto r = Dsdoctor({"report", "--json"}, {{"DS_ENV_FILE", file}});
  auto j = nlohmann::json::parse(r.out);
  bool seen = false;
  for (const auto& d : j["inventory"]["deepspeed_env"]) {
    if (d["path"] == file) {
      seen = true;
      ASSERT_EQ(d["problems"].size(), 1u);
      EXPECT_EQ(d["problems"][0]["line"], 2);
      EXPECT_EQ(d["source"], "DS_ENV_FILE");
    }
  }
  EXPECT_TRUE(seen) << r.out;
  EXPECT_EQ(r.exit_code, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsd
