// Smoke tests of the real `dsdoctor` binary: flags, exit codes, output formats.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file.h"
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
  EXPECT_NO_THROW({
    auto parsed = nlohmann::json::parse(r.out);
    (void)parsed;
  });  // logs never pollute stdout
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

std::string WriteTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("dsdoctor_cli_" + std::to_string(::getpid()) + "_" + name);
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path.string();
}

// Hostfile lines deepspeed rejects (OpenMPI accepts some) fail `check` before anything starts,
// naming file:line and deepspeed's own message: never a green check for a job deepspeed refuses.
// The log dir holds what the ranks printed: private by default (0700, files 0600), group-readable
// with --share-group; the job's own files keep the user's umask.
TEST(CliTest, LogDirIsPrivateAndTheJobsOwnFilesAreNot) {
  namespace fs = std::filesystem;
  std::string dir = ::testing::TempDir() + "/dsd_cli_perms_" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto mode = [](const fs::path& p) { return static_cast<int>(fs::status(p).permissions() & fs::perms::mask); };
  for (bool share : {false, true}) {
    std::string logs = dir + (share ? "/shared" : "/private");
    std::vector<std::string> args = {"run", "--local", "1", "--quiet", "--log-dir", logs};
    if (share) args.push_back("--share-group");
    for (const char* a : {"--", "sh", "-c", "touch own-file"}) args.push_back(a);
    mode_t before = ::umask(022);
    CommandOptions o;
    o.cwd = dir;
    args.insert(args.begin(), DSDOCTOR_BIN);
    auto r = RunCommand(args, o);
    ::umask(before);
    ASSERT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : r.status().ToString());
    EXPECT_EQ(mode(logs), share ? 0750 : 0700);
    for (const char* f : {"rank-0.log", "run.json", "events.jsonl", "rank-0.exit"})
      EXPECT_EQ(mode(fs::path(logs) / f), share ? 0640 : 0600) << f;
    EXPECT_EQ(mode(fs::path(logs) / "viewer.token"), 0600) << "the viewer token is never shared";
    EXPECT_EQ(mode(fs::path(dir) / "own-file"), 0644) << "the job's own files are as the user makes them";
    fs::remove(fs::path(dir) / "own-file");
  }
  fs::remove_all(dir);
}

TEST(CliTest, OversizedSweepSizeIsAUsageError) {
  auto r = Dsdoctor({"check", "--local", "1", "--sizes", "99999999999999999999999", "--plan"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--sizes"), std::string::npos) << r.err;
}

// A hostfile's hosts are contacted (ssh by default, as run), never simulated on this machine: hosts
// that do not resolve fail the agents row by name with ssh's own words, and nothing else reads ok.
TEST(CliTest, CheckOfAHostfileContactsItsHostsAndIsNeverGreenWhenNoneAnswers) {
  if (::access("/usr/bin/ssh", X_OK) != 0) GTEST_SKIP() << "no ssh client";
  std::string hf = WriteTemp("hf_unresolvable", "no-such-host-a.invalid slots=1\nno-such-host-b.invalid slots=1\n");
  std::string json = hf + ".json";
  auto r = Dsdoctor({"check", "--hostfile", hf, "--no-bandwidth", "--json", json});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  auto text = ReadFile(json);
  ASSERT_TRUE(text.ok());
  auto j = nlohmann::json::parse(*text);
  EXPECT_FALSE(j["simulated"].get<bool>());
  for (const auto& c : j["checks"]) {
    if (c["name"] == "agents") {
      EXPECT_EQ(c["status"], "fail");
      EXPECT_NE(c.dump().find("no-such-host-a.invalid"), std::string::npos) << c.dump();
      EXPECT_NE(c.dump().find("ssh"), std::string::npos) << "the launcher's own error: " << c.dump();
    } else if (c["name"] != "plan") {
      EXPECT_NE(c["status"], "ok") << c.dump();
    }
  }
  auto plan = Dsdoctor({"check", "--hostfile", hf, "--plan"});
  EXPECT_NE(plan.out.find("launcher ssh"), std::string::npos) << plan.out;
  std::filesystem::remove(hf);
  std::filesystem::remove(json);
}

// Simulated nodes say so in every output: the text's title and plan row, the JSON, the JUnit.
TEST(CliTest, SimulatedNodesSaySoInTextJsonAndJunit) {
  std::string junit = WriteTemp("junit", "");
  std::string json = junit + ".json";
  auto r = Dsdoctor({"check", "--local", "2", "--no-bandwidth", "--junit", junit, "--json", json});
  EXPECT_NE(r.out.find("2 nodes (simulated on this machine"), std::string::npos) << r.out;
  auto x = ReadFile(junit);
  ASSERT_TRUE(x.ok());
  EXPECT_NE(x->find("simulated on this machine"), std::string::npos) << *x;
  auto text = ReadFile(json);
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(nlohmann::json::parse(*text)["simulated"].get<bool>());
  std::filesystem::remove(junit);
  std::filesystem::remove(json);
}

TEST(CliTest, CheckFailsOnHostfilesDeepSpeedRejects) {
  for (const std::string line : {"worker-1 slots = 4", "worker-1", "worker-1 cpu slots=4"}) {
    std::string hf = WriteTemp("hf_bad", "worker-0 slots=2\n" + line + "\n");
    auto r = Dsdoctor({"check", "--hostfile", hf, "--no-bandwidth"});
    EXPECT_EQ(r.exit_code, 2) << line;
    EXPECT_NE(r.err.find(hf + ":2: bad entry '" + line + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Hostfile contains a bad entry"), std::string::npos) << r.err;
    std::filesystem::remove(hf);
  }
  std::string hf = WriteTemp("hf_ok", "worker-0 slots=2\nworker-1 slots=2\n");
  auto r = Dsdoctor({"check", "--hostfile", hf, "--include", "worker-1", "--num_nodes", "1", "--plan"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Cannot specify num_nodes/gpus with include/exclude"), std::string::npos) << r.err;
  std::filesystem::remove(hf);
}

// `check --plan` and `run --dry-run` print the same plan (slot ids are CUDA_VISIBLE_DEVICES) and
// start nothing; `run` takes deepspeed's resource flags.
TEST(CliTest, PlanAndDryRunShowSlotsRanksAndMaster) {
  std::string hf = WriteTemp("hf_plan", "worker-0 slots=4\nworker-1 slots=4 max_slots=8\n");
  auto check = Dsdoctor({"check", "--hostfile", hf, "--include", "worker-0:0@worker-0:2@worker-1:3", "--plan"});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("Plan: 2 nodes, 3 ranks from " + hf), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("worker-0  0-1        0,2"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("worker-1  2          3"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("note: " + hf + ":2: 'max_slots=8' after slots=4 is ignored by deepspeed"),
            std::string::npos);
  auto run = Dsdoctor({"run", "--hostfile", hf, "--num_gpus", "2", "--master_addr", "10.0.0.1", "--master_port", "6000",
                       "--launcher", "pdsh", "--dry-run", "--json", "-", "--", "python3", "train.py"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["launcher"], "pdsh");
  EXPECT_EQ(j["world_size"], 4);
  EXPECT_EQ(j["master"]["addr"], "10.0.0.1");
  EXPECT_EQ(j["master"]["port"], 6000);
  EXPECT_EQ(j["nodes"][1]["host"], "worker-1");
  EXPECT_EQ(j["nodes"][1]["ranks"], nlohmann::json({2, 3}));
  EXPECT_EQ(j["nodes"][1]["cuda_visible_devices"], "0,1");
  // A host name that is not UTF-8 is still a plan, printed as valid JSON (the byte replaced).
  std::string latin1 = WriteTemp("hf_latin1", "w\xe9rker slots=1\n");
  auto odd = Dsdoctor({"check", "--hostfile", latin1, "--plan", "--json", "-"});
  EXPECT_EQ(odd.exit_code, 0) << odd.err;
  EXPECT_TRUE(nlohmann::json::accept(odd.out)) << odd.out;
  std::filesystem::remove(latin1);
  auto bad = Dsdoctor({"run", "--hostfile", hf, "--include", "worker-2", "--dry-run", "--", "true"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--include: host 'worker-2' is not in " + hf), std::string::npos) << bad.err;
  std::filesystem::remove(hf);
}

// `analyze -` fed by a writer that keeps the pipe open and silent says it is waiting, then reads
// what comes and ends with the pipe.
TEST(CliTest, AnalyzeSaysItWaitsOnASilentOpenInput) {
  auto r = RunCommand({"sh", "-c",
                       "(sleep 2.5; echo '[rank1]: RuntimeError: NCCL error in: x, unhandled system error') | " +
                           std::string(DSDOCTOR_BIN) + " analyze - --json"},
                      {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1) << r->out << r->err;
  EXPECT_NE(r->err.find("waiting for more of <stdin>: nothing came for 2 s"), std::string::npos) << r->err;
  EXPECT_NE(r->out.find("NCCL_ERROR"), std::string::npos) << r->out;
}

TEST(CliTest, TuiNeedsAttachOrReplayAndNamesBadRecordings) {
  auto none = Dsdoctor({"tui"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--attach"), std::string::npos) << none.err;
  EXPECT_EQ(Dsdoctor({"tui", "--attach", "127.0.0.1:1", "--replay", "x"}).exit_code, 2) << "one or the other";

  std::string dir = ::testing::TempDir() + "/dsd_cli_tui";
  std::filesystem::create_directories(dir);
  auto missing = Dsdoctor({"tui", "--replay", dir + "/nope.jsonl", "--dump"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope.jsonl"), std::string::npos) << missing.err;

  std::string file = dir + "/events.jsonl";
  FILE* f = std::fopen(file.c_str(), "w");
  std::fputs(
      "{\"type\":\"header\",\"version\":1,\"t\":0,\"job\":\"train\",\"ranks\":2,\"start_unix_ms\":0}\n"
      "{\"type\":\"tick\",\"t\":1,\"overall\":\"running\",\"nodes\":1,\"ranks\":2,\"running\":2,\"step\":1,\"steps_per_"
      "s\":1,\"rows\":[{\"rank\":7}]}\n",
      f);
  std::fclose(f);
  auto bad = Dsdoctor({"tui", "--replay", dir, "--dump"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("events.jsonl:2: "), std::string::npos) << bad.err;

  // A "t" that is not a number is named with its line, not an internal error (exit 3).
  f = std::fopen(file.c_str(), "w");
  std::fputs(
      "{\"type\":\"header\",\"version\":1,\"t\":0,\"job\":\"train\",\"ranks\":2,\"start_unix_ms\":0}\n"
      "{\"type\":\"end\",\"t\":\"soon\",\"code\":0}\n",
      f);
  std::fclose(f);
  auto string_t = Dsdoctor({"tui", "--replay", dir, "--dump"});
  EXPECT_EQ(string_t.exit_code, 2);
  EXPECT_NE(string_t.err.find("events.jsonl:2: "), std::string::npos) << string_t.err;

  auto no_token = Dsdoctor({"tui", "--attach", "127.0.0.1:9"});
  EXPECT_EQ(no_token.exit_code, 2);
  EXPECT_NE(no_token.err.find("--token-file"), std::string::npos) << no_token.err;
  auto bad_serve = Dsdoctor({"run", "--local", "1", "--log-dir", dir + "/logs", "--serve", "nowhere", "--", "true"});
  EXPECT_EQ(bad_serve.exit_code, 2);
  EXPECT_NE(bad_serve.err.find("--serve nowhere"), std::string::npos) << bad_serve.err;
  // Attaching to a run that has ended says so and how to replay it, instead of a bare "connect refused".
  auto done = Dsdoctor({"run", "--local", "1", "--quiet", "--log-dir", dir + "/done", "--", "true"});
  ASSERT_EQ(done.exit_code, 0) << done.err;
  auto late = Dsdoctor({"tui", "--attach", dir + "/done", "--dump"});
  EXPECT_EQ(late.exit_code, 1);
  EXPECT_NE(late.err.find("has ended (code 0); replay it: dsdoctor tui --replay " + dir + "/done"), std::string::npos)
      << late.err;
  auto bad_size = Dsdoctor({"tui", "--replay", dir, "--dump", "--size", "wide"});
  EXPECT_EQ(bad_size.exit_code, 2);
  EXPECT_NE(bad_size.err.find("--size wide"), std::string::npos) << bad_size.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsd
