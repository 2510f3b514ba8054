// `dsdoctor run` on unmodified MPI programs under real Open MPI: the agents (started locally or by
// mpirun) listen for their ranks, one mpirun starts the ranks through `dsdoctor rank-exec`, and each
// rank is handed to its node's agent with the PMPI tracer preloaded (collectors/rank_exec.h). The
// program is found to be MPI by what it links; no flag is given. Each fault must be pinpointed in
// the final report, with the culprit rank and its MPI call, and the job's exit code must be what
// the program's failure was; the ranks' logs, exit files and rings are on disk, as for any run.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/process.h"
#include "runtime/trace.h"
#include "tests/e2e/run_report.h"

namespace dsd {
namespace {

namespace fs = std::filesystem;
using e2e::FindingOf;
using e2e::Ranks;

struct RunOutcome {
  int exit_code = -1;
  nlohmann::json report;
  std::string out;  // dsdoctor's own output and the ranks' streamed lines
  double seconds = 0;
};

// The agents' launcher: local (forked agents) or mpirun (an MPI job of agents beside the ranks').
class MpiRunE2eTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name)
      if (c == '/') c = '-';
    dir_ = fs::temp_directory_path() / ("dsd-mpi-run-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  RunOutcome Run(std::vector<std::string> program, std::vector<std::string> flags = {}) {
    std::vector<std::string> argv = {DSDOCTOR_BIN,   "run",      "--local",   "2",  "--slots",       "2",
                                     "--launcher",   GetParam(), "--log-dir", dir_, "--json",        dir_ + ".json",
                                     "--hang-after", "2",        "--timeout", "3",  "--mpirun-opts", mpirun_opts_};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), program.begin(), program.end());
    RunOutcome o;
    const auto start = std::chrono::steady_clock::now();
    auto r = RunCommand(argv, e2e::WithTimeout(120));
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return o;
    EXPECT_FALSE(r->timed_out) << r->out << r->err;
    o.exit_code = r->exit_code;
    o.out = r->out + r->err;
    o.report = nlohmann::json::parse(ReadFile(dir_ + ".json").value_or("{}"), nullptr, false);
    fs::remove(dir_ + ".json");
    std::printf("%s: exit %d after %.2f s\n", program.size() > 1 ? program[1].c_str() : "", o.exit_code, o.seconds);
    return o;
  }

  std::string Launcher() { return ReadFile(dir_ + "/launcher.log").value_or(""); }

  std::string dir_;
  std::string mpirun_opts_ = "--mca btl tcp,self";
};

std::string Program() { return std::string(EXAMPLES_DIR) + "/mpi_scenarios"; }

int Errors(const nlohmann::json& report) {
  int n = 0;
  for (const auto& f : report.value("findings", nlohmann::json::array())) n += f["severity"] == "error";
  return n;
}

// An option mpirun refuses: no rank ever starts, and the finding that says so quotes mpirun's
// refusal as the cause, with its remedy, once.
TEST_P(MpiRunE2eTest, AnOptionMpirunRefusesIsTheCauseOfRanksThatNeverStarted) {
  mpirun_opts_ = "--mca btl tcp,self --oversubscrbe";
  RunOutcome o = Run({Program(), "healthy", "--iters", "5"});
  EXPECT_NE(o.exit_code, 0) << o.out;
  if (GetParam() == "mpirun") {  // the agents' own mpirun refuses it first: run stops there, saying so
    EXPECT_NE(o.out.find("did not start: mpirun started no agent"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("unknown option \"--oversubscrbe\""), std::string::npos) << o.out;
    return;
  }
  int refusals = 0;
  nlohmann::json cause;
  for (const auto& f : o.report.value("findings", nlohmann::json::array())) {
    if (f.value("summary", "").find("refused its option --oversubscrbe") == std::string::npos) continue;
    ++refusals;
    cause = f;
  }
  ASSERT_FALSE(cause.is_null()) << o.report.dump(1) << o.out;
  EXPECT_EQ(refusals, 1) << o.report.dump(1);
  EXPECT_EQ(cause["code"], "LAUNCH_ERROR");
  EXPECT_EQ(cause["severity"], "error");
  EXPECT_NE(cause.value("remedy", "").find("mpirun --help"), std::string::npos) << cause.dump();
}

TEST_P(MpiRunE2eTest, AHealthyJobIsOneMpiWorldWithEveryRanksLogExitAndRing) {
  RunOutcome o = Run({Program(), "healthy", "--iters", "5"});
  EXPECT_EQ(o.exit_code, 0) << o.out << Launcher();
  EXPECT_EQ(Errors(o.report), 0) << o.report.dump(1);
  for (int r = 0; r < 4; ++r) {
    const std::string rank = std::to_string(r);
    EXPECT_NE(ReadFile(dir_ + "/rank-" + rank + ".log").value_or("").find("rank " + rank + " done"), std::string::npos);
    EXPECT_EQ(ReadFile(dir_ + "/rank-" + rank + ".exit").value_or(""), "0\n");
    auto t = runtime::ReadTrace(dir_ + "/rank-" + rank + ".trace");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    // mpirun's world, not a singleton's: the rank and size MPI gave the program.
    EXPECT_EQ(t->backend, "mpi");
    EXPECT_EQ(t->rank, r);
    EXPECT_EQ(t->world_size, 4);
    EXPECT_TRUE(t->flags & runtime::kTraceFlagFinished);
    EXPECT_EQ(t->InFlight(), nullptr);
    EXPECT_GE(t->records.size(), 30u);
  }
}

// MPI_Allreduce of 2048 floats on rank 3 against 1024 elsewhere: Open MPI aborts with
// MPI_ERR_TRUNCATE and mpirun ends the others; the mismatch is the finding, the others' ends are
// mpirun's teardown, and the job's code is the abort's.
TEST_P(MpiRunE2eTest, AMismatchedAllreduceCountNamesTheRankItsCountAndCall) {
  RunOutcome o = Run({Program(), "count_mismatch"});
  const auto* f = FindingOf(o.report, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr) << o.report.dump(1) << Launcher();
  EXPECT_EQ(Ranks(*f), std::vector<int>{3});
  const std::string summary = (*f)["summary"];
  EXPECT_NE(summary.find("x2048"), std::string::npos) << summary;
  EXPECT_NE(summary.find("MPI_Allreduce@mpi_scenarios+0x"), std::string::npos) << summary;
  EXPECT_EQ(FindingOf(o.report, "RANK_EXITED"), nullptr) << "mpirun's teardown is no culprit: " << o.report.dump(1);
  EXPECT_EQ(o.exit_code, 15) << "MPI_ERR_TRUNCATE's abort code, as mpirun would return";
  // Open MPI's error text ("MPI_ERR_TRUNCATE: message truncated") reaches launcher.log through
  // mpirun when Open MPI does not lose it in its own teardown, which plain mpirun does too (about 1
  // run in 8 here): it is evidence, not what the finding rests on.
  std::printf("Open MPI's error text %s in launcher.log\n",
              Launcher().find("MPI_ERR_TRUNCATE") != std::string::npos ? "is" : "is not");
}

TEST_P(MpiRunE2eTest, ARankThatSkipsTheBarrierIsNamed) {
  RunOutcome o = Run({Program(), "skip_barrier"});
  const auto* f = FindingOf(o.report, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr) << o.report.dump(1) << Launcher();
  EXPECT_EQ(Ranks(*f), std::vector<int>{3});
  EXPECT_NE(std::string((*f)["summary"]).find("MPI_Barrier@mpi_scenarios"), std::string::npos);
  EXPECT_EQ(FindingOf(o.report, "RANK_EXITED"), nullptr) << "the ranks we stopped are no culprits";
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.report.value("hang", false), true) << "a proven hang: dsdoctor stopped the job";
}

TEST_P(MpiRunE2eTest, ASendSendDeadlockNamesBothRanks) {
  RunOutcome o = Run({Program(), "send_deadlock"});
  const auto* f = FindingOf(o.report, "P2P_DEADLOCK");
  ASSERT_NE(f, nullptr) << o.report.dump(1) << Launcher();
  EXPECT_EQ(Ranks(*f), (std::vector<int>{0, 1}));
  EXPECT_NE(f->dump().find("MPI_Send@mpi_scenarios"), std::string::npos) << f->dump(1);
  EXPECT_EQ(o.exit_code, 1);
}

TEST_P(MpiRunE2eTest, AKilledRankIsNamedWithItsSignal) {
  RunOutcome o = Run({Program(), "kill"});
  const auto* f = FindingOf(o.report, "RANK_EXITED");
  ASSERT_NE(f, nullptr) << o.report.dump(1) << Launcher();
  EXPECT_EQ(Ranks(*f), std::vector<int>{1});
  EXPECT_NE(std::string((*f)["summary"]).find("SIGKILL"), std::string::npos);
  int exited = 0;
  for (const auto& g : o.report["findings"]) exited += g["code"] == "RANK_EXITED";
  EXPECT_EQ(exited, 1) << o.report.dump(1);
  EXPECT_EQ(o.exit_code, 128 + SIGKILL);
  EXPECT_EQ(ReadFile(dir_ + "/rank-1.exit").value_or(""), "137\n");
}

TEST_P(MpiRunE2eTest, ABcastAgainstAllreduceNamesTheOddRankOut) {
  RunOutcome o = Run({Program(), "bcast_vs_allreduce"});
  const auto* f = FindingOf(o.report, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr) << o.report.dump(1) << Launcher();
  EXPECT_EQ(Ranks(*f), std::vector<int>{0});
  EXPECT_NE(std::string((*f)["summary"]).find("MPI_Bcast@mpi_scenarios"), std::string::npos);
}

// mpi4py: a Python program is MPI when it imports mpi4py; the same tracer, the same finding.
TEST_P(MpiRunE2eTest, Mpi4pyRanksAreStartedByMpirunAndTraced) {
  if (::system("/usr/bin/python3 -c 'import mpi4py' 2>/dev/null") != 0) {
    if (std::getenv("DSDOCTOR_REQUIRE_MPI4PY")) FAIL() << "python3-mpi4py is not installed (scripts/setup.sh)";
    GTEST_SKIP() << "python3-mpi4py not installed";
  }
  RunOutcome o = Run({"/usr/bin/python3", MPI4PY_SCENARIOS, "skip_barrier"});
  const auto* f = FindingOf(o.report, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr) << o.report.dump(1) << o.out << Launcher();
  EXPECT_EQ(Ranks(*f), std::vector<int>{3});
  EXPECT_NE(std::string((*f)["summary"]).find("MPI_Barrier@mpi4py"), std::string::npos);
}

// --no-mpi: the agents start the ranks, each an MPI singleton of its own; nothing is handed over.
TEST_P(MpiRunE2eTest, NoMpiRunsTheRanksAsSingletons) {
  RunOutcome o = Run({Program(), "healthy", "--iters", "1"}, {"--no-mpi", "--no-trace"});
  EXPECT_EQ(Launcher().find("rank-exec"), std::string::npos);
  for (int r = 0; r < 4; ++r) {
    // Each singleton is rank 0 of 1: the program's own line says so.
    EXPECT_NE(ReadFile(dir_ + "/rank-" + std::to_string(r) + ".log").value_or("").find("rank 0 done"),
              std::string::npos)
        << o.out;
  }
}

// --dry-run shows the mpirun that would start an MPI program's ranks, and starts nothing.
TEST(MpiRunPlanTest, ADryRunShowsTheRanksMpirun) {
  auto r = RunCommand({DSDOCTOR_BIN, "run", "--local", "2", "--slots", "3", "--dry-run", "--", Program(), "healthy"},
                      e2e::WithTimeout(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->err;
  EXPECT_NE(r->out.find("MPI ranks started by: "), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("-np 6 --bind-to none --map-by slot --host localhost:6 "), std::string::npos) << r->out;
  EXPECT_NE(r->out.find(" rank-exec --nodes 3:dsdoctor-rank-exec/RUN_ID/0,3:dsdoctor-rank-exec/RUN_ID/1 -- " +
                        Program() + " healthy"),
            std::string::npos)
      << r->out;
  EXPECT_NE((r->out + r->err).find("is an MPI program"), std::string::npos) << r->out;
  auto json =
      RunCommand({DSDOCTOR_BIN, "run", "--local", "1", "--dry-run", "--json", "-", "--no-mpi", "--", Program()}, {});
  ASSERT_TRUE(json.ok());
  auto plan = nlohmann::json::parse(json->out, nullptr, false);
  ASSERT_TRUE(plan.is_object()) << json->out;
  EXPECT_FALSE(plan.contains("mpirun")) << "--no-mpi: the agents start the ranks";
}

// An mpirun that refuses its options starts no rank: never a clean run, live or in analyze.
TEST(MpiRunPlanTest, RanksMpirunNeverStartedAreALaunchErrorNotAGreenRun) {
  const std::string dir = fs::temp_directory_path() / ("dsd-mpi-run-never-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto r = RunCommand({DSDOCTOR_BIN, "run", "--local", "2", "--slots", "2", "--log-dir", dir, "--json", "-", "--quiet",
                       "--mpirun-opts", "--no-such-option", "--", Program(), "healthy"},
                      e2e::WithTimeout(120));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1) << r->err;
  const auto start = r->out.find('{');
  auto report = nlohmann::json::parse(r->out.substr(start == std::string::npos ? 0 : start), nullptr, false);
  const auto* f = FindingOf(report, "LAUNCH_ERROR");
  ASSERT_NE(f, nullptr) << r->out << r->err;
  EXPECT_EQ(Ranks(*f), (std::vector<int>{0, 1, 2, 3}));
  auto analyzed = RunCommand({DSDOCTOR_BIN, "analyze", "--json", dir}, e2e::WithTimeout(60));
  ASSERT_TRUE(analyzed.ok());
  EXPECT_EQ(analyzed->exit_code, 1);
  const auto analysis = nlohmann::json::parse(analyzed->out, nullptr, false);
  const auto* g = FindingOf(analysis, "LAUNCH_ERROR");
  ASSERT_NE(g, nullptr) << analyzed->out;
  EXPECT_EQ(Ranks(*g), (std::vector<int>{0, 1, 2, 3}));
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Launchers, MpiRunE2eTest, ::testing::Values("local", "mpirun"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dsd
