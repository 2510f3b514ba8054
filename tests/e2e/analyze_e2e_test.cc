// `dsdoctor analyze` on the single log file a user has: a real combined log of a real PyTorch job
// under a real launcher (Open MPI's mpirun --tag-output), standard input, and combined logs in
// the formats of public bug reports (cited beside each) for what cannot run here (NCCL on GPUs,
// multi-node pdsh).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/file.h"
#include "common/net.h"
#include "common/process.h"
#include "common/run_files.h"
#include "tests/e2e/run_report.h"

namespace dsd {
namespace {

namespace fs = std::filesystem;
using e2e::FindingOf;
using e2e::Ranks;

struct Analysis {
  int exit_code = -1;
  std::string out, err;
  nlohmann::json report;
};

Analysis Analyze(std::vector<std::string> args, bool json = true) {
  std::vector<std::string> argv = {DSDOCTOR_BIN, "analyze"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (json) argv.push_back("--json");
  auto r = RunCommand(argv, e2e::WithTimeout(120));
  Analysis a;
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return a;
  a.exit_code = r->exit_code;
  a.out = r->out;
  a.err = r->err;
  if (json) a.report = nlohmann::json::parse(r->out, nullptr, false);
  return a;
}

// Log files the tests write, removed when the test binary ends.
struct TempLogs : ::testing::Environment {
  std::vector<std::string> paths;
  void TearDown() override {
    for (auto& p : paths) fs::remove(p);
  }
};
TempLogs* temp_logs = static_cast<TempLogs*>(::testing::AddGlobalTestEnvironment(new TempLogs));

std::string WriteLog(const std::string& name, const std::string& text) {
  std::string path = fs::temp_directory_path() / ("dsd-analyze-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(path) << text;
  temp_logs->paths.push_back(path);
  return path;
}

// The line of `path` that `where` ("file:line") points at.
std::string LineAt(const std::string& where) {
  size_t colon = where.rfind(':');
  std::ifstream in(where.substr(0, colon));
  int want = std::stoi(where.substr(colon + 1));
  std::string line;
  for (int i = 1; std::getline(in, line); ++i)
    if (i == want) return line;
  return "";
}

// A folder of PyTorch Flight Recorder dumps from a user's own job (torch 2.15, gloo, 3 ranks: rank 0
// in broadcast while ranks 1-2 all-reduce; docs/flight-recorder.md): read natively, the odd rank is
// named with its line. With a rank's dump missing, the report says so and is never a clean exit.
TEST(AnalyzeE2eTest, FlightRecorderDumpsNameTheRankThatCalledAnotherCollective) {
  auto a = Analyze({FR_GLOO_MISMATCH});
  EXPECT_EQ(a.exit_code, 1) << a.out << a.err;
  ASSERT_TRUE(a.report.is_object()) << a.out << a.err;
  ASSERT_FALSE(a.report["findings"].empty()) << a.out;
  const auto& f = a.report["findings"][0];
  EXPECT_EQ(f["code"], "COLLECTIVE_MISMATCH") << a.out;
  EXPECT_EQ(Ranks(f), std::vector<int>{0});
  EXPECT_NE(f["summary"].get<std::string>().find("broadcast#4 float32 x4 @make_gloo_dumps.py:31"), std::string::npos)
      << f["summary"];
  std::string partial = fs::temp_directory_path() / ("dsd-fr-partial-" + std::to_string(::getpid()));
  fs::create_directories(partial);
  fs::copy_file(std::string(FR_GLOO_MISMATCH) + "/rank_1", partial + "/rank_1", fs::copy_options::overwrite_existing);
  fs::copy_file(std::string(FR_GLOO_MISMATCH) + "/rank_2", partial + "/rank_2", fs::copy_options::overwrite_existing);
  auto p = Analyze({partial});
  fs::remove_all(partial);
  EXPECT_EQ(p.exit_code, 1) << p.out << p.err;
  ASSERT_TRUE(p.report.is_object()) << p.out << p.err;
  ASSERT_TRUE(p.report.contains("evidence_missing")) << p.out;
  EXPECT_NE(p.report["evidence_missing"][0].get<std::string>().find("rank 0: no Flight Recorder dump"),
            std::string::npos)
      << p.out;
}

// A run dir whose ranks left no trace of ours (the tracer was off) but whose Flight Recorder dumps
// `run` collected: the dumps stand in for the traces, and the report says where the calls came from.
// With traces beside them, the dumps are only pointed at: the two number collectives differently.
TEST(AnalyzeE2eTest, ARunDirsFlightRecorderDumpsStandInForMissingTraces) {
  const std::string dir = fs::temp_directory_path() / ("dsd-fr-rundir-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const RunDir run(dir);
  fs::create_directories(run.FlightRecorderIncident(2));
  fs::create_directories(run.FlightRecorderIncident(1));  // an older incident: the newest is read
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(WriteFileAtomic(run.RankLog(r), "step 0\n").ok());
    fs::copy_file(std::string(FR_GLOO_MISMATCH) + "/rank_" + std::to_string(r), run.FlightRecorderDump(2, r));
  }
  auto a = Analyze({dir});
  EXPECT_EQ(a.exit_code, 1) << a.out << a.err;
  ASSERT_TRUE(a.report.is_object()) << a.out << a.err;
  ASSERT_FALSE(a.report["findings"].empty()) << a.out;
  EXPECT_EQ(a.report["findings"][0]["code"], "COLLECTIVE_MISMATCH") << a.out;
  EXPECT_EQ(Ranks(a.report["findings"][0]), std::vector<int>{0}) << a.out;
  EXPECT_NE(a.out.find("their collectives come from PyTorch's Flight Recorder dumps (3 of 3 ranks)"), std::string::npos)
      << a.out << a.err;
  fs::remove_all(dir);
}

// torchrun's error file, the one artefact a user of `torchrun` with `@record` may have: the exception
// and the program's line that raised it, from the worker's own file (its rank from a name like
// rank_1.json) or torchrun's copy of it.
TEST(AnalyzeE2eTest, TorchrunsErrorFileNamesTheExceptionAndItsLine) {
  const std::string dir = fs::temp_directory_path() / ("dsd-te-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string named = dir + "/rank_1.json";
  fs::copy_file(TORCHELASTIC_DIR "/worker_rank_1.json", named, fs::copy_options::overwrite_existing);
  for (const std::string& path : {named, std::string(TORCHELASTIC_DIR "/torchrun_root_cause.json")}) {
    auto a = Analyze({path}, /*json=*/false);
    EXPECT_EQ(a.exit_code, 1) << path << "\n" << a.out << a.err;
    EXPECT_NE(a.out.find("ValueError: batch 2 has 7 samples, the model wants 8 (at fail_rank1.py:11)"),
              std::string::npos)
        << path << "\n"
        << a.out << a.err;
    if (path == named) EXPECT_NE(a.out.find("rank 1"), std::string::npos) << a.out;
  }
  fs::remove_all(dir);
}

// torch's own analyser and dsdoctor on the same dumps: real torch 2.15 gloo dumps (a mismatch, a rank
// that never joins, a healthy job) in the NCCL shape torchfrtrace reads
// (tests/fixtures/flight_recorder/to_nccl_shape.py). The same culprit at the same sequence number, or
// no problem from both; where torchfrtrace refuses (a rank's dump missing) dsdoctor still names one
// and says which dump is missing.
struct FrVerdict {
  std::set<int> culprits;  // empty: no problem
  int seq = -1;
};

// "Culprit rank 0; Error type: …" / "missing ranks: {2}", and "sequence number: 4".
FrVerdict TorchfrtraceVerdict(const std::string& out) {
  FrVerdict v;
  auto number_after = [&](const std::string& key) {
    size_t at = out.find(key);
    return at == std::string::npos ? -1 : std::atoi(out.c_str() + at + key.size());
  };
  if (int c = number_after("Culprit rank "); c >= 0) v.culprits.insert(c);
  if (size_t at = out.find("missing ranks: {"); at != std::string::npos) {
    const std::string list = out.substr(at + 16, out.find('}', at) - at - 16);  // "1, 2"
    int n = -1;
    for (char ch : list + ",") {
      if (std::isdigit(static_cast<unsigned char>(ch))) {
        n = (n < 0 ? 0 : n * 10) + (ch - '0');
      } else if (n >= 0) {
        v.culprits.insert(n);
        n = -1;
      }
    }
  }
  v.seq = number_after("sequence number: ");
  return v;
}

// The one log a user has and the Flight Recorder dumps of the same job, given together, are joined
// by (group, SeqNum): the watchdog's timeout lines name the recorded call (op, size, the program's
// line), and the rank the records show missing is one finding that the watchdog's lines prove.
// Log format: torch 2.x's watchdog line (ProcessGroupNCCL.cpp) as in the catalogue's examples.
TEST(AnalyzeE2eTest, TheJobsLogAndItsFlightRecorderDumpsAreJoinedBySeq) {
  std::string text;
  for (int r = 0; r < 2; ++r)
    text += "[rank" + std::to_string(r) + "]:[E1207 10:44:12.71529874" + std::to_string(r) +
            " ProcessGroupNCCL.cpp:632] [Rank " + std::to_string(r) +
            "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=4, "
            "NumelOut=4, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n";
  const std::string log = WriteLog("joined.log", text);
  const std::string dumps = std::string(FR_FIXTURES) + "/torch2.15_gloo_missing";
  auto a = Analyze({log, dumps});
  EXPECT_EQ(a.exit_code, 1) << a.out << a.err;
  ASSERT_TRUE(a.report.is_object()) << a.out << a.err;
  int missing = 0;
  for (const auto& f : a.report["findings"]) missing += f["code"] == "RANK_MISSING";
  EXPECT_EQ(missing, 1) << a.report.dump(2);
  const auto& f = a.report["findings"][0];
  EXPECT_EQ(f["code"], "RANK_MISSING") << a.report.dump(2);
  EXPECT_EQ(Ranks(f), std::vector<int>{2});
  EXPECT_EQ(f["severity"], "error");
  EXPECT_NE(f["summary"].get<std::string>().find("SeqNum=4"), std::string::npos) << f["summary"];
  const std::string evidence = f["evidence"].dump();
  EXPECT_NE(evidence.find("joined.log:1"), std::string::npos) << evidence;
  EXPECT_NE(evidence.find("Flight Recorder of rank 0: all_reduce#4 float32 x4 @make_gloo_dumps.py:47"),
            std::string::npos)
      << evidence;
  const auto* watchdog = FindingOf(a.report, "WATCHDOG_TIMEOUT");
  ASSERT_TRUE(watchdog);
  EXPECT_EQ((*watchdog)["severity"], "warning") << watchdog->dump(2);
  // Two folders of dumps, or a run dir with anything else, are a usage error naming the path.
  auto two = Analyze({log, dumps, std::string(FR_FIXTURES) + "/torch2.15_gloo_healthy"}, false);
  EXPECT_EQ(two.exit_code, 2) << two.out << two.err;
  EXPECT_NE(two.err.find("torch2.15_gloo_healthy' is a second folder of Flight Recorder dumps"), std::string::npos)
      << two.err;
}

TEST(AnalyzeE2eTest, FlightRecorderVerdictsAgreeWithTorchfrtrace) {
  const std::string venv = TORCH2_VENV;
  if (!fs::exists(venv + "/bin/torchfrtrace")) {
    if (std::getenv("DSDOCTOR_REQUIRE_TORCH"))
      FAIL() << venv << ": no torchfrtrace (scripts/setup.sh installs torch 2.15)";
    GTEST_SKIP() << "the torch 2.15 venv is not installed";
  }
  const std::string base = fs::temp_directory_path() / ("dsd-frtrace-" + std::to_string(::getpid()));
  for (const std::string scenario : {"mismatch", "missing", "healthy", "wrapped"}) {
    SCOPED_TRACE(scenario);
    const std::string dir = base + "/" + scenario;
    auto shaped = RunCommand(
        {venv + "/bin/python", FR_FIXTURES "/to_nccl_shape.py", FR_FIXTURES "/torch2.15_gloo_" + scenario, dir},
        e2e::WithTimeout(60));
    ASSERT_TRUE(shaped.ok() && shaped->exit_code == 0) << (shaped.ok() ? shaped->err : shaped.status().message());
    auto theirs = RunCommand({venv + "/bin/torchfrtrace", dir, "-p", "rank_"}, e2e::WithTimeout(120));
    ASSERT_TRUE(theirs.ok());
    ASSERT_EQ(theirs->exit_code, 0) << theirs->out << theirs->err;
    const FrVerdict want = TorchfrtraceVerdict(theirs->out + theirs->err);
    auto ours = Analyze({dir});
    ASSERT_TRUE(ours.report.is_object()) << ours.out << ours.err;
    std::set<int> named;
    int seq = -1;
    for (const auto& f : ours.report["findings"]) {
      if (f["code"] != "COLLECTIVE_MISMATCH" && f["code"] != "RANK_MISSING") continue;
      for (int r : Ranks(f)) named.insert(r);
      const std::string summary = f["summary"];
      if (size_t at = summary.find('#'); at != std::string::npos) seq = std::atoi(summary.c_str() + at + 1);
      break;
    }
    EXPECT_EQ(named, want.culprits) << "torchfrtrace:\n" << theirs->out << theirs->err << "\ndsdoctor:\n" << ours.out;
    if (!want.culprits.empty()) EXPECT_EQ(seq, want.seq) << ours.out;
    if (want.culprits.empty()) EXPECT_EQ(ours.exit_code, 0) << ours.out;
  }
  // A rank's dump missing: torchfrtrace refuses the set; dsdoctor names the rank that differs from the
  // dumps it has and says whose dump is missing.
  const std::string partial = base + "/partial";
  fs::create_directories(partial);
  for (const char* r : {"rank_0", "rank_2"}) fs::copy_file(base + "/mismatch/" + r, partial + "/" + r);
  auto refused = RunCommand({venv + "/bin/torchfrtrace", partial, "-p", "rank_"}, e2e::WithTimeout(120));
  ASSERT_TRUE(refused.ok());
  EXPECT_NE(refused->out + refused->err, std::string()) << "torchfrtrace says why it stops";
  EXPECT_EQ(TorchfrtraceVerdict(refused->out + refused->err).culprits, std::set<int>{}) << refused->out << refused->err;
  auto ours = Analyze({partial});
  EXPECT_EQ(ours.exit_code, 1) << ours.out;
  ASSERT_TRUE(ours.report.is_object()) << ours.out << ours.err;
  ASSERT_FALSE(ours.report["findings"].empty()) << ours.out;
  EXPECT_EQ(ours.report["findings"][0]["code"], "COLLECTIVE_MISMATCH") << ours.out;
  ASSERT_TRUE(ours.report.contains("evidence_missing")) << ours.out;
  EXPECT_NE(ours.report["evidence_missing"][0].get<std::string>().find("rank 1: no Flight Recorder dump"),
            std::string::npos)
      << ours.out;
  fs::remove_all(base);
}

TEST(AnalyzeE2eTest, RealMpirunTorchJobNamesTheRankThatRanOutOfMemoryFirst) {
  REQUIRE_TORCH();
  std::string log = fs::temp_directory_path() / ("dsd-analyze-mpi-" + std::to_string(::getpid()) + ".log");
  int free_port = 0;
  {
    auto l = net::Listen("127.0.0.1", 0, &free_port, 1);
    ASSERT_TRUE(l.ok());
  }
  std::string port = std::to_string(free_port);
  // mpirun --tag-output: every line "[1,R]<stdout|stderr>:"; one combined file, as users paste it.
  auto run = RunCommand({"/bin/sh", "-c",
                         "mpirun --allow-run-as-root --oversubscribe --tag-output -np 3 -x MASTER_PORT=" + port +
                             " /usr/bin/python3 " TORCH_OOM_RANK " > " + log + " 2>&1"},
                        e2e::WithTimeout(120));
  ASSERT_TRUE(run.ok());
  EXPECT_NE(run->exit_code, 0);
  auto a = Analyze({log});
  EXPECT_EQ(a.exit_code, 1) << a.out << a.err;
  ASSERT_TRUE(a.report.is_object()) << a.out;
  const auto& first = a.report["findings"][0];
  EXPECT_EQ(first["code"], "OUT_OF_MEMORY") << a.report.dump(2);
  EXPECT_EQ(Ranks(first), std::vector<int>{2});
  // Its evidence points at the real line.
  std::string where;
  for (const auto& ev : first["evidence"]) {
    std::string s = ev;
    if (s.rfind(log + ":", 0) == 0) where = s.substr(0, s.find(' '));
  }
  ASSERT_FALSE(where.empty()) << first.dump(2);
  EXPECT_NE(LineAt(where).find("[1,2]<stderr>:Traceback"), std::string::npos) << where;
  // The others' lost connections (closed or reset, as the race goes) are its echo, not errors of
  // their own.
  std::set<int> echo_ranks;
  for (const auto& f : a.report["findings"]) {
    if (f["code"] == "OUT_OF_MEMORY" || f["code"] == "RANK_EXITED") continue;
    EXPECT_EQ(f["severity"], "warning") << f.dump(2);
    for (int r : Ranks(f)) echo_ranks.insert(r);
  }
  EXPECT_FALSE(echo_ranks.empty()) << a.report.dump(2);
  EXPECT_FALSE(echo_ranks.count(2));
  // mpirun's "first process to exit" table makes an exit known: rank 2's, or, when a peer's exit
  // reached mpirun first (a loaded machine), that peer's as a consequence.
  const auto* exited = FindingOf(a.report, "RANK_EXITED");
  ASSERT_TRUE(exited);
  if (Ranks(*exited) != std::vector<int>{2}) {
    EXPECT_EQ((*exited)["severity"], "warning") << exited->dump(2);
  }
  EXPECT_EQ(FindingOf(a.report, "RANK_MISSING"), nullptr) << a.report.dump(2);
  // The same from standard input.
  auto piped =
      RunCommand({"/bin/sh", "-c", std::string(DSDOCTOR_BIN) + " analyze - --json < " + log}, e2e::WithTimeout(60));
  ASSERT_TRUE(piped.ok());
  EXPECT_EQ(piped->exit_code, 1);
  auto report = nlohmann::json::parse(piped->out, nullptr, false);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["findings"][0]["code"], "OUT_OF_MEMORY");
  EXPECT_NE(report["findings"][0]["evidence"].dump().find("<stdin>:"), std::string::npos);
  if (HasFailure())
    ADD_FAILURE() << "the log is kept: " << log;  // mpirun's interleaving varies from run to run
  else
    fs::remove(log);
}

// The same job's log when mpirun's table names a peer that lost its connection (its exit reached
// mpirun before the out-of-memory rank had finished exiting; seen under load): the first failure in
// the log still leads, the peer's exit is a consequence, and no rank is called missing (every rank's
// log says it failed).
TEST(AnalyzeE2eTest, AnExitMpirunSawFirstThatFollowedTheFirstFailureIsAConsequence) {
  const std::string log =
      WriteLog("mpi-peer-first.log",
               "[1,1]<stdout>:rank 1 step 1 done\n"
               "[1,0]<stdout>:rank 0 step 1 done\n"
               "[1,2]<stderr>:Traceback (most recent call last):\n"
               "[1,2]<stderr>:  File \"/job/torch_oom_rank.py\", line 20, in <module>\n"
               "[1,2]<stderr>:    buf = bytearray(10**15)\n"
               "[1,2]<stderr>:MemoryError\n"
               "[1,0]<stderr>:Traceback (most recent call last):\n"
               "[1,0]<stderr>:  File \"/job/torch_oom_rank.py\", line 21, in <module>\n"
               "[1,0]<stderr>:    dist.all_reduce(t)\n"
               "[1,0]<stderr>:RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by "
               "peer [127.0.0.1]:51103\n"
               "[1,1]<stderr>:Traceback (most recent call last):\n"
               "[1,1]<stderr>:  File \"/job/torch_oom_rank.py\", line 21, in <module>\n"
               "[1,1]<stderr>:    dist.all_reduce(t)\n"
               "[1,1]<stderr>:RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by "
               "peer [127.0.0.1]:10149\n"
               "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
               "the job to be terminated. The first process to do so was:\n"
               "\n"
               "  Process name: [[13671,1],1]\n"
               "  Exit code:    1\n");
  auto a = Analyze({log});
  EXPECT_EQ(a.exit_code, 1);
  ASSERT_TRUE(a.report.is_object()) << a.out;
  ASSERT_FALSE(a.report["findings"].empty());
  EXPECT_EQ(a.report["findings"][0]["code"], "OUT_OF_MEMORY") << a.report.dump(2);
  EXPECT_EQ(Ranks(a.report["findings"][0]), std::vector<int>{2});
  EXPECT_EQ(FindingOf(a.report, "RANK_MISSING"), nullptr) << a.report.dump(2);
  const auto* exited = FindingOf(a.report, "RANK_EXITED");
  ASSERT_TRUE(exited);
  EXPECT_EQ(Ranks(*exited), std::vector<int>{1});
  EXPECT_EQ((*exited)["severity"], "warning");
  EXPECT_NE((*exited)["summary"].get<std::string>().find("a consequence: after rank 2 failed first"), std::string::npos)
      << exited->dump(2);
}

TEST(AnalyzeE2eTest, WatchdogReportsNameTheRankThatNeverArrived) {
  // torch >= 2.2 under torchrun: "[rankN]:" then the C++ logger; ranks 1-3 time out in ALLREDUCE
  // SeqNum=2, rank 0 never does (format: https://github.com/hiyouga/LlamaFactory/issues/6269).
  std::string text =
      "[rank0]:step 1 loss 2.31\n[rank1]:step 1 loss 2.29\n[rank2]:step 1 loss 2.30\n[rank3]:step 1 loss 2.28\n";
  for (int r = 1; r < 4; ++r)
    text +=
        "[rank" + std::to_string(r) + "]:[E501 12:30:00.000000000 ProcessGroupNCCL.cpp:607] [Rank " +
        std::to_string(r) +
        "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=1800000) ran for 1800012 milliseconds before timing out.\n";
  auto a = Analyze({WriteLog("watchdog.log", text)});
  EXPECT_EQ(a.exit_code, 1);
  const auto& first = a.report["findings"][0];
  EXPECT_EQ(first["code"], "RANK_MISSING") << a.report.dump(2);
  EXPECT_EQ(Ranks(first), std::vector<int>{0});
  EXPECT_NE(first["summary"].get<std::string>().find("ALLREDUCE SeqNum=2"), std::string::npos);
  const auto* wd = FindingOf(a.report, "WATCHDOG_TIMEOUT");
  ASSERT_TRUE(wd);
  EXPECT_EQ((*wd)["severity"], "warning");
}

TEST(AnalyzeE2eTest, DumpSignalsNameTheRanksWithNothingInFlight) {
  // torch >= 2.4: once rank 2's watchdog times out every rank prints its counters
  // (https://github.com/lsdefine/simple_GRPO/issues/46). Rank 5 had enqueued as much as it completed;
  // ranks 0 and 1 wait in work 137.
  auto dump = [](int rank, int from, int enqueued, int completed) {
    return "[rank" + std::to_string(rank) + "]:[E723 01:58:45.667329643 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID " +
           "0(default_pg) Rank " + std::to_string(rank) + "] Received a dump signal due to a collective timeout from " +
           (from == rank ? std::string("this local rank") : " rank " + std::to_string(from)) +
           " and we will try our best to dump the debug info. Last enqueued NCCL work: " + std::to_string(enqueued) +
           ", last completed NCCL work: " + std::to_string(completed) +
           ".This is most likely caused by incorrect "
           "usages of collectives, e.g., wrong sizes used across ranks.\n";
  };
  std::string text = "[rank5]:step 136 loss 0.31\n" + dump(2, 2, 137, 136) + dump(0, 2, 137, 136) +
                     dump(1, 2, 137, 136) + dump(5, 2, 136, 136);
  auto a = Analyze({WriteLog("dump.log", text)});
  EXPECT_EQ(a.exit_code, 1);
  const auto& first = a.report["findings"][0];
  EXPECT_EQ(first["code"], "RANK_MISSING") << a.report.dump(2);
  EXPECT_EQ(Ranks(first), std::vector<int>{5});
  EXPECT_NE(first["summary"].get<std::string>().find("rank 2's collective timed out"), std::string::npos)
      << first.dump(2);
  EXPECT_NE(first["evidence"].dump().find("ranks 0,1 had work in flight"), std::string::npos) << first.dump(2);

  // One rank's line alone (all the user pasted) still names it, and never says "no problems found".
  auto one = Analyze({WriteLog("dump-one.log", dump(5, 2, 136, 136))});
  EXPECT_EQ(one.exit_code, 1);
  ASSERT_FALSE(one.report["findings"].empty()) << one.report.dump(2);
  EXPECT_EQ(one.report["findings"][0]["code"], "RANK_MISSING") << one.report.dump(2);
  EXPECT_EQ(Ranks(one.report["findings"][0]), std::vector<int>{5});

  // A rank with nothing in flight that completed past the work another waits in did issue it (a
  // pipeline's send, a rank ahead): not named.
  auto ahead = Analyze({WriteLog("dump-ahead.log", dump(2, 2, 10, 9) + dump(1, 2, 12, 12))});
  EXPECT_EQ(FindingOf(ahead.report, "RANK_MISSING"), nullptr) << ahead.report.dump(2);
  ASSERT_TRUE(FindingOf(ahead.report, "WATCHDOG_TIMEOUT")) << ahead.report.dump(2);

  // Every rank with work in flight: no one is named missing, the timeout is reported.
  auto busy = Analyze({WriteLog("dump-busy.log", dump(0, 1, 9, 8) + dump(1, 1, 9, 8))});
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_EQ(FindingOf(busy.report, "RANK_MISSING"), nullptr) << busy.report.dump(2);
  ASSERT_TRUE(FindingOf(busy.report, "WATCHDOG_TIMEOUT")) << busy.report.dump(2);
}

TEST(AnalyzeE2eTest, TorchfrtraceReportsNameTheMissingRanks) {
  // torchfrtrace's block layout (https://github.com/pytorch/pytorch/pull/140969), printed twice for two
  // collectives the same ranks skipped, and the older one-line layout (torch 2.5's builder.py).
  std::string block =
      "Not all ranks joining collective: sequence number: 31117\ninternal record id: 31116\ngroup info: "
      "0:default_pg\ncollective: nccl:all_reduce\nmissing ranks: {3, 4, 5, 6, 7}\ninput sizes: [[1571911]]\n"
      "output sizes: [[1571911]]\nworld size: 8\nexpected ranks: {0, 1, 2, 3, 4, 5, 6, 7}\ncollective state: "
      "scheduled\ncollective stack trace:\n all_reduce at /w/torch/distributed/distributed_c10d.py:2707\n"
      "sync_buffers at /w/models/gaussian_splatting.py:650\n";
  std::string second = block;
  second.replace(second.find("31117"), 5, "31118");
  auto a = Analyze({WriteLog("frtrace.log", block + second)});
  EXPECT_EQ(a.exit_code, 1);
  ASSERT_EQ(a.report["findings"].size(), 1u) << a.report.dump(2);
  const auto& f = a.report["findings"][0];
  EXPECT_EQ(f["code"], "RANK_MISSING");
  EXPECT_EQ(Ranks(f), (std::vector<int>{3, 4, 5, 6, 7}));
  EXPECT_NE(f["summary"].get<std::string>().find("never joined all_reduce (sequence number 31117)"), std::string::npos)
      << f.dump(2);
  EXPECT_NE(f["summary"].get<std::string>().find("1 more report"), std::string::npos) << f.dump(2);

  auto old = Analyze({WriteLog("frtrace-old.log",
                               "Not all ranks joining collective for group 0:default_pg collective nccl:broadcast  "
                               "Missing ranks are {1}  [[3, 4]] [[3, 4]] 2 scheduled \nCollective stack traces: \n")});
  EXPECT_EQ(old.exit_code, 1);
  ASSERT_FALSE(old.report["findings"].empty()) << old.report.dump(2);
  EXPECT_EQ(old.report["findings"][0]["code"], "RANK_MISSING");
  EXPECT_EQ(Ranks(old.report["findings"][0]), std::vector<int>{1});
  EXPECT_NE(old.report["findings"][0]["summary"].get<std::string>().find("never joined broadcast"), std::string::npos);
}

TEST(AnalyzeE2eTest, AnNcclInternalErrorWhoseLastErrorIsAClosedSocketIsTheLostPeer) {
  // NCCL 2.14 reports the lost connection as an internal error (https://github.com/NVIDIA/nccl/issues/1514).
  auto a = Analyze({WriteLog(
      "internal.log",
      "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, "
      "internal error, NCCL version 2.14.3\nncclInternalError: Internal check failed.\nLast error:\nNet : Connection "
      "closed by remote peer user<43236>\n")});
  EXPECT_EQ(a.exit_code, 1);
  const auto& first = a.report["findings"][0];
  EXPECT_NE(first["summary"].get<std::string>().find("a peer closed its connection"), std::string::npos)
      << a.report.dump(2);
  EXPECT_EQ(first["severity"], "error");
  for (const auto& f : a.report["findings"])
    if (f["summary"].get<std::string>().find("internal error") != std::string::npos) {
      EXPECT_EQ(f["severity"], "warning") << f.dump(2);
    }
}

TEST(AnalyzeE2eTest, AnNcclSystemErrorWhoseLastErrorIsAFailedConnectNamesThePeer) {
  // NCCL 2.19+ reports a connect that failed as "unhandled system error"; its "Last error:" names the
  // peer, which is the finding, whether the exception is alone or at the end of a traceback.
  const std::string exception =
      "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
      "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
      "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
      "Last error:\nsocketStartConnect: Connect to 10.0.0.2<43215> failed : Software caused connection abort\n";
  std::string frames = "Traceback (most recent call last):\n";
  for (int i = 0; i < 12; ++i) frames += "  File \"/w/lib" + std::to_string(i) + ".py\", line 3, in f\n    f()\n";
  for (const std::string& text : {exception, frames + exception}) {
    auto a = Analyze({WriteLog("system.log", text)});
    EXPECT_EQ(a.exit_code, 1);
    const auto& first = a.report["findings"][0];
    EXPECT_NE(first["summary"].get<std::string>().find("could not connect to 10.0.0.2"), std::string::npos)
        << a.report.dump(2);
    for (const auto& f : a.report["findings"])
      if (f["summary"].get<std::string>().find("system error") != std::string::npos) {
        EXPECT_EQ(f["severity"], "warning") << f.dump(2);
      }
  }
}

TEST(AnalyzeE2eTest, RaysActorDiedIsTheEchoOfTheWorkersDeath) {
  // EasyR1 under Ray (https://github.com/hiyouga/EasyR1/issues/300): the driver's ActorDiedError, then
  // the worker's death with its exit detail. That death is the finding; the actor's is its echo.
  auto a = Analyze({WriteLog(
      "ray.log",
      "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
      "        pid: 1009098\n        ip: 172.23.166.108\n"
      "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
      "Worker unexpectedly exits with a connection error code 2. End of file.\n")});
  EXPECT_EQ(a.exit_code, 1);
  const auto& findings = a.report["findings"];
  ASSERT_GE(findings.size(), 2u) << a.report.dump(2);
  EXPECT_NE(findings[0]["summary"].get<std::string>().find("a worker process died (SYSTEM_ERROR)"), std::string::npos)
      << a.report.dump(2);
  EXPECT_EQ(findings[0]["severity"], "error");
  for (const auto& f : findings)
    if (f["summary"].get<std::string>().find("an actor died") != std::string::npos) {
      EXPECT_EQ(f["severity"], "warning") << f.dump(2);
    }
}

TEST(AnalyzeE2eTest, NcclsInitTimingsLineIsNoStack) {
  // NCCL >= 2.23 prints its setup's timings naming the init function: a healthy line, no stack.
  auto a = Analyze({WriteLog("init-timings.log",
                             "node1:1200:1200 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 0 nranks 2 "
                             "total 0.41 (kernels 0.17, alloc 0.01, bootstrap 0.05, allgathers 0.00, topo 0.13)\n")});
  EXPECT_EQ(a.exit_code, 0);
  EXPECT_TRUE(a.report["findings"].empty()) << a.report.dump(2);
}

TEST(AnalyzeE2eTest, APastedStackInNcclsCommunicatorSetupIsNamed) {
  // py-spy dump --native of a rank hung while DDP set up NCCL (https://github.com/NVIDIA/nccl/issues/1258).
  auto a = Analyze({WriteLog("pyspy.log",
                             "Thread 131584 (idle): \"MainThread\"\n    clock_nanosleep (libc.so.6)\n    groupLaunch "
                             "(group.cc:333)\n    ncclGroupEndInternal (group.cc:418)\n    ncclGroupEnd (group.cc:95)\n"
                             "    c10d::ProcessGroupNCCL::getNCCLComm (libtorch_cuda.so)\n    "
                             "_verify_param_shape_across_processes (torch/distributed/utils.py:263)\n")});
  ASSERT_FALSE(a.report["findings"].empty()) << a.report.dump(2);
  const auto& f = a.report["findings"][0];
  EXPECT_EQ(f["code"], "NCCL_ERROR");
  // A stack alone does not prove the process stayed there: a warning, so the exit code is not 1.
  EXPECT_EQ(f["severity"], "warning");
  EXPECT_EQ(a.exit_code, 0);
  EXPECT_NE(f["summary"].get<std::string>().find("communicator setup"), std::string::npos) << f.dump(2);
  EXPECT_NE(f["remedy"].get<std::string>().find("NCCL_SOCKET_IFNAME"), std::string::npos);
}

TEST(AnalyzeE2eTest, ARankWhoseWatchdogSawTheWorkFailHadReachedIt) {
  // torch 2.x (https://github.com/hiyouga/LlamaFactory/issues/7396): ranks 0 and 2 print the timeout,
  // rank 3 only "Exception … detected by watchdog at work: 1580": rank 3 reached SeqNum 1580 too, so
  // rank 1 alone is the one the others wait for.
  std::string text;
  for (int r : {0, 2})
    text += "[rank" + std::to_string(r) + "]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank " +
            std::to_string(r) +
            "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, "
            "NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing "
            "out.\n";
  text +=
      "[rank3]:[E321 02:07:08.465224069 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 3] Exception (either an error or "
      "timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.\n"
      "[rank1]:step 1579 loss 1.25\n";
  // Work 1580 of another process group ("PG ID 1") says nothing of the default group's SeqNum 1580.
  text +=
      "[rank4]:[E321 02:07:08.465224069 ProcessGroupNCCL.cpp:1664] [PG ID 1 PG GUID 1 Rank 0] Exception (either an "
      "error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1580, last completed NCCL "
      "work: 1579.\n[rank4]:step 1579 loss 1.26\n";
  auto a = Analyze({WriteLog("watchdog-work.log", text)});
  const auto* missing = FindingOf(a.report, "RANK_MISSING");
  ASSERT_TRUE(missing) << a.report.dump(2);
  EXPECT_EQ(Ranks(*missing), (std::vector<int>{1, 4})) << a.report.dump(2);
  // Rank 3's line is a consequence, folded into the warning of the ranks that waited.
  for (const auto& f : a.report["findings"]) {
    if (f["code"] == "WATCHDOG_TIMEOUT") {
      EXPECT_EQ(f["severity"], "warning") << f.dump(2);
    }
  }
}

TEST(AnalyzeE2eTest, WatchdogTimeoutsAtOtherSeqNumsNameEachRanksFirst) {
  // https://github.com/pytorch/pytorch/issues/118369: rank 0 times out at three SeqNums, rank 7 at
  // another (other process groups): one finding that names each rank's first, not rank 0's alone.
  std::string text;
  for (auto [r, seq] : {std::pair{0, 96120}, std::pair{0, 96117}, std::pair{0, 96125}, std::pair{7, 64088}})
    text += "[E ProcessGroupNCCL.cpp:458] [Rank " + std::to_string(r) +
            "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=" + std::to_string(seq) +
            ", OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625613 milliseconds before timing out.\n";
  auto a = Analyze({WriteLog("watchdog-seqs.log", text)});
  std::vector<std::string> summaries;
  for (const auto& f : a.report["findings"])
    if (f["code"] == "WATCHDOG_TIMEOUT") summaries.push_back(f["summary"]);
  ASSERT_EQ(summaries.size(), 1u) << a.report.dump(2);
  EXPECT_NE(summaries[0].find("64088 (rank 7), 96117 (rank 0)"), std::string::npos) << summaries[0];
}

TEST(AnalyzeE2eTest, HydrasBadTerminationBoxNamesTheProcessAndItsSignal) {
  // MPICH's mpiexec (https://github.com/openai/jukebox/issues/155) and Intel MPI's (with its rank).
  auto mpich = Analyze({WriteLog("hydra.log",
                                 "=============================================================================="
                                 "=====\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 9665 "
                                 "RUNNING AT NeuroRTX6000\n=   EXIT CODE: 9\n=   CLEANING UP REMAINING PROCESSES\n"
                                 "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n=================================="
                                 "=================================================\nYOUR APPLICATION TERMINATED WITH "
                                 "THE EXIT STRING: Killed (signal 9)\nThis typically refers to a problem with your "
                                 "application.\n")});
  EXPECT_EQ(mpich.exit_code, 1);
  const auto* f = FindingOf(mpich.report, "RANK_EXITED");
  ASSERT_TRUE(f) << mpich.report.dump(2);
  EXPECT_EQ((*f)["nodes"], nlohmann::json::array({"NeuroRTX6000"})) << f->dump(2);
  EXPECT_NE((*f)["summary"].get<std::string>().find("pid 9665"), std::string::npos) << f->dump(2);
  EXPECT_NE((*f)["remedy"].get<std::string>().find("OOM killer"), std::string::npos) << f->dump(2);

  auto intel = Analyze({WriteLog("hydra-intel.log",
                                 "=============================================================================="
                                 "=====\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 3 PID "
                                 "143 RUNNING AT node2\n=   KILLED BY SIGNAL: 11 (Segmentation fault)\n============"
                                 "=======================================================================\n")});
  const auto* g = FindingOf(intel.report, "RANK_EXITED");
  ASSERT_TRUE(g) << intel.report.dump(2);
  EXPECT_EQ(Ranks(*g), std::vector<int>{3}) << g->dump(2);
  EXPECT_NE((*g)["summary"].get<std::string>().find("SIGSEGV"), std::string::npos) << g->dump(2);
}

TEST(AnalyzeE2eTest, ALaunchersExitCodeGetsTheRemedyOfThatCode) {
  // DeepSpeed's launcher (https://github.com/deepspeedai/DeepSpeedExamples/issues/626): -11 is a native
  // crash, not the OOM killer; exit code 1 is the program's own exception.
  const std::string prefix =
      "[2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] ['python', '-u', "
      "'train.py', '--local_rank=";
  auto segv = Analyze({WriteLog("ds-segv.log", prefix + "1', '--deepspeed'] exits with return code = -11\n")});
  const auto* f = FindingOf(segv.report, "RANK_EXITED");
  ASSERT_TRUE(f) << segv.report.dump(2);
  EXPECT_NE((*f)["summary"].get<std::string>().find("local rank 1"), std::string::npos) << f->dump(2);
  EXPECT_NE((*f)["remedy"].get<std::string>().find("SIGSEGV"), std::string::npos) << f->dump(2);
  EXPECT_EQ((*f)["remedy"].get<std::string>().find("OOM"), std::string::npos) << f->dump(2);
  auto one = Analyze({WriteLog("ds-exit1.log", prefix + "4', '--deepspeed'] exits with return code = 1\n")});
  const auto* g = FindingOf(one.report, "RANK_EXITED");
  ASSERT_TRUE(g) << one.report.dump(2);
  EXPECT_NE((*g)["remedy"].get<std::string>().find("traceback"), std::string::npos) << g->dump(2);
  EXPECT_EQ((*g)["remedy"].get<std::string>().find("OOM"), std::string::npos) << g->dump(2);
}

// torch >= 2.3 prints "Timeout at NCCL work: N" beside the watchdog's timeout line, and pastes often
// hold only it and PyTorch's reaction lines (format: https://github.com/NVlabs/Sana/issues/206): the
// ranks that print it timed out there, and the one that never does is the culprit. Where a rank printed
// both lines, it is one timeout, not two findings.
TEST(AnalyzeE2eTest, TimeoutAtNcclWorkLinesAreTimeoutsThatNameTheRankThatNeverArrived) {
  auto log_of = [](bool with_watchdog_line) {
    std::string text = "[rank0]:step 27 loss 2.31\n";
    for (int r = 1; r < 4; ++r) {
      const std::string p =
          "[rank" + std::to_string(r) + "]:[E324 08:29:18.18087244" + std::to_string(r) + " ProcessGroupNCCL.cpp:";
      if (with_watchdog_line)
        text += p + "632] [PG 0 (default_pg) Rank " + std::to_string(r) +
                "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=28, OpType=BARRIER, NumelIn=1, "
                "NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n";
      text += p + "1709] [PG 0 (default_pg) Rank " + std::to_string(r) +
              "] Timeout at NCCL work: 28, last enqueued NCCL work: 28, last completed NCCL work: 27.\n";
      text += p + "621] [Rank " + std::to_string(r) +
              "] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
              "subsequent GPU operations might run on corrupted/incomplete data.\n";
      text += p + "627] [Rank " + std::to_string(r) +
              "] To avoid data inconsistency, we are taking the entire process down.\n";
    }
    return text;
  };
  for (bool with_watchdog_line : {false, true}) {
    SCOPED_TRACE(with_watchdog_line ? "with the watchdog's line" : "the work lines alone");
    auto a = Analyze({WriteLog("work-timeout.log", log_of(with_watchdog_line))});
    EXPECT_EQ(a.exit_code, 1);
    const auto& first = a.report["findings"][0];
    EXPECT_EQ(first["code"], "RANK_MISSING") << a.report.dump(2);
    EXPECT_EQ(Ranks(first), std::vector<int>{0});
    EXPECT_NE(first["summary"].get<std::string>().find(with_watchdog_line ? "BARRIER SeqNum=28" : "NCCL work 28"),
              std::string::npos)
        << first.dump(2);
    // Every other finding is the waiting ranks' echo: a warning, and one timeout per rank, not two.
    int timeouts = 0;
    for (const auto& f : a.report["findings"]) {
      if (&f == &first) continue;
      EXPECT_EQ(f["severity"], "warning") << f.dump(2);
      timeouts +=
          f["summary"].get<std::string>().find("atchdog: ") != std::string::npos;  // "(PyTorch|PyTorch's) watchdog: "
    }
    EXPECT_EQ(timeouts, 1) << a.report.dump(2);
  }
}

// A paste that kept only PyTorch's reaction ("taking the entire process down") is still a rank that was
// ended, never a green; a watchdog line word-wrapped after its head is still the timeout, and the
// reaction after it its echo (https://github.com/CarperAI/trlx/issues/373).
TEST(AnalyzeE2eTest, PyTorchsTakedownWithoutItsCauseIsAnErrorAndAfterItAnEcho) {
  auto alone = Analyze({WriteLog(
      "takedown.log",
      "[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out. Due to the asynchronous nature of "
      "CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid this inconsistency, we "
      "are taking the entire process down.\n")});
  EXPECT_EQ(alone.exit_code, 1);
  const auto* f = FindingOf(alone.report, "WATCHDOG_TIMEOUT");
  ASSERT_TRUE(f) << alone.report.dump(2);
  EXPECT_EQ((*f)["severity"], "error");

  auto cut = Analyze({WriteLog(
      "cut.log",
      "failure was: [Rank 0] Watchdog caught collective operation timeout: \nWorkNCCL(SeqNum=2059, OpType=ALLGATHER, "
      "Timeout(ms)=1800000) ran for 1801398 \nmilliseconds before timing out.\nwandb: Waiting for W&B process to "
      "finish... (failed 1).\n[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out. Due to the "
      "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid "
      "this inconsistency, we are taking the entire process down.\n")});
  EXPECT_EQ(cut.exit_code, 1);
  const auto& first = cut.report["findings"][0];
  EXPECT_EQ(first["code"], "WATCHDOG_TIMEOUT") << cut.report.dump(2);
  EXPECT_EQ(first["severity"], "error");
  EXPECT_EQ(Ranks(first), std::vector<int>{0});
  ASSERT_EQ(cut.report["findings"].size(), 2u) << cut.report.dump(2);
  EXPECT_EQ(cut.report["findings"][1]["severity"], "warning");
}

// Faults of the GPU and of the fabric as users paste them (each cited beside its lines): never "no
// problems found", and each names its node, GPU or peer.
TEST(AnalyzeE2eTest, GpuAndFabricFaultsNameTheirNodeGpuOrPeer) {
  // UCX over InfiniBand: two nodes' sends to one LID ran out of retries (https://github.com/openucx/ucx/issues/6669).
  auto ucx = Analyze({WriteLog(
      "ucx-retry.log",
      "[g07r1n14:27251:0:27251] ib_mlx5_log.c:143  Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 "
      "hw_synd 0/0)\n[g07r1n14:27251:0:27251] ib_mlx5_log.c:143  DCI QP 0x10f3a wqe[446]: SEND s-e [rqpn 0x32ca rlid "
      "19352] [inl len 20]\n[i12r2n04:30536:0:30536] ib_mlx5_log.c:143  Transport retry count exceeded on mlx5_0:1/IB "
      "(synd 0x15 vend 0x81 hw_synd 0/0)\n[i12r2n04:30536:0:30536] ib_mlx5_log.c:143  DCI QP 0x17c58 wqe[384]: SEND "
      "s-e [rqpn 0x32ca rlid 19352] [inl len 20]\n")});
  EXPECT_EQ(ucx.exit_code, 1);
  const auto* retry = FindingOf(ucx.report, "COMM_ERROR");
  ASSERT_TRUE(retry) << ucx.report.dump(2);
  EXPECT_EQ((*retry)["nodes"], nlohmann::json::array({"g07r1n14", "i12r2n04"})) << retry->dump(2);
  EXPECT_NE((*retry)["summary"].get<std::string>().find("Transport retry count exceeded"), std::string::npos);
  EXPECT_NE(ucx.report.dump().find("LID 19352"), std::string::npos) << ucx.report.dump(2);

  // A GPU the driver lost: nvidia-smi's words and the PCIe errors of its root port
  // (https://github.com/rwth-i6/returnn/issues/1486).
  auto lost = Analyze({WriteLog(
      "gpu-lost.log",
      "zeyer@cn-234 ~ % nvidia-smi\nUnable to determine the device handle for GPU0000:03:00.0: Unknown Error\n...\n[  "
      "+0.000316] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0\n[  +0.000005] pcieport "
      "0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)\n[  +0.000003] "
      "pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00001000/00002000\n")});
  EXPECT_EQ(lost.exit_code, 1);
  const auto& gpu = lost.report["findings"][0];
  EXPECT_EQ(gpu["code"], "CUDA_ERROR") << lost.report.dump(2);
  EXPECT_EQ(gpu["severity"], "error");
  EXPECT_NE(gpu["summary"].get<std::string>().find("0000:03:00.0"), std::string::npos) << gpu.dump(2);

  // The driver's Xid event (https://github.com/wilicc/gpu-burn/issues/1).
  auto xid =
      Analyze({WriteLog("xid.log", "[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.\n")});
  EXPECT_EQ(xid.exit_code, 1);
  ASSERT_EQ(xid.report["findings"].size(), 1u) << xid.report.dump(2);
  EXPECT_NE(xid.report["findings"][0]["summary"].get<std::string>().find("Xid 79"), std::string::npos);

  // NCCL 2.8's socket warning without the function's name, to an IPv6 link-local address
  // (https://github.com/wenet-e2e/wenet/issues/1891).
  auto ll = Analyze({WriteLog("link-local.log",
                              "voicec105:90736:91655 [0] include/socket.h:403 NCCL WARN Connect to "
                              "fe80::c4eb:49ff:fe04:e32d%6<57335> failed : Network is unreachable\n")});
  EXPECT_EQ(ll.exit_code, 1);
  const auto* nccl = FindingOf(ll.report, "NCCL_ERROR");
  ASSERT_TRUE(nccl) << ll.report.dump(2);
  EXPECT_NE((*nccl)["summary"].get<std::string>().find("link-local"), std::string::npos) << nccl->dump(2);
  EXPECT_EQ((*nccl)["nodes"], nlohmann::json::array({"voicec105"}));
}

TEST(AnalyzeE2eTest, UcxsCaughtSignalNamesTheNodeAndABusErrorNamesDevShm) {
  // NCCL in a container (https://github.com/NVIDIA/Megatron-LM/issues/516): UCX's handler prints the
  // node and pid; SIGBUS there is /dev/shm.
  auto a = Analyze({WriteLog(
      "bus.log",
      "09677202c889:5283:5699 [7] NCCL INFO 24 coll channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per "
      "peer\n[09677202c889:5283 :0:5704] Caught signal 7 (Bus error: nonexistent physical address)\n==== backtrace "
      "(tid:   5704) ====\n 0 0x0000000000043090 killpg()  ???:0\n 1 0x000000000008170d ncclGroupEnd()  ???:0\n")});
  EXPECT_EQ(a.exit_code, 1);
  const auto* f = FindingOf(a.report, "LOG_ERROR");
  ASSERT_TRUE(f) << a.report.dump(2);
  EXPECT_EQ((*f)["nodes"], nlohmann::json::array({"09677202c889"})) << f->dump(2);
  EXPECT_NE((*f)["remedy"].get<std::string>().find("/dev/shm"), std::string::npos) << f->dump(2);
}

TEST(AnalyzeE2eTest, MpichGlooAndFabricErrorsAreFindingsNotGreen) {
  // Each of these logs was a clean "no problems found" (public reports: libfabric#11307, gpustack#2125,
  // aws-ofi-nccl#156, garyexplains/examples#13).
  struct Case {
    const char* name;
    const char* text;
    const char* code;
    const char* remedy_says;
  } cases[] = {
      {"cray.log",
       "MPICH ERROR [Rank 11122] [job id 41595204.0] [Thu Aug 14 08:27:11 2025] [nid006700] - Abort(2695311) (rank "
       "11122 in comm 0): Fatal error in PMPI_Allreduce: Other MPI error, error stack:\n"
       "MPIDI_OFI_handle_cq_error(1075)......: OFI poll failed "
       "(ofi_events.c:1077:MPIDI_OFI_handle_cq_error:Input/output "
       "error - CANCELED)\n",
       "COMM_ERROR", "first failure"},
      {"gloo.log",
       "(RayWorkerWrapper pid=933, ip=50.147.43.24) [rank1]:[E528 08:52:46.164295950 ProcessGroupGloo.cpp:145] Gloo "
       "connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n",
       "COMM_ERROR", "GLOO_SOCKET_IFNAME"},
      {"gloo-lo.log", "[/opt/gloo/gloo/transport/tcp/pair.cc:761] connect [127.0.1.1]:60817: Connection refused\n",
       "COMM_ERROR", "127.0.1.1"},
      {"ofi.log",
       "[1,13]<stdout>:nccl-tests-worker-1:35:89 [5] ofi_process_cq:1039 NCCL WARN NET/OFI Request 0x7fbb944701b8 "
       "completed with error. RC: 20. Error: unknown error. Completed length: 0\n",
       "NCCL_ERROR", "security group"},
      {"ibv.log",
       "msm-h200-2:4016:4653 [7] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot "
       "allocate memory\n",
       "NCCL_ERROR", "ulimit -l"},
      {"ctrlz.log",
       "^Zmpiexec: Forwarding signal 20 to job\n-----------------------------------------------------------------------"
       "---\nORTE has lost communication with a remote daemon.\n",
       "LAUNCH_ERROR", "Ctrl-Z"},
  };
  // mpirun passes SIGUSR1 on by design (Slurm's --signal=USR1 for a checkpoint): the job goes on.
  auto usr1 = Analyze({WriteLog("usr1.log", "mpirun: Forwarding signal 10 to job\nstep 12 loss 0.8\n")});
  EXPECT_EQ(usr1.exit_code, 0) << usr1.report.dump(2);
  for (const Case& c : cases) {
    auto a = Analyze({WriteLog(c.name, c.text)});
    EXPECT_EQ(a.exit_code, 1) << c.name << "\n" << a.report.dump(2);
    ASSERT_TRUE(a.report["findings"].is_array() && !a.report["findings"].empty()) << c.name;
    const auto& first = a.report["findings"][0];
    EXPECT_EQ(first["code"], c.code) << c.name << "\n" << a.report.dump(2);
    EXPECT_NE(first["remedy"].get<std::string>().find(c.remedy_says), std::string::npos) << c.name << "\n"
                                                                                         << first.dump(2);
  }
}

TEST(AnalyzeE2eTest, HorovodStalledOpsNameTheMissingRanks) {
  // Horovod's stall check under mpirun (https://github.com/horovod/horovod/issues/1012): rank 0 reports
  // the tensors ranks 1 and 3 never submitted.
  std::string text;
  for (const char* op : {"HorovodBroadcast_dense_kernel_0", "HorovodBroadcast_conv2d_1_kernel_0"})
    text += std::string("[1,0]<stderr>:[2019-04-13 13:55:31.858119: W horovod/common/operations.cc:588] ") + op +
            " [missing ranks: 1, 3]\n";
  auto a = Analyze({WriteLog("horovod.log", text)});
  const auto* f = FindingOf(a.report, "RANK_MISSING");
  ASSERT_TRUE(f) << a.report.dump(2);
  EXPECT_EQ(Ranks(*f), (std::vector<int>{1, 3}));
  // Horovod warns after 60 s and a slow rank may catch up: a warning, not an error exit.
  EXPECT_EQ((*f)["severity"], "warning");
  EXPECT_EQ(a.exit_code, 0);
  EXPECT_TRUE((*f)["nodes"].empty()) << f->dump(2);  // no node of an empty name
  EXPECT_NE((*f)["summary"].get<std::string>().find("as rank 0 reports"), std::string::npos) << f->dump(2);
}

TEST(AnalyzeE2eTest, ASlurmTimeLimitIsTheCauseAndTheTerminatedTasksItsConsequence) {
  // https://github.com/desihub/desitarget/issues/628: srun's notices and the tasks Slurm terminated follow
  // the step's cancellation.
  auto a = Analyze({WriteLog(
      "timelimit.log",
      "srun: Force Terminated job 32233190\nsrun: Job step aborted: Waiting up to 32 seconds for job step to "
      "finish.\nslurmstepd: error: *** STEP 32233190.0 ON nid01934 CANCELLED AT 2020-07-03T02:59:56 DUE TO TIME "
      "LIMIT ***\nsrun: error: nid01934: tasks 2,4-5,7: Terminated\nsrun: Terminating job step 32233190.0\n")});
  EXPECT_EQ(a.exit_code, 1);
  int errors = 0;
  for (const auto& f : a.report["findings"]) {
    if (f["severity"] != "error") continue;
    ++errors;
    EXPECT_NE(f["summary"].get<std::string>().find("TIME LIMIT"), std::string::npos) << f.dump(2);
  }
  EXPECT_EQ(errors, 1) << a.report.dump(2);
  bool terminated = false;
  for (const auto& f : a.report["findings"])
    terminated = terminated ||
                 f["summary"].get<std::string>().find("tasks 2,4-5,7 on nid01934: Terminated") != std::string::npos;
  EXPECT_TRUE(terminated) << a.report.dump(2);

  // A lost connection long before an unrelated signal stays an error: only a cause logged before a
  // consequence (or a few lines after it) explains it.
  std::string later = "misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer node2<42830>\n";
  for (int i = 0; i < 40; ++i) later += "step " + std::to_string(i) + " loss 0.5\n";
  later +=
      "W0409 07:28:49.530000 1359 torch/distributed/elastic/agent/server/api.py:719] Received 15 death signal, "
      "shutting down workers\n";
  auto b = Analyze({WriteLog("closed-then-signal.log", later)});
  bool closed_is_error = false;
  for (const auto& f : b.report["findings"])
    closed_is_error =
        closed_is_error || (f["summary"].get<std::string>().find("closed its connection") != std::string::npos &&
                            f["severity"] == "error");
  EXPECT_TRUE(closed_is_error) << b.report.dump(2);
}

TEST(AnalyzeE2eTest, StoreTimeoutsWhileRankZeroPreprocessesNameRankZero) {
  // torch >= 2.5 store waits (https://github.com/modelscope/ms-swift/issues/4906) on ranks 1-3 while
  // rank 0 tokenises its dataset and prints no error.
  std::string text = "[rank0]:Tokenizing dataset: 12%\n";
  for (int r = 1; r < 4; ++r)
    text += "[rank" + std::to_string(r) +
            "]: torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /default_pg/0//cuda//0\n";
  auto a = Analyze({WriteLog("store.log", text)});
  EXPECT_EQ(a.exit_code, 1);
  const auto& first = a.report["findings"][0];
  EXPECT_EQ(first["code"], "RANK_MISSING") << a.report.dump(2);
  EXPECT_EQ(Ranks(first), std::vector<int>{0});
  EXPECT_NE(first["remedy"].get<std::string>().find("preprocessing"), std::string::npos);
  const auto* store = FindingOf(a.report, "RENDEZVOUS_ERROR");
  ASSERT_TRUE(store);
  EXPECT_EQ((*store)["severity"], "warning");
}

TEST(AnalyzeE2eTest, DeepSpeedPdshLogOfAHostOomKill) {
  // The deepspeed launcher over pdsh: "host: " before every line (https://github.com/hiyouga/LlamaFactory/issues/2470);
  // a worker killed by the OOM killer (exit -9, https://github.com/deepspeedai/DeepSpeed/issues/5066);
  // NCCL on the other node loses the connection after it (https://github.com/NVIDIA/nccl/issues/914).
  std::string text =
      "[2024-02-03 11:40:00,000] [INFO] [runner.py:568:main] cmd = pdsh -S -f 1024 -w worker-0,worker-1 ...\n"
      "worker-0: [2024-02-03 11:40:02,000] [INFO] [launch.py:146:main] WORLD INFO DICT: {'worker-0': [0, 1], "
      "'worker-1': [0, 1]}\n"
      "worker-1: [2024-02-03 11:40:02,000] [INFO] [launch.py:146:main] WORLD INFO DICT: {'worker-0': [0, 1], "
      "'worker-1': [0, 1]}\n"
      "worker-0: worker-0:1000:1060 [0] NCCL INFO comm 0x55d1 rank 0 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE\n"
      "worker-0: worker-0:1001:1061 [1] NCCL INFO comm 0x55d2 rank 1 nranks 4 cudaDev 1 busId 2000 - Init COMPLETE\n"
      "worker-1: worker-1:2000:2060 [0] NCCL INFO comm 0x55d3 rank 2 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE\n"
      "worker-1: worker-1:2001:2061 [1] NCCL INFO comm 0x55d4 rank 3 nranks 4 cudaDev 1 busId 2000 - Init COMPLETE\n"
      "worker-0: step 10 loss 1.2\n"
      "worker-1: [2024-02-03 11:48:17,107] [INFO] [launch.py:316:sigkill_handler] Killing subprocess 2001\n"
      "worker-1: [2024-02-03 11:48:17,300] [ERROR] [launch.py:322:sigkill_handler] ['/usr/bin/python', '-u', "
      "'train.py', "
      "'--local_rank=1', '--deepspeed'] exits with return code = -9\n"
      "worker-0: \n"
      "worker-0: worker-0:1000:1070 [0] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer "
      "worker-1<47861>\n"
      "pdsh@launcher: worker-1: ssh exited with exit code 247\n";
  auto a = Analyze({WriteLog("pdsh.log", text)});
  EXPECT_EQ(a.exit_code, 1);
  const auto* exited = FindingOf(a.report, "RANK_EXITED");
  ASSERT_TRUE(exited) << a.report.dump(2);
  EXPECT_EQ(Ranks(*exited), std::vector<int>{3})
      << "local rank 1 of worker-1 is global rank 3 (NCCL's comm init lines)";
  EXPECT_NE((*exited)["summary"].get<std::string>().find("SIGKILL"), std::string::npos);
  EXPECT_NE((*exited)["remedy"].get<std::string>().find("OOM"), std::string::npos);
  EXPECT_NE((*exited)["evidence"].dump().find("pdsh.log:10"), std::string::npos) << "the launcher's line";
  const auto* nccl = FindingOf(a.report, "NCCL_ERROR");
  ASSERT_TRUE(nccl);
  EXPECT_EQ((*nccl)["severity"], "warning") << "a consequence of rank 3's death";
}

TEST(AnalyzeE2eTest, AHealthyStartsRetryWarningsAreNoError) {
  // torch prints this while rank 0 has not opened the store yet; the job then trains normally
  // (format: torch/csrc/distributed/c10d/socket.cpp, seen in healthy runs' logs).
  std::string text;
  for (int r = 1; r < 4; ++r)
    text += "[rank" + std::to_string(r) +
            "]:[W socket.cpp:601] [c10d] The client socket has failed to connect to [node-0]:29500 (errno: 111 - "
            "Connection refused).\n";
  for (int r = 0; r < 4; ++r) text += "[rank" + std::to_string(r) + "]:step 1 loss 2.3\n";
  auto a = Analyze({WriteLog("startup.log", text)});
  EXPECT_EQ(a.exit_code, 0) << a.report.dump(2);
  const auto* store = FindingOf(a.report, "RENDEZVOUS_ERROR");
  ASSERT_TRUE(store);
  EXPECT_EQ((*store)["severity"], "warning");
}

// The peer NCCL's lines name is the culprit (issue: culprit from the message): two ranks report
// their connection to gpu-2's address closed, and the NCCL INFO bootstrap lines say whose address
// that is. Format: DeepSpeed's pdsh launcher prefixing each line with its host, NCCL 2.1x lines.
TEST(AnalyzeE2eTest, ThePeerSeveralRanksNameLeadsAsTheCulprit) {
  std::string text;
  for (int node = 0; node < 3; ++node) {
    const std::string host = "gpu-" + std::to_string(node), pid = std::to_string(31000 + node);
    const std::string p = host + ": " + host + ":" + pid + ":" + pid + " [0] NCCL INFO ";
    text += p + "Bootstrap : Using ens5:10.1.0." + std::to_string(node + 11) + "<0>\n";
    text += p + "comm 0x55d1a0 rank " + std::to_string(node) + " nranks 3 cudaDev 0 busId 1000 - Init COMPLETE\n";
  }
  for (int node = 0; node < 2; ++node) {
    const std::string host = "gpu-" + std::to_string(node), pid = std::to_string(31000 + node);
    text += host + ": " + host + ":" + pid + ":" + std::to_string(31090 + node) +
            " [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer 10.1.0.13<" +
            std::to_string(41533 + node) + ">\n";
  }
  auto a = Analyze({WriteLog("peer.log", text)});
  ASSERT_TRUE(a.report.is_object()) << a.out;
  const auto* nccl = FindingOf(a.report, "NCCL_ERROR");
  ASSERT_TRUE(nccl) << a.report.dump(2);
  EXPECT_EQ(Ranks(*nccl), std::vector<int>{2}) << nccl->dump(2);
  EXPECT_EQ((*nccl)["nodes"], nlohmann::json::array({"gpu-2"})) << nccl->dump(2);
  EXPECT_NE((*nccl)["summary"].get<std::string>().find("(as ranks 0,1 report)"), std::string::npos)
      << (*nccl)["summary"];
}

// Healthy-but-noisy output of the families the source formats added: PyTorch's own warning lines
// (its C++ and Python logging), NCCL INFO lines, DeepSpeed's comm info. No error finding.
TEST(AnalyzeE2eTest, PyTorchsOwnWarningLinesAreNoError) {
  std::string text;
  for (int r = 0; r < 2; ++r) {
    const std::string p = "[rank" + std::to_string(r) + "]:";
    text += p +
            "[W1207 10:11:12.123456789 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been "
            "destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call "
            "destroy_process_group to ensure that any pending NCCL operations have finished in this process.\n";
    text += p +
            "[W socket.cpp:601] [c10d] The IPv6 network addresses of (gpu-0, 29500) cannot be retrieved (gai "
            "error: -2 - Name or service not known).\n";
    text += p +
            "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:2793: UserWarning: For MPI "
            "backend, world_size (2) and rank (" +
            std::to_string(r) +
            ") are ignored since they are assigned by "
            "the MPI runtime.\n";
    text += p +
            "W1207 10:11:12.123000 4242 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable "
            "for each process to be 1 in default, to avoid your system being overloaded\n";
    text += p + "gpu-0:4242:4242 [0] NCCL INFO NET/Socket : Using [0]ens5:10.0.3.24<0>\n";
    text += p + "[2026-12-07 10:11:12,123] [INFO] [comm.py:637:init_distributed] cdb=None\n";
    text += p + "step 1 loss 2.3\n";
  }
  auto a = Analyze({WriteLog("noisy.log", text)});
  EXPECT_EQ(a.exit_code, 0) << a.report.dump(2);
  for (const auto& f : a.report["findings"]) EXPECT_NE(f["severity"], "error") << f.dump(2);
}

// The sources' own texts name the culprit too: an Open MPI help text (mpirun prints it untagged among
// the ranks' --tag-output lines) names the peer host that went away, and the ranks' NCCL bootstrap
// lines say which rank that host runs.
TEST(AnalyzeE2eTest, AnOpenMpiHelpTextNamesThePeerThatWentAway) {
  std::string text;
  for (int r = 0; r < 3; ++r) {
    const std::string tag = "[1," + std::to_string(r) + "]<stdout>:", host = "gpu-" + std::to_string(r),
                      pid = std::to_string(4242 + r);
    text += tag + host + ":" + pid + ":" + pid + " [0] NCCL INFO Bootstrap : Using ens5:10.1.0." +
            std::to_string(11 + r) + "<0>\n";
    text += tag + host + ":" + pid + ":" + pid + " [0] NCCL INFO comm 0x55d1a0 rank " + std::to_string(r) +
            " nranks 3 cudaDev 0 busId 1000 - Init COMPLETE\n";
  }
  const std::string rule(74, '-');
  text += rule +
          "\n"
          "An MPI communication peer process has unexpectedly disconnected.  This\n"
          "usually indicates a failure in the peer process (e.g., a crash or\n"
          "otherwise exiting without calling MPI_FINALIZE first).\n"
          "\n"
          "Although this local MPI process will likely now behave unpredictably\n"
          "(it may even hang or crash), the root cause of this problem is the\n"
          "failure of the peer -- that is what you need to investigate.  For\n"
          "example, there may be a core file that you can examine.  More\n"
          "generally: such peer hangups are frequently caused by application bugs\n"
          "or other external events.\n"
          "\n"
          "  Local host: gpu-0\n"
          "  Local PID:  4242\n"
          "  Peer host:  gpu-2\n" +
          rule + "\n";
  auto a = Analyze({WriteLog("ompi-peer.log", text)});
  ASSERT_TRUE(a.report.is_object()) << a.out;
  const auto* comm = FindingOf(a.report, "COMM_ERROR");
  ASSERT_TRUE(comm) << a.report.dump(2);
  EXPECT_EQ(Ranks(*comm), std::vector<int>{2}) << comm->dump(2);
  EXPECT_EQ((*comm)["nodes"], nlohmann::json::array({"gpu-2"})) << comm->dump(2);
  EXPECT_NE((*comm)["evidence"].dump().find("help-mpi-btl-tcp.txt"), std::string::npos) << comm->dump(2);
}

// srun's and slurmstepd's lines (srun --label), JAX's coordination service and a pasted `kubectl
// describe pod`: each names its cause, and JAX's heartbeat timeout names the process that is gone.
TEST(AnalyzeE2eTest, SlurmJaxAndKubernetesLinesGetTheirSourcesCause) {
  // Many of the lines are srun's and slurmstepd's own: none is taken for a pdsh host label.
  auto slurm = Analyze({WriteLog("slurm-pmix.log",
                                 "0: step 0 starting\n"
                                 "1: step 0 starting\n"
                                 "slurmstepd-gpu1: error:  mpi/pmix_v4: pmixp_coll_ring_check: gpu-1 [1]: "
                                 "pmixp_coll_ring.c:736: 0x7f3a2c000000: collective timeout seq=0\n"
                                 "srun: error: Node failure on gpu-7\n"
                                 "srun: error: gpu-1: task 1: Exited with exit code 1\n"
                                 "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n")});
  const auto* launch = FindingOf(slurm.report, "LAUNCH_ERROR");
  ASSERT_TRUE(launch) << slurm.report.dump(2);
  EXPECT_EQ((*launch)["severity"], "error");
  EXPECT_NE(slurm.report.dump().find("--mpi=list"), std::string::npos) << slurm.report.dump(2);
  EXPECT_NE(slurm.report.dump().find("Node failure on gpu-7"), std::string::npos) << slurm.report.dump(2);
  EXPECT_TRUE(FindingOf(slurm.report, "RANK_EXITED")) << "srun's task line: " << slurm.report.dump(2);
  EXPECT_EQ(slurm.exit_code, 1);

  auto jax = Analyze({WriteLog("jax-0.log",
                               "I1207 10:11:02.123456    4242 coordination_service_agent.cc:370] Coordination "
                               "agent has successfully connected.\n"
                               "E1207 10:21:12.123456    4242 coordination_service.cc:213] Task 1 heartbeat "
                               "timeout. This indicates that the remote task has failed, got preempted, or crashed "
                               "unexpectedly. Check the task logs for an earlier error or scheduler events (e.g. "
                               "preemption, eviction) to debug further.\n")});
  const auto* missing = FindingOf(jax.report, "RANK_MISSING");
  ASSERT_TRUE(missing) << jax.report.dump(2);
  EXPECT_EQ(Ranks(*missing), std::vector<int>{1}) << missing->dump(2);

  auto k8s = Analyze({WriteLog("describe.txt",
                               "Name:         pytorchjob-worker-1\n"
                               "    Last State:     Terminated\n"
                               "      Reason:       OOMKilled\n"
                               "      Exit Code:    137\n"
                               "Events:\n"
                               "  Type     Reason     Age                From     Message\n"
                               "  ----     ------     ----               ----     -------\n"
                               "  Normal   Started    12m                kubelet  Started container pytorch\n"
                               "  Warning  BackOff    3m (x5 over 10m)   kubelet  Back-off restarting failed "
                               "container pytorch in pod pytorchjob-worker-1_default(4f1c2a9e)\n")});
  const auto* oom = FindingOf(k8s.report, "OUT_OF_MEMORY");
  ASSERT_TRUE(oom) << k8s.report.dump(2);
  EXPECT_EQ((*oom)["severity"], "error");
  EXPECT_NE((*oom)["remedy"].get<std::string>().find("limits.memory"), std::string::npos) << oom->dump(2);
}

// Healthy-but-noisy output of the sources added: Open MPI's warning texts and their aggregation line,
// srun's notices, XLA's info and warning lines, Kubernetes' Normal events. No error finding.
TEST(AnalyzeE2eTest, TheSourcesWarningsAndNoticesAreNoError) {
  const std::string rule(74, '-');
  std::string text = rule +
                     "\n"
                     "WARNING: There was an error initializing an OpenFabrics device.\n"
                     "\n"
                     "  Local host:   gpu-0\n"
                     "  Local device: mlx5_0\n" +
                     rule +
                     "\n"
                     "[gpu-0:04242] 7 more processes have sent help message help-mpi-btl-openib.txt / error in "
                     "device init\n"
                     "[gpu-0:04242] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error "
                     "messages\n"
                     "srun: job 4242 queued and waiting for resources\n"
                     "srun: job 4242 has been allocated resources\n"
                     "W1207 10:11:12.123456    4242 preemption_notifier.cc:90] SIGTERM caught at 2026-12-07T10:11:12\n"
                     "  Normal   Pulled     12m   kubelet  Container image \"nvcr.io/nvidia/pytorch:24.05-py3\" "
                     "already present on machine\n"
                     "  Normal   Killing    1m    kubelet  Stopping container pytorch\n"
                     "      Reason:       Completed\n"
                     "step 1 loss 2.3\n";
  auto a = Analyze({WriteLog("sources-noisy.log", text)});
  EXPECT_EQ(a.exit_code, 0) << a.report.dump(2);
  for (const auto& f : a.report["findings"]) EXPECT_NE(f["severity"], "error") << f.dump(2);
}

// A run dir whose run was cut short (no run.json, no exit status: dsdoctor and its agents killed
// with the ranks) never reads as a clean run: the report says what it lacks.
TEST(AnalyzeE2eTest, AKilledRunsDirSaysItWasCutShort) {
  const std::string dir = fs::temp_directory_path() / ("dsd-analyze-killed-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/rank-0.log") << "step 1 loss 0.5\nstep 2 loss 0.4\n";
  std::ofstream(dir + "/rank-1.log") << "step 1 loss 0.5\n";
  auto text = Analyze({dir}, false);
  EXPECT_EQ(text.exit_code, 1) << "not a healthy run: something to look at";
  EXPECT_EQ(text.out.find("no problems found\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("run.json is missing and ranks 0,1 left no exit status: the run was cut short"),
            std::string::npos)
      << text.out;
  auto json = Analyze({dir});
  ASSERT_TRUE(json.report.is_object()) << json.out;
  ASSERT_EQ(json.report["evidence_missing"].size(), 1u) << json.report.dump(2);
  // With exit statuses (run_local.sh writes them) the run ended, and nothing is missing.
  std::ofstream(dir + "/rank-0.exit") << "0\n";
  std::ofstream(dir + "/rank-1.exit") << "0\n";
  auto ended = Analyze({dir});
  EXPECT_EQ(ended.exit_code, 0);
  EXPECT_FALSE(ended.report.contains("evidence_missing")) << ended.report.dump(2);
  fs::remove_all(dir);
}

TEST(AnalyzeE2eTest, BadInputIsNamedAndNeverCrashes) {
  auto missing = Analyze({"/nonexistent/job.log"}, false);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/job.log"), std::string::npos);
  // Binary garbage: no finding, exit 0, no crash.
  std::string junk;
  for (int i = 0; i < 1 << 20; ++i) junk += static_cast<char>((i * 2654435761u) >> 24);
  auto bin = Analyze({WriteLog("junk.bin", junk)});
  EXPECT_EQ(bin.exit_code, 0) << bin.err;
  EXPECT_TRUE(bin.report.is_object());
  auto nothing = Analyze({}, false);
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_NE(nothing.err.find("standard input"), std::string::npos);
  // A dir mixed with files is refused with a reason.
  auto mixed = Analyze({fs::temp_directory_path().string(), WriteLog("x.log", "x\n")}, false);
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_NE(mixed.err.find("run dir"), std::string::npos);
}

}  // namespace
}  // namespace dsd
