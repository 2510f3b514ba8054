// `dsdoctor run` and `dsdoctor analyze` end to end: the real binary starts every example program
// (and a real PyTorch job) as 2 nodes x 2 slots, simulated on this machine and, for most scenarios, on
// nodes that share nothing but the network (tests/e2e/placement.h); the findings must name the right
// rank(s), op, seq and callsite; the logs must be in the coordinator's run dir; `analyze` of that dir
// must agree post-mortem.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/file.h"
#include "common/process.h"
#include "common/strings.h"
#include "common/subprocess.h"
#include "runtime/trace.h"
#include "tests/e2e/placement.h"
#include "tests/e2e/run_report.h"

namespace dsd {
namespace {

namespace fs = std::filesystem;
using e2e::FindingOf;
using e2e::Ranks;

struct RunResult {
  int exit_code = -1;
  std::string out;
  nlohmann::json report;  // the --json document
  std::string dir;
};

std::string FreshDir(const std::string& name) {
  std::string dir = fs::temp_directory_path() / ("dsd-run-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  e2e::RemovedWhenPassed::Add(dir);
  return dir;
}

// 2 nodes x 2 slots, placed as asked (tests/e2e/placement.h).
RunResult RunJob(const std::string& name, std::vector<std::string> command, std::vector<std::string> flags = {},
                 std::map<std::string, std::string> env = {}, e2e::Placement placement = e2e::Placement::kLocal) {
  RunResult r;
  r.dir = e2e::PlacedRunDir("run-" + name, placement);
  std::vector<std::string> all_flags = {"--log-dir", r.dir, "--json", r.dir + "/report.json", "--quiet"};
  all_flags.insert(all_flags.end(), flags.begin(), flags.end());
  std::vector<std::string> argv = e2e::PlacedRunArgv(placement, 2, 2, r.dir, all_flags, command, &env);
  CommandOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env = std::move(env);
  auto res = RunCommand(argv, opts);
  EXPECT_TRUE(res.ok());
  if (!res.ok()) return r;
  r.exit_code = res->exit_code;
  r.out = res->out + res->err;
  if (placement == e2e::Placement::kSharedNothing) {
    EXPECT_TRUE(e2e::CopiedTheNodesFiles(r.out)) << "the nodes must not share the run dir:\n" << r.out;
  }
  auto text = ReadFile(r.dir + "/report.json");
  if (text.ok()) r.report = nlohmann::json::parse(*text, nullptr, false);
  return r;
}

std::string Example(const std::string& name) { return std::string(EXAMPLES_DIR) + "/" + name; }

// Runs on simulated nodes of this machine and on nodes that share nothing with the coordinator
// but the network: the same findings, and the same files in the coordinator's run dir.
class RunPlacementTest : public ::testing::TestWithParam<e2e::Placement> {};
INSTANTIATE_TEST_SUITE_P(RunE2eTest, RunPlacementTest,
                         ::testing::Values(e2e::Placement::kLocal, e2e::Placement::kSharedNothing), e2e::PlacementName);

void ExpectLogsOnDisk(const std::string& dir, int world) {
  for (int r = 0; r < world; ++r) {
    auto log = ReadFile(dir + "/rank-" + std::to_string(r) + ".log");
    ASSERT_TRUE(log.ok()) << "rank " << r;
    EXPECT_FALSE(log->empty()) << "rank " << r;
  }
}

TEST_P(RunPlacementTest, RankZeroOnlySaveCheckpointNamesRankZeroAndSaysEveryRankMustCallIt) {
  REQUIRE_PLACEMENT(GetParam());
  auto r = RunJob("ckpt", {Example("rank0_only_checkpoint")}, {"--timeout", "30"}, {}, GetParam());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  ASSERT_TRUE(r.report.is_object()) << r.out;
  ASSERT_FALSE(r.report["findings"].empty());
  const auto& f = r.report["findings"][0];
  EXPECT_EQ(f["code"], "COLLECTIVE_MISMATCH") << r.report.dump(2);
  EXPECT_EQ(Ranks(f), std::vector<int>{0});
  std::string summary = f["summary"];
  EXPECT_NE(summary.find("barrier#5 @save_checkpoint"), std::string::npos) << summary;
  EXPECT_NE(summary.find("all_reduce#5"), std::string::npos);
  EXPECT_NE(summary.find("@engine.step"), std::string::npos);
  EXPECT_NE(f["remedy"].get<std::string>().find("every rank must call it: DeepSpeed's engine.save_checkpoint()"),
            std::string::npos);
  EXPECT_EQ(f["nodes"], nlohmann::json::array({"node-0"}));
  EXPECT_TRUE(r.report["hang"].get<bool>());
  // Found from the traces long before the 30 s timeout; the stopped ranks are not blamed.
  EXPECT_EQ(FindingOf(r.report, "RANK_EXITED"), nullptr) << r.report.dump(2);
  ExpectLogsOnDisk(r.dir, 4);
  EXPECT_TRUE(fs::exists(r.dir + "/run.json"));
  // A stack per class of hung ranks: rank 0 waits in Gloo's barrier, the others in an all-reduce.
  auto stack0 = ReadFile(r.dir + "/rank-0.stack");
  ASSERT_TRUE(stack0.ok()) << "no stack captured";
  EXPECT_NE(stack0->find("gloo::barrier"), std::string::npos) << *stack0;
  bool class_with_stack = false;
  for (const auto& c : r.report["classes"])
    class_with_stack |= c["description"].get<std::string>().find("stack: ") != std::string::npos;
  EXPECT_TRUE(class_with_stack) << r.report["classes"].dump(2);
  // Post-mortem over the same folder: the same culprit.
  auto a = RunCommand({DSDOCTOR_BIN, "analyze", r.dir, "--json"}, {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->exit_code, 1);
  auto aj = nlohmann::json::parse(a->out, nullptr, false);
  ASSERT_TRUE(aj.is_object()) << a->out << a->err;
  EXPECT_EQ(aj["findings"][0]["code"], "COLLECTIVE_MISMATCH");
  EXPECT_EQ(Ranks(aj["findings"][0]), std::vector<int>{0});
}

TEST_P(RunPlacementTest, SegfaultingRankIsExitedWithItsSignalAndLastOp) {
  REQUIRE_PLACEMENT(GetParam());
  auto r = RunJob("segv", {Example("crash_rank"), "--how", "segv", "--rank", "2"}, {}, {}, GetParam());
  EXPECT_EQ(r.exit_code, 139) << r.out;  // the job's code: 128 + SIGSEGV
  const auto* f = FindingOf(r.report, "RANK_EXITED");
  ASSERT_NE(f, nullptr) << r.report.dump(2);
  EXPECT_EQ(Ranks(*f), std::vector<int>{2});
  EXPECT_NE((*f)["summary"].get<std::string>().find("SIGSEGV"), std::string::npos);
  EXPECT_NE((*f)["summary"].get<std::string>().find("@engine.step"), std::string::npos);
  EXPECT_EQ(r.report["findings"][0]["code"], "RANK_EXITED");
  int exited_findings = 0;
  for (auto& x : r.report["findings"]) exited_findings += x["code"] == "RANK_EXITED";
  EXPECT_EQ(exited_findings, 1) << "the survivors' failures are consequences: " << r.report.dump(2);
}

TEST(RunE2eTest, RankKilledWithSigkillIsRankExited) {
  std::string dir = FreshDir("kill");
  SubprocessOptions so;
  so.log_path = dir + ".out";
  fs::remove(so.log_path);
  auto run = Subprocess::Start(
      {DSDOCTOR_BIN, "run", "--local", "2", "--slots", "2", "--log-dir", dir, "--json", dir + "/report.json", "--",
       Example("train_healthy"), "--steps", "100000", "--step-delay-ms", "5"},
      so);
  ASSERT_TRUE(run.ok());
  // Rank 3's pid from its trace, once it trains.
  int pid = 0;
  for (int i = 0; i < 200 && !pid; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto t = runtime::ReadTrace(dir + "/rank-3.trace");
    if (t.ok() && t->step >= 2) pid = t->pid;
  }
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  auto exit = run->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 128 + SIGKILL);
  auto text = ReadFile(dir + "/report.json");
  ASSERT_TRUE(text.ok());
  auto report = nlohmann::json::parse(*text);
  ASSERT_FALSE(report["findings"].empty());
  EXPECT_EQ(report["findings"][0]["code"], "RANK_EXITED") << report.dump(2);
  EXPECT_EQ(Ranks(report["findings"][0]), std::vector<int>{3});
  EXPECT_NE(report["findings"][0]["summary"].get<std::string>().find("SIGKILL"), std::string::npos);
  EXPECT_NE(report["findings"][0]["remedy"].get<std::string>().find("OOM"), std::string::npos);
}

TEST_P(RunPlacementTest, MismatchedSizeNamesTheOddRankAndCallsite) {
  REQUIRE_PLACEMENT(GetParam());
  auto r = RunJob("size", {Example("mismatched_collective"), "--mode", "size"}, {}, {}, GetParam());
  EXPECT_NE(r.exit_code, 0);
  ASSERT_FALSE(r.report["findings"].empty()) << r.out;
  const auto& f = r.report["findings"][0];
  EXPECT_EQ(f["code"], "COLLECTIVE_MISMATCH") << r.report.dump(2);
  EXPECT_EQ(Ranks(f), std::vector<int>{3});
  EXPECT_NE(f["summary"].get<std::string>().find("all_reduce#8"), std::string::npos);
  EXPECT_NE(f["summary"].get<std::string>().find("@user.metrics"), std::string::npos);
  EXPECT_NE(f["remedy"].get<std::string>().find("element count"), std::string::npos);
}

TEST_P(RunPlacementTest, MismatchedReduceOpIsFoundAlthoughTheJobSucceeds) {
  REQUIRE_PLACEMENT(GetParam());
  auto r = RunJob("op", {Example("mismatched_collective"), "--mode", "op"}, {}, {}, GetParam());
  EXPECT_EQ(r.exit_code, 0) << "run returns the job's own code";
  const auto* f = FindingOf(r.report, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr) << r.report.dump(2);
  EXPECT_EQ(Ranks(*f), std::vector<int>{3});
  EXPECT_NE((*f)["summary"].get<std::string>().find("max"), std::string::npos);
  EXPECT_FALSE(r.report["hang"].get<bool>());
}

TEST_P(RunPlacementTest, SlowRankIsAStraggler) {
  REQUIRE_PLACEMENT(GetParam());
  auto r = RunJob("slow", {Example("slow_rank"), "--rank", "2", "--steps", "12"}, {}, {}, GetParam());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto* f = FindingOf(r.report, "STRAGGLER");
  ASSERT_NE(f, nullptr) << r.report.dump(2);
  EXPECT_EQ(Ranks(*f), std::vector<int>{2});
}

TEST_P(RunPlacementTest, WrongWorldSizeIsFoundInInitDistributed) {
  REQUIRE_PLACEMENT(GetParam());
  auto r = RunJob("world", {Example("wrong_world_size")}, {}, {}, GetParam());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  ASSERT_FALSE(r.report["findings"].empty()) << r.out;
  const auto& f = r.report["findings"][0];
  EXPECT_EQ(f["code"], "RANK_MISSING") << r.report.dump(2);
  EXPECT_NE(f["summary"].get<std::string>().find("started 4 ranks"), std::string::npos);
  EXPECT_NE(f["summary"].get<std::string>().find("expect 5"), std::string::npos);
}

TEST_P(RunPlacementTest, HealthyTrainingHasNoFindingsAndRankEnvironment) {
  REQUIRE_PLACEMENT(GetParam());
  auto r = RunJob("healthy", {Example("train_healthy"), "--steps", "5"}, {}, {}, GetParam());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(r.report["findings"].empty()) << r.report.dump(2);
  ExpectLogsOnDisk(r.dir, 4);
  // Every rank got the rank environment of DESIGN.md.
  auto env = RunJob(
      "env",
      {"/bin/sh", "-c",
       "echo R=$RANK L=$LOCAL_RANK W=$WORLD_SIZE LS=$LOCAL_SIZE C=$CROSS_RANK CS=$CROSS_SIZE T=$DSDOCTOR_TRACE_FILE"},
      {}, {}, GetParam());
  EXPECT_EQ(env.exit_code, 0);
  auto log3 = ReadFile(env.dir + "/rank-3.log");
  ASSERT_TRUE(log3.ok());
  EXPECT_NE(log3->find("R=3 L=1 W=4 LS=2 C=1 CS=2 T=" + env.dir + "/rank-3.trace"), std::string::npos) << *log3;
}

TEST_P(RunPlacementTest, ProgramThatCannotStartExits127AndIsReported) {
  REQUIRE_PLACEMENT(GetParam());
  auto r = RunJob("missing", {"/nonexistent/program"}, {}, {}, GetParam());
  EXPECT_EQ(r.exit_code, 127);
  const auto* f = FindingOf(r.report, "RANK_EXITED");
  ASSERT_NE(f, nullptr) << r.out;
  auto log = ReadFile(r.dir + "/rank-0.log");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("cannot execute /nonexistent/program"), std::string::npos);
}

// Pids of ranks [0, ranks) once each has taken `min_step` steps (read from their traces); fewer
// when they do not get there within 10 s.
std::vector<int> WaitForTraining(const std::string& dir, int ranks, uint64_t min_step) {
  std::vector<int> pids;
  for (int i = 0; i < 200 && static_cast<int>(pids.size()) < ranks; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pids.clear();
    for (int r = 0; r < ranks; ++r)
      if (auto t = runtime::ReadTrace(dir + "/rank-" + std::to_string(r) + ".trace"); t.ok() && t->step >= min_step)
        pids.push_back(t->pid);
  }
  return pids;
}

// A coordinator killed with SIGKILL does not take the job with it (docs/run.md "When the
// coordinator goes"): the ranks train on under their agent, which writes their logs; once they end
// (here: the test stops them, by pid), the agent exits after them and nothing is left.
TEST(RunE2eTest, DeadCoordinatorLeavesTheRanksToTheirAgentAndNothingAfterThem) {
  std::string dir = FreshDir("orphans");
  SubprocessOptions so;
  so.log_path = dir + ".out";
  fs::remove(so.log_path);
  auto run = Subprocess::Start(
      {DSDOCTOR_BIN, "run", "--local", "1", "--slots", "2", "--log-dir", dir, "--quiet", "--reattach-window", "0", "--",
       Example("train_healthy"), "--steps", "100000", "--step-delay-ms", "5"},
      so);
  ASSERT_TRUE(run.ok());
  std::vector<int> pids = WaitForTraining(dir, 2, 1);
  ASSERT_EQ(pids.size(), 2u);
  auto alive = [](int pid) {
    return ::kill(pid, 0) == 0 &&
           ReadFile("/proc/" + std::to_string(pid) + "/stat").value_or("").find(") Z ") == std::string::npos;
  };
  // The agent: the ranks' parent.
  auto stat = ReadFile("/proc/" + std::to_string(pids[0]) + "/stat").value_or("");
  int agent = 0;
  if (size_t close = stat.rfind(')'); close != std::string::npos)
    std::sscanf(stat.c_str() + close + 2, "%*c %d", &agent);
  ASSERT_GT(agent, 0) << stat;
  ::kill(run->pid(), SIGKILL);
  run->Wait(std::chrono::seconds(10));
  const size_t before = ReadFile(dir + "/rank-0.log").value_or("").size();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (int pid : pids) EXPECT_TRUE(alive(pid)) << "rank pid " << pid << " died with its coordinator";
  EXPECT_GT(ReadFile(dir + "/rank-0.log").value_or("").size(), before) << "the rank's log goes on";
  for (int pid : pids) ::kill(pid, SIGTERM);  // the job's end, here
  bool agent_gone = false;
  for (int i = 0; i < 200 && !agent_gone; ++i) {
    agent_gone = !alive(agent);
    if (!agent_gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(agent_gone) << "agent pid " << agent << " outlived its ranks";
  for (int pid : pids) EXPECT_FALSE(alive(pid));
  EXPECT_TRUE(fs::exists(dir + "/rank-0.exit")) << "the agent wrote the ranks' exits";
}

// Nodes that share nothing with the coordinator: after kill -9 of `run`, `dsdoctor attach` in the
// coordinator's namespace takes the run over. The nodes send what the coordinator's copy lacks: the
// run dir ends with every rank's whole log and its exit status, as if the first coordinator had
// watched to the end.
TEST(RunE2eTest, AttachTakesOverARunOnNodesThatShareNothing) {
  REQUIRE_PLACEMENT(e2e::Placement::kSharedNothing);
  const std::string dir = e2e::PlacedRunDir("attach", e2e::Placement::kSharedNothing);
  std::map<std::string, std::string> env;
  const std::string script =
      "dsd=$1; shift; \"$dsd\" run --launcher attach --agents \"$AGENTS\" --token-file \"$TOKEN_FILE\" \"$@\" & C=$!; "
      "for i in $(seq 100); do [ -e " +
      dir + "/agents.json ] && [ -s " + dir +
      "/rank-1.log ] && break; sleep 0.1; done; "
      "sleep 1; kill -9 $C; wait $C; echo run=$?; sleep 1.5; "
      "\"$dsd\" attach " +
      dir + " --quiet --json " + dir + "/attach.json; echo attach=$?";
  auto argv = e2e::PlacedRunArgv(e2e::Placement::kSharedNothing, 2, 1, dir, {"--log-dir", dir, "--quiet"},
                                 {"sh", "-c", "for i in $(seq 12); do echo tick $i; sleep 0.3; done"}, &env, script);
  CommandOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env = env;
  auto res = RunCommand(argv, opts);
  ASSERT_TRUE(res.ok());
  const std::string out = res->out + res->err;
  EXPECT_NE(out.find("run=137"), std::string::npos) << out;
  EXPECT_NE(out.find("attach=0"), std::string::npos) << out;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = ReadFile(dir + "/rank-" + std::to_string(rank) + ".log").value_or("");
    for (int i = 1; i <= 12; ++i)
      EXPECT_NE(log.find("tick " + std::to_string(i) + "\n"), std::string::npos)
          << "rank " << rank << "'s copy lacks tick " << i << ":\n"
          << log;
    EXPECT_EQ(Trim(ReadFile(dir + "/rank-" + std::to_string(rank) + ".exit").value_or("")), "0") << rank;
  }
  auto text = ReadFile(dir + "/attach.json");
  ASSERT_TRUE(text.ok()) << out;
  auto report = nlohmann::json::parse(*text, nullptr, false);
  for (const auto& rank : report["ranks"]) EXPECT_EQ(rank["exit_code"], 0) << rank.dump();
}

TEST(RunE2eTest, InterruptStopsEveryRankAndReports) {
  std::string dir = FreshDir("sigint");
  SubprocessOptions so;
  so.log_path = dir + ".out";
  fs::remove(so.log_path);
  auto run = Subprocess::Start({DSDOCTOR_BIN, "run", "--local", "2", "--slots", "1", "--log-dir", dir, "--quiet", "--",
                                Example("train_healthy"), "--steps", "100000", "--step-delay-ms", "5"},
                               so);
  ASSERT_TRUE(run.ok());
  std::vector<int> pids = WaitForTraining(dir, 2, 1);
  ASSERT_EQ(pids.size(), 2u);
  ::kill(run->pid(), SIGINT);  // Ctrl-C reaches the coordinator
  auto exit = run->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 128 + SIGINT);
  for (int pid : pids) EXPECT_NE(::kill(pid, 0), 0) << "rank pid " << pid << " still runs";
  auto out = ReadFile(so.log_path);
  ASSERT_TRUE(out.ok());
  EXPECT_NE(out->find("stopping every rank"), std::string::npos) << *out;
  EXPECT_TRUE(fs::exists(dir + "/run.json"));
}

TEST(RunE2eTest, BadInputIsAClearUsageError) {
  auto a = RunCommand({DSDOCTOR_BIN, "analyze", "/nonexistent/dir"}, {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->exit_code, 2);
  EXPECT_NE(a->err.find("/nonexistent/dir"), std::string::npos);
  std::string empty = FreshDir("empty");
  fs::create_directories(empty);
  a = RunCommand({DSDOCTOR_BIN, "analyze", empty}, {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->exit_code, 2);
  EXPECT_NE(a->err.find("no rank-<r>.log"), std::string::npos) << a->err;
  a = RunCommand({DSDOCTOR_BIN, "run", "--local", "2"}, {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->exit_code, 2) << "no command";
}

TEST(RunE2eTest, HostfileNodesGetTheirSlotsThroughAgents) {
  std::string dir = FreshDir("hostfile");
  fs::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic(dir + "/hostfile", "# two simulated nodes\nworker-a slots=1\nworker-b slots=3\n").ok());
  auto r = RunCommand({DSDOCTOR_BIN, "run", "--hostfile", dir + "/hostfile", "--launcher", "local", "--log-dir",
                       dir + "/logs", "--json", dir + "/report.json", "--quiet", "--", "/bin/sh", "-c",
                       "echo node=$DSDOCTOR_NODE R=$RANK L=$LOCAL_RANK LS=$LOCAL_SIZE"},
                      {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  auto log0 = ReadFile(dir + "/logs/rank-0.log");
  auto log3 = ReadFile(dir + "/logs/rank-3.log");
  ASSERT_TRUE(log0.ok() && log3.ok());
  EXPECT_NE(log0->find("node=worker-a R=0 L=0 LS=1"), std::string::npos) << *log0;
  EXPECT_NE(log3->find("node=worker-b R=3 L=2 LS=3"), std::string::npos) << *log3;
  // A bad hostfile names its line.
  ASSERT_TRUE(WriteFileAtomic(dir + "/bad", "worker-a slots=x\n").ok());
  r = RunCommand({DSDOCTOR_BIN, "run", "--hostfile", dir + "/bad", "--", "/bin/true"}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_NE(r->err.find(dir + "/bad:1"), std::string::npos) << r->err;
}

TEST(RunE2eTest, DirectModeDiagnosesLikeAgents) {
  auto r = RunJob("direct", {Example("rank0_only_checkpoint")}, {"--direct"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  ASSERT_FALSE(r.report["findings"].empty()) << r.out;
  EXPECT_EQ(r.report["findings"][0]["code"], "COLLECTIVE_MISMATCH");
  EXPECT_EQ(Ranks(r.report["findings"][0]), std::vector<int>{0});
}

TEST(RunE2eTest, AnalyzeReadsARunLocalShFolder) {
  std::string dir = FreshDir("runlocal");
  CommandOptions opts;
  opts.env = {{"LOG_DIR", dir}};
  opts.timeout = std::chrono::seconds(60);
  auto r = RunCommand({"bash", RUN_LOCAL_SH, "3", Example("crash_rank"), "--how", "abort", "--rank", "1"}, opts);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0);
  auto exit1 = ReadFile(dir + "/rank-1.exit");
  ASSERT_TRUE(exit1.ok());
  EXPECT_EQ(*exit1, "134\n");
  auto a = RunCommand({DSDOCTOR_BIN, "analyze", dir, "--json"}, {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->exit_code, 1);
  auto j = nlohmann::json::parse(a->out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << a->out << a->err;
  ASSERT_FALSE(j["findings"].empty());
  EXPECT_EQ(j["findings"][0]["code"], "RANK_EXITED") << j.dump(2);
  EXPECT_EQ(Ranks(j["findings"][0]), std::vector<int>{1});
  EXPECT_NE(j["findings"][0]["summary"].get<std::string>().find("SIGABRT"), std::string::npos);
}

TEST(RunE2eTest, HealthySixtyFourRankJobOnTwoCoresFinishesUntouched) {
  // 8 simulated nodes x 8 ranks on this machine's cores: samples from busy nodes lag, ranks arrive
  // at collectives seconds apart. Nothing may be called a hang, let alone stopped.
  std::string dir = FreshDir("h64");
  auto res = RunCommand({DSDOCTOR_BIN, "run", "--local", "8", "--slots", "8", "--log-dir", dir, "--json",
                         dir + "/report.json", "--quiet", "--", Example("train_healthy"), "--steps", "30"},
                        e2e::WithTimeout(200));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->exit_code, 0) << res->out << res->err;
  EXPECT_EQ(res->out.find("stopping every rank"), std::string::npos) << res->out;
  auto report = nlohmann::json::parse(ReadFile(dir + "/report.json").value_or("{}"), nullptr, false);
  ASSERT_TRUE(report.is_object());
  EXPECT_FALSE(report["hang"].get<bool>());
  for (const auto& f : report["findings"]) EXPECT_NE(f["severity"], "error") << f.dump(2);
  int exited_zero = 0;
  for (const auto& r : report["ranks"]) exited_zero += r["status"] == "exited" && r["exit_code"] == 0;
  EXPECT_EQ(exited_zero, 64);
}

TEST_P(RunPlacementTest, PytorchRankSkippingABarrierIsDiagnosedFromLogsAndProcessState) {
  REQUIRE_PLACEMENT(GetParam());
  REQUIRE_TORCH();
  // --no-trace: the path for programs dsdoctor cannot trace (logs, /proc and stacks only).
  auto r = RunJob("torch", {"/usr/bin/python3", TORCH_SKIP_BARRIER},
                  {"--hang-after", "2", "--on-hang", "wait", "--no-trace"}, {{"STEP_TIMEOUT", "10"}}, GetParam());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  // Live: every rank blocked with flat CPU, before torch's own timeout ended them.
  EXPECT_NE(r.out.find("COLLECTIVE_STALL: all 4 ranks are blocked"), std::string::npos) << r.out;
  // Then the tracebacks say who was where.
  ASSERT_FALSE(r.report["findings"].empty()) << r.out;
  const auto& f = r.report["findings"][0];
  EXPECT_EQ(f["code"], "COLLECTIVE_MISMATCH") << r.report.dump(2);
  EXPECT_EQ(Ranks(f), std::vector<int>{1});
  std::string summary = f["summary"];
  EXPECT_NE(summary.find("barrier() at torch_skip_barrier.py:16"), std::string::npos) << summary;
  EXPECT_NE(summary.find("rank 1 in all_reduce() at torch_skip_barrier.py:13"), std::string::npos) << summary;
}

TEST_P(RunPlacementTest, PytorchHangIsPinpointedLiveFromPythonStacks) {
  REQUIRE_PLACEMENT(GetParam());
  if (!e2e::TorchAvailable()) GTEST_SKIP() << "python3-torch is not installed";
  if (::access(PY_SPY, X_OK) != 0) {
    if (std::getenv("DSDOCTOR_REQUIRE_TORCH"))
      FAIL() << "py-spy missing at " << PY_SPY << " (scripts/setup.sh fetches it)";
    GTEST_SKIP() << "py-spy not fetched";
  }
  // Torch's own timeout is far away (60 s): the finding must come from the live stacks.
  auto t0 = std::chrono::steady_clock::now();
  auto r = RunJob("torchlive", {"/usr/bin/python3", TORCH_SKIP_BARRIER}, {"--hang-after", "2", "--no-trace"},
                  {{"STEP_TIMEOUT", "60"}, {"DSDOCTOR_PY_SPY", PY_SPY}}, GetParam());
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_LT(took, 50) << "stopped on the hang, long before torch's timeout";
  ASSERT_FALSE(r.report["findings"].empty()) << r.out;
  const auto& f = r.report["findings"][0];
  EXPECT_EQ(f["code"], "COLLECTIVE_MISMATCH") << r.report.dump(2);
  EXPECT_EQ(Ranks(f), std::vector<int>{1});
  std::string summary = f["summary"];
  EXPECT_NE(summary.find("ranks wait inside different collectives"), std::string::npos) << summary;
  EXPECT_NE(summary.find("barrier() at torch_skip_barrier.py:16"), std::string::npos) << summary;
  EXPECT_NE(summary.find("rank 1 in all_reduce() at torch_skip_barrier.py:13"), std::string::npos) << summary;
  auto stack = ReadFile(r.dir + "/rank-1.stack");
  ASSERT_TRUE(stack.ok());
  EXPECT_EQ(stack->rfind("# py-spy", 0), 0u) << *stack;
}

// The ranks get NCCL's WARN lines by default and every library's debug output at debug level;
// a value the user set wins (docs/run.md, "Rank environment").
TEST(RunE2eTest, RanksGetTheDiagnosticProfile) {
  const std::vector<std::string> show = {
      "/bin/sh", "-c",
      "echo NCCL_DEBUG=$NCCL_DEBUG TDD=$TORCH_DISTRIBUTED_DEBUG CPP=$TORCH_CPP_LOG_LEVEL "
      "ST=$TORCH_SHOW_CPP_STACKTRACES LL=$DSDOCTOR_LOG_LEVEL"};
  auto plain = RunJob("profile-default", show, {}, {{"DSDOCTOR_LOG_LEVEL", ""}});
  EXPECT_EQ(plain.exit_code, 0) << plain.out;
  auto log = ReadFile(plain.dir + "/rank-1.log");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("NCCL_DEBUG=WARN TDD= CPP= ST= LL="), std::string::npos) << *log;
  auto debug = RunJob("profile-debug", show, {}, {{"DSDOCTOR_LOG_LEVEL", "debug"}, {"TORCH_CPP_LOG_LEVEL", "ERROR"}});
  EXPECT_EQ(debug.exit_code, 0) << debug.out;
  log = ReadFile(debug.dir + "/rank-0.log");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("NCCL_DEBUG=INFO TDD=DETAIL CPP=ERROR ST=1 LL=debug"), std::string::npos) << *log;
}

}  // namespace
}  // namespace dsd
