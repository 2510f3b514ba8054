// libdsdoctor-pmpi.so on unmodified MPI programs under real Open MPI: mpirun starts the ranks with
// the tracer in LD_PRELOAD and DSDOCTOR_TRACE_DIR, as a user would by hand (docs/trace.md,
// "Producers"), and mpirun's own output goes to the dir's launcher.log, as under `dsdoctor run`.
// The traces must hold every call the program made (ops, counts, communicators, sequence numbers
// the same on every rank), and `dsdoctor analyze DIR` must name the culprit of each fault while the
// job hangs: a mismatched count, a skipped barrier, a send/send deadlock, a collective against
// another, a killed rank; mpi4py (Debian's python3-mpi4py) as well.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "common/file.h"
#include "common/process.h"
#include "common/subprocess.h"
#include "runtime/trace.h"
#include "tests/e2e/run_report.h"

namespace dsd {
namespace {

namespace fs = std::filesystem;
using e2e::FindingOf;
using e2e::Ranks;
using runtime::Op;
using runtime::ReadTrace;
using runtime::RecordState;
using runtime::TraceSnapshot;

std::string Bin(const std::string& name) { return std::string(EXAMPLES_DIR) + "/" + name; }

class MpiTraceE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dsd-mpi-trace-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (job_) {
      job_->Signal(SIGKILL);
      job_->Wait(std::chrono::seconds(10));
    }
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // mpirun -np N with the tracer preloaded; its output is the dir's launcher.log.
  void Start(std::vector<std::string> program, int np = 3) {
    std::vector<std::string> argv = {"mpirun"};
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    argv.insert(argv.end(),
                {"--oversubscribe", "-np", std::to_string(np), "--bind-to", "none", "--mca", "btl", "tcp,self", "-x",
                 "DSDOCTOR_TRACE_DIR=" + dir_, "-x", std::string("LD_PRELOAD=") + PMPI_LIB});
    argv.insert(argv.end(), program.begin(), program.end());
    SubprocessOptions o;
    o.log_path = dir_ + "/launcher.log";
    auto p = Subprocess::Start(argv, o);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    job_ = std::move(*p);
  }

  TraceSnapshot Trace(int r) {
    auto t = ReadTrace(dir_ + "/rank-" + std::to_string(r) + ".trace");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : TraceSnapshot{};
  }

  // `dsdoctor analyze --json DIR`, repeated until it reports `code` (the job is left hanging).
  nlohmann::json AnalyzeUntil(const std::string& code, int np = 3) {
    nlohmann::json report;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 120; ++i) {
      bool traces = true;
      for (int r = 0; r < np; ++r) traces &= fs::exists(dir_ + "/rank-" + std::to_string(r) + ".trace");
      if (traces) {
        auto out = RunCommand({DSDOCTOR_BIN, "analyze", "--json", dir_}, e2e::WithTimeout(60));
        if (out.ok()) report = nlohmann::json::parse(out->out, nullptr, false);
        if (!report.is_discarded() && FindingOf(report, code)) {
          std::printf("%s named after %.2f s of the job\n", code.c_str(),
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
          return report;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    ADD_FAILURE() << "no " << code << " in " << report.dump(1) << "\n" << ReadFile(dir_ + "/launcher.log").value_or("");
    return report;
  }

  std::string dir_;
  std::optional<Subprocess> job_;
};

int Count(const TraceSnapshot& t, Op op) {
  int n = 0;
  for (const auto& r : t.records) n += r.op == op;
  return n;
}

// Every call of a healthy job is recorded, completed, with the same communicator ids and sequence
// numbers on every rank; the sub-communicator has an id of its own, shared by its members only.
TEST_F(MpiTraceE2eTest, AHealthyJobsCallsAreAllRecordedAlikeOnEveryRank) {
  ASSERT_NO_FATAL_FAILURE(Start({Bin("mpi_scenarios"), "healthy", "--iters", "5"}, 4));
  auto e = job_->Wait(std::chrono::seconds(90));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->Describe(), "exit 0") << ReadFile(dir_ + "/launcher.log").value_or("");
  job_.reset();
  std::vector<TraceSnapshot> t;
  for (int r = 0; r < 4; ++r) t.push_back(Trace(r));
  std::set<uint32_t> half_ids[2];
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(t[r].backend, "mpi");
    EXPECT_EQ(t[r].rank, r);
    EXPECT_EQ(t[r].world_size, 4);
    EXPECT_TRUE(t[r].flags & runtime::kTraceFlagFinished);
    EXPECT_EQ(t[r].InFlight(), nullptr);
    ASSERT_FALSE(t[r].records.empty());
    EXPECT_EQ(t[r].records[0].op, Op::kRendezvous);  // MPI_Init, opened from mpirun's rank variables
    EXPECT_EQ(t[r].records[0].peer, 4);
    EXPECT_EQ(Count(t[r], Op::kAllReduce), 10);  // 5 MPI_Allreduce, 5 MPI_Iallreduce
    EXPECT_EQ(Count(t[r], Op::kBroadcast), 5);
    EXPECT_EQ(Count(t[r], Op::kBarrier), 5);
    EXPECT_EQ(Count(t[r], Op::kSend), 5);
    EXPECT_EQ(Count(t[r], Op::kRecv), 5);
    for (const auto& rec : t[r].records) {
      EXPECT_EQ(rec.state, RecordState::kCompleted) << runtime::DescribeRecord(rec);
      const bool on_half = rec.callsite.rfind("MPI_Iallreduce@", 0) == 0;  // the even/odd communicator
      // MPI_Wait waited on it: no longer async once the rank blocked in it.
      EXPECT_FALSE(rec.async) << runtime::DescribeRecord(rec);
      if (on_half) {
        EXPECT_NE(rec.comm_id, 0u);
        EXPECT_EQ(rec.count, 64u);
        EXPECT_EQ(rec.reduce, runtime::ReduceOp::kMax);
        EXPECT_EQ(rec.callsite.rfind("MPI_Iallreduce@mpi_scenarios+0x", 0), 0u) << rec.callsite;
        half_ids[r % 2].insert(rec.comm_id);
      }
      if (rec.op == Op::kSend) EXPECT_EQ(rec.peer, (r + 1) % 4);
      if (rec.op == Op::kRecv) EXPECT_EQ(rec.peer, (r + 3) % 4);
      if (rec.op == Op::kBroadcast) EXPECT_EQ(rec.bytes, 64u);
    }
  }
  ASSERT_EQ(half_ids[0].size(), 1u);
  ASSERT_EQ(half_ids[1].size(), 1u);
  EXPECT_NE(*half_ids[0].begin(), *half_ids[1].begin());
  // The same call has the same sequence number everywhere: record i is the same call on each rank.
  for (int r = 1; r < 4; ++r) {
    ASSERT_EQ(t[r].records.size(), t[0].records.size());
    for (size_t i = 0; i < t[0].records.size(); ++i) {
      if (t[0].records[i].op == Op::kSend || t[0].records[i].op == Op::kRecv) continue;
      EXPECT_EQ(t[r].records[i].op, t[0].records[i].op);
      EXPECT_EQ(t[r].records[i].seq, t[0].records[i].seq);
      if (t[0].records[i].callsite.rfind("MPI_Iallreduce@", 0) != 0)
        EXPECT_EQ(t[r].records[i].comm_id, t[0].records[i].comm_id);
    }
  }
  auto out = RunCommand({DSDOCTOR_BIN, "analyze", "--json", dir_}, e2e::WithTimeout(60));
  ASSERT_TRUE(out.ok());
  auto report = nlohmann::json::parse(out->out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << out->out;
  for (const auto& f : report["findings"]) EXPECT_NE(f["severity"], "error") << f.dump();
}

TEST_F(MpiTraceE2eTest, AMismatchedAllreduceCountNamesTheRankThatDiffers) {
  ASSERT_NO_FATAL_FAILURE(Start({Bin("mpi_scenarios"), "count_mismatch"}));
  auto report = AnalyzeUntil("COLLECTIVE_MISMATCH");
  const auto* f = FindingOf(report, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(Ranks(*f), std::vector<int>{2});
  EXPECT_NE((*f)["summary"].get<std::string>().find("x2048"), std::string::npos) << f->dump();
  EXPECT_NE((*f)["summary"].get<std::string>().find("MPI_Allreduce@mpi_scenarios"), std::string::npos);
}

TEST_F(MpiTraceE2eTest, ARankThatSkipsTheBarrierIsNamed) {
  ASSERT_NO_FATAL_FAILURE(Start({Bin("mpi_scenarios"), "skip_barrier"}));
  auto report = AnalyzeUntil("COLLECTIVE_MISMATCH");
  const auto* f = FindingOf(report, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(Ranks(*f), std::vector<int>{2});
  std::string s = (*f)["summary"];
  EXPECT_NE(s.find("ranks 0,1 called barrier"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 2 called all_reduce"), std::string::npos) << s;
}

TEST_F(MpiTraceE2eTest, TwoRanksThatBothSendFirstAreAPointToPointDeadlock) {
  ASSERT_NO_FATAL_FAILURE(Start({Bin("mpi_scenarios"), "send_deadlock"}));
  auto report = AnalyzeUntil("P2P_DEADLOCK");
  const auto* f = FindingOf(report, "P2P_DEADLOCK");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(Ranks(*f), (std::vector<int>{0, 1}));
  EXPECT_NE(f->dump().find("MPI_Send@mpi_scenarios"), std::string::npos) << f->dump();
}

TEST_F(MpiTraceE2eTest, ABroadcastAgainstTheOthersAllreduceNamesTheRankThatBroadcast) {
  ASSERT_NO_FATAL_FAILURE(Start({Bin("mpi_scenarios"), "bcast_vs_allreduce"}));
  auto report = AnalyzeUntil("COLLECTIVE_MISMATCH");
  const auto* f = FindingOf(report, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(Ranks(*f), std::vector<int>{0});
  EXPECT_NE((*f)["summary"].get<std::string>().find("rank 0 called broadcast"), std::string::npos) << f->dump();
}

// Rank 1 is killed before its all-reduce: the survivors' traces hold the all-reduce it never
// reached, and mpirun's line in launcher.log names it.
TEST_F(MpiTraceE2eTest, AKilledRankIsNamedAndTheSurvivorsShowWhereTheyWaited) {
  ASSERT_NO_FATAL_FAILURE(Start({Bin("mpi_scenarios"), "kill"}));
  auto e = job_->Wait(std::chrono::seconds(90));
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->Describe(), "exit 0");
  job_.reset();
  TraceSnapshot victim = Trace(1);
  ASSERT_NE(victim.Last(), nullptr);
  EXPECT_EQ(victim.Last()->op, Op::kBarrier);
  EXPECT_EQ(victim.Last()->state, RecordState::kCompleted);
  for (int r : {0, 2}) {
    TraceSnapshot t = Trace(r);
    ASSERT_NE(t.InFlight(), nullptr) << r;
    EXPECT_EQ(t.InFlight()->op, Op::kAllReduce);
    EXPECT_EQ(t.InFlight()->seq, victim.Last()->seq + 1);
  }
  auto report = AnalyzeUntil("RANK_EXITED");
  const auto* f = FindingOf(report, "RANK_EXITED");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(Ranks(*f), std::vector<int>{1});

  // The traces alone, as a user who kept no mpirun output has them: once they have been silent for
  // a while the job is known to be over, and the rank whose trace stopped before the all-reduce the
  // others died in is named.
  fs::rename(dir_ + "/launcher.log", dir_ + ".launcher.log");
  report = AnalyzeUntil("RANK_MISSING");
  fs::rename(dir_ + ".launcher.log", dir_ + "/launcher.log");
  f = FindingOf(report, "RANK_MISSING");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(Ranks(*f), std::vector<int>{1});
  EXPECT_NE((*f)["summary"].get<std::string>().find("when the job's processes stopped"), std::string::npos)
      << f->dump();
  EXPECT_EQ(report["traces_stopped"], true);
}

// mpi4py calls the same MPI_* functions: the program is Python, the tracer the same.
TEST_F(MpiTraceE2eTest, Mpi4pyProgramsAreTracedToo) {
  if (::system("/usr/bin/python3 -c 'import mpi4py' 2>/dev/null") != 0) {
    if (std::getenv("DSDOCTOR_REQUIRE_MPI4PY")) FAIL() << "python3-mpi4py is not installed (scripts/setup.sh)";
    GTEST_SKIP() << "python3-mpi4py not installed";
  }
  ASSERT_NO_FATAL_FAILURE(Start({"/usr/bin/python3", MPI4PY_SCENARIOS, "skip_barrier"}));
  auto report = AnalyzeUntil("COLLECTIVE_MISMATCH");
  const auto* f = FindingOf(report, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(Ranks(*f), std::vector<int>{2});
  std::string s = (*f)["summary"];
  EXPECT_NE(s.find("barrier"), std::string::npos) << s;
  EXPECT_NE(s.find("MPI_Barrier@mpi4py"), std::string::npos) << s;
}

}  // namespace
}  // namespace dsd
