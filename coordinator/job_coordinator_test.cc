#include "coordinator/job_coordinator.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "diagnosis/report.h"

namespace dsd::coordinator {
namespace {

using diagnosis::RankState;
using diagnosis::RankStatus;

// Ranks as the test says they are; signals are recorded and, unless told otherwise, end the ranks.
class FakeRankSource final : public RankSource {
 public:
  FakeRankSource(int world, Clock* clock) : clock_(clock), ranks_(world) {
    for (int r = 0; r < world; ++r) {
      ranks_[r].rank = r;
      ranks_[r].node = "node-" + std::to_string(r / 2);
      ranks_[r].status = RankStatus::kRunning;
    }
  }
  int64_t Now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_->WallNow().time_since_epoch()).count();
  }
  void Exit(int r, int code, int sig = 0) {
    ranks_[r].status = RankStatus::kExited;
    ranks_[r].exit_code = code;
    ranks_[r].signal = sig;
    ranks_[r].exit_ns = Now();
  }
  // Rank r waits in `op`#seq since now (a traced collective).
  void Enter(int r, const std::string& op, uint64_t seq, const std::string& callsite) {
    diagnosis::OpRecord rec;
    rec.op = op;
    rec.seq = seq;
    rec.callsite = callsite;
    rec.dtype = op == "barrier" ? "" : "float32";
    rec.reduce = op == "all_reduce" ? "sum" : "";
    rec.count = op == "barrier" ? 0 : 1024;
    rec.bytes = rec.count * 4;
    rec.state = "started";
    rec.started_ns = Now();
    ranks_[r].has_trace = true;
    ranks_[r].phase = "step";
    ranks_[r].in_flight = rec;
    ranks_[r].last = rec;
    ranks_[r].recent.push_back(rec);
  }
  void Say(int r, const std::string& text) { logs_[r] += text; }
  // Rank r's call in flight completes now.
  void Complete(int r) {
    if (!ranks_[r].in_flight) return;
    diagnosis::OpRecord rec = *ranks_[r].in_flight;
    rec.state = "completed";
    rec.ended_ns = Now();
    ranks_[r].in_flight.reset();
    ranks_[r].last = rec;
    ranks_[r].recent.back() = rec;
  }

  void Tick(int64_t now, std::vector<RankState>& ranks, std::vector<std::string>& logs) override {
    for (auto& s : ranks_) {
      s.sample_ns = now;
      Adopt(ranks[s.rank], s);
    }
    for (auto& [r, text] : logs_) logs[r] += text;
    logs_.clear();
  }
  void Signal(int sig) override {
    signals.push_back(sig);
    if (sig == SIGTERM && ignore_sigterm) return;
    for (auto& s : ranks_)
      if (s.status == RankStatus::kRunning && !unreachable.count(s.rank)) Exit(s.rank, 0, sig);
  }
  std::map<int, std::string> Stacks(const std::vector<int>& want, int flight_recorder_incident = 0) override {
    stack_requests.push_back(want);
    if (flight_recorder_incident) {
      flight_recorder_incidents.push_back(flight_recorder_incident);
      // What the nodes' tracers would write: one dump per running rank.
      if (!dumps_into.empty())
        for (const auto& s : ranks_)
          if (s.status == RankStatus::kRunning) {
            std::filesystem::create_directories(dumps_into.FlightRecorderIncident(flight_recorder_incident));
            (void)WriteFileAtomic(dumps_into.FlightRecorderDump(flight_recorder_incident, s.rank), "dump");
          }
    }
    std::map<int, std::string> out;
    for (int r : want) out[r] = "gloo::wait < dsd::runtime::AllReduce";
    return out;
  }
  std::vector<AgentHealth> Health() const override { return health; }
  bool CaughtUp() const override { return caught_up; }

  std::vector<int> signals;
  std::vector<std::vector<int>> stack_requests;
  std::vector<int> flight_recorder_incidents;
  RunDir dumps_into;  // set: Flight Recorder requests write a dump per running rank here
  std::vector<AgentHealth> health;
  std::set<int> unreachable;  // ranks behind a lost agent: signals never reach them
  bool ignore_sigterm = false;
  bool caught_up = true;

 private:
  Clock* clock_;
  std::vector<RankState> ranks_;
  std::map<int, std::string> logs_;
};

class Recorder final : public JobObserver {
 public:
  void OnLine(int rank, std::string_view line) override {
    lines.push_back(std::to_string(rank) + ":" + std::string(line));
  }
  void OnFinding(const diagnosis::Finding& f) override { findings.push_back(f.code); }
  void OnNotice(const std::string& text) override { notices.push_back(text); }
  void OnTick(const diagnosis::JobState&, const diagnosis::Diagnosis&, int64_t) override { ++ticks; }
  void OnEnd(const JobResult& r, int64_t) override { end_code = r.exit_code; }
  std::vector<std::string> lines, findings, notices;
  int ticks = 0;
  int end_code = -1;
};

class JobCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dsd_coord_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<JobCoordinator> Make(int world, JobOptions o = {}) {
    source_ = std::make_unique<FakeRankSource>(world, &clock_);
    o.run_dir = RunDir(dir_.string());
    if (o.command.empty()) o.command = {"train"};
    std::vector<RankLaunch> ranks;
    for (int r = 0; r < world; ++r) ranks.push_back({r, r % 2, r / 2, "node-" + std::to_string(r / 2)});
    return std::make_unique<JobCoordinator>(o, ranks, source_.get(), &clock_, &recorder_);
  }
  // Ticks every 200 ms of fake time until the job is over or `seconds` passed; true when over.
  bool RunFor(JobCoordinator& job, double seconds) {
    for (int i = 0; i < seconds * 5; ++i) {
      if (!job.Tick()) return true;
      clock_.Advance(std::chrono::milliseconds(200));
    }
    return false;
  }
  nlohmann::json RunJson() { return nlohmann::json::parse(*ReadFile((dir_ / "run.json").string())); }

  std::filesystem::path dir_;
  FakeClock clock_;
  Recorder recorder_;
  std::unique_ptr<FakeRankSource> source_;
};

TEST_F(JobCoordinatorTest, HealthyJobEndsWithZeroAndItsLines) {
  auto job = Make(2);
  source_->Say(0, "step 1\nstep ");
  EXPECT_TRUE(job->Tick());
  source_->Say(0, "2\n");
  source_->Exit(0, 0);
  source_->Exit(1, 0);
  EXPECT_TRUE(RunFor(*job, 1));
  JobResult r = job->Finish();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_FALSE(r.stop.stopped);
  EXPECT_TRUE(source_->signals.empty());
  EXPECT_EQ(recorder_.lines, (std::vector<std::string>{"0:step 1", "0:step 2"}));
  EXPECT_EQ(recorder_.end_code, 0);
  EXPECT_EQ(RunJson()["world_size"], 2);
}

// A rank that was traced and whose ring is not in the run dir at the end (a node whose files never
// came): the report says what it is missing instead of reading as complete.
TEST_F(JobCoordinatorTest, ATracedRanksMissingRingIsSaidInTheReport) {
  auto job = Make(2);
  source_->Enter(1, "all_reduce", 1, "train.py:9");
  EXPECT_TRUE(job->Tick());
  source_->Exit(0, 0);
  source_->Exit(1, 0);
  EXPECT_TRUE(RunFor(*job, 1));
  JobResult r = job->Finish();
  ASSERT_EQ(r.job.evidence_missing.size(), 1u);
  EXPECT_EQ(r.job.evidence_missing[0].rfind("rank-1.trace: ", 0), 0u) << r.job.evidence_missing[0];
  EXPECT_EQ(RunJson()["evidence_missing"].size(), 1u);
  const std::string text = diagnosis::RenderRunText(r.job, r.diagnosis);
  EXPECT_EQ(text.find("no problems found\n"), std::string::npos) << "never a plain green: " << text;
  EXPECT_NE(text.find("rank-1.trace: "), std::string::npos) << text;
}

// The lines observers get are safe for a terminal and for JSON; the classifiers read the bytes.
TEST_F(JobCoordinatorTest, ObserversGetPrintableLines) {
  auto job = Make(1);
  source_->Say(0, "caf\xc3\xa9 \x1b[2J done\n");
  EXPECT_TRUE(job->Tick());
  EXPECT_EQ(recorder_.lines, (std::vector<std::string>{"0:caf?? ?[2J done"}));
}

// Like torchrun: the first failure's code, after the others had the grace period to print.
TEST_F(JobCoordinatorTest, FailedRankStopsTheOthersAfterTheGraceAndItsCodeIsTheJobs) {
  auto job = Make(4);
  source_->Exit(2, 3);
  EXPECT_FALSE(RunFor(*job, 9.5));
  EXPECT_TRUE(source_->signals.empty()) << "not before the grace period";
  EXPECT_TRUE(RunFor(*job, 2));
  EXPECT_EQ(source_->signals, std::vector<int>{SIGTERM});
  JobResult r = job->Finish();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.stop.reason, "failed");
  EXPECT_EQ(RunJson()["stopped_by_dsdoctor"]["reason"], "failed");
}

TEST_F(JobCoordinatorTest, StopEscalatesToSigkill) {
  auto job = Make(2);
  source_->ignore_sigterm = true;
  job->RequestStop("interrupt", SIGINT);
  EXPECT_TRUE(RunFor(*job, 5));
  EXPECT_EQ(source_->signals, (std::vector<int>{SIGTERM, SIGKILL}));
  EXPECT_EQ(job->Finish().exit_code, 128 + SIGINT);
}

// The whole hang path: a proven mismatch → stacks of one rank per class → nothing moved → stop →
// a report that describes the ranks as they were before our signal, exit 1.
TEST_F(JobCoordinatorTest, ProvenHangTakesStacksStopsAndReports) {
  auto job = Make(4);
  source_->Enter(0, "barrier", 5, "save_checkpoint");
  for (int r = 1; r < 4; ++r) source_->Enter(r, "all_reduce", 5, "engine.step");
  EXPECT_TRUE(RunFor(*job, 5));
  ASSERT_EQ(source_->stack_requests.size(), 1u);
  EXPECT_EQ(source_->stack_requests[0], (std::vector<int>{1, 0})) << "one representative per class, largest first";
  EXPECT_EQ(source_->signals, std::vector<int>{SIGTERM});
  EXPECT_NE(std::find(recorder_.findings.begin(), recorder_.findings.end(), "COLLECTIVE_MISMATCH"),
            recorder_.findings.end());
  JobResult r = job->Finish();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.diagnosis.hang);
  EXPECT_EQ(r.stop.reason, "hang");
  ASSERT_FALSE(r.diagnosis.findings.empty());
  EXPECT_EQ(r.diagnosis.findings[0].code, "COLLECTIVE_MISMATCH");
  EXPECT_EQ(r.diagnosis.findings[0].ranks, std::vector<int>{0});
  EXPECT_EQ(r.job.ranks[0].status, RankStatus::kRunning) << "described as before our SIGTERM";
  EXPECT_EQ(r.job.ranks[1].stack, "gloo::wait < dsd::runtime::AllReduce");
  EXPECT_EQ(RunJson()["hang"], true);
}

// A traced torch job that hangs: every rank is asked for its Flight Recorder dump with the stacks,
// under an incident number, and the notice says where the dumps are. Untraced runs ask nothing.
TEST_F(JobCoordinatorTest, AHangAsksEveryTorchRankForItsFlightRecorderDump) {
  JobOptions o;
  o.python = true;
  o.flight_recorder = true;
  auto job = Make(4, o);
  source_->dumps_into = RunDir(dir_.string());
  source_->Enter(0, "barrier", 5, "save_checkpoint");
  for (int r = 1; r < 4; ++r) source_->Enter(r, "all_reduce", 5, "engine.step");
  EXPECT_TRUE(RunFor(*job, 5));
  EXPECT_EQ(source_->flight_recorder_incidents, std::vector<int>{1});
  const std::string dir = RunDir(dir_.string()).FlightRecorderIncident(1);
  EXPECT_TRUE(std::any_of(recorder_.notices.begin(), recorder_.notices.end(), [&](const std::string& n) {
    return n.find("4 of 4 ranks dumped their collectives into " + dir) != std::string::npos;
  })) << ::testing::PrintToString(recorder_.notices);

  auto plain = Make(4);
  source_->Enter(0, "barrier", 5, "save_checkpoint");
  for (int r = 1; r < 4; ++r) source_->Enter(r, "all_reduce", 5, "engine.step");
  EXPECT_TRUE(RunFor(*plain, 5));
  EXPECT_FALSE(source_->stack_requests.empty());
  EXPECT_TRUE(source_->flight_recorder_incidents.empty()) << "no tracer, no Flight Recorder request";
}

// A rank that kept the others waiting for 12 s, then joined: the live warning is kept as a warning
// in the final report and run.json (with how long it lasted), not lost because the job recovered.
TEST_F(JobCoordinatorTest, AWarningThatClearedStaysInTheReportWithItsDuration) {
  auto job = Make(2);
  source_->Enter(0, "all_reduce", 4, "train.py:10 (main)");
  source_->Complete(0);
  source_->Enter(1, "all_reduce", 5, "train.py:10 (main)");
  EXPECT_FALSE(RunFor(*job, 12));
  EXPECT_NE(std::find(recorder_.findings.begin(), recorder_.findings.end(), "RANK_MISSING"), recorder_.findings.end());
  source_->Enter(0, "all_reduce", 5, "train.py:10 (main)");
  source_->Complete(0);
  source_->Complete(1);
  EXPECT_FALSE(RunFor(*job, 2));
  source_->Exit(0, 0);
  source_->Exit(1, 0);
  EXPECT_TRUE(RunFor(*job, 2));
  JobResult r = job->Finish();
  EXPECT_EQ(r.exit_code, 0) << "a warning is no failure";
  EXPECT_TRUE(source_->signals.empty());
  const diagnosis::Finding* past = nullptr;
  for (const auto& f : r.diagnosis.findings)
    if (f.code == "RANK_MISSING") past = &f;
  ASSERT_NE(past, nullptr) << diagnosis::RenderRunText(r.job, r.diagnosis);
  EXPECT_EQ(past->severity, diagnosis::Severity::kWarning);
  EXPECT_EQ(past->ranks, std::vector<int>{0});
  EXPECT_NE(past->summary.find("then it cleared and the job went on"), std::string::npos) << past->summary;
  EXPECT_NE(past->summary.find("seen live for "), std::string::npos) << past->summary;
  auto j = RunJson();
  ASSERT_TRUE(j.contains("past_findings")) << j.dump(2);
  EXPECT_EQ(j["past_findings"][0]["code"], "RANK_MISSING");
  EXPECT_EQ(j["past_findings"][0]["ranks"], nlohmann::json::array({0}));
}

TEST_F(JobCoordinatorTest, OnHangWaitReportsButNeverStops) {
  auto job = Make(2, {.stop_on_hang = false});
  source_->Enter(0, "barrier", 5, "save_checkpoint");
  source_->Enter(1, "all_reduce", 5, "engine.step");
  EXPECT_FALSE(RunFor(*job, 20));
  EXPECT_TRUE(source_->signals.empty());
  EXPECT_NE(
      std::find(recorder_.notices.begin(), recorder_.notices.end(), "the job is hung; watching on (--on-hang wait)"),
      recorder_.notices.end());
}

// After a stall of our own (SIGSTOP, a debugger) the samples may be old news: nothing is
// diagnosed or acted on until every agent is heard from live.
TEST_F(JobCoordinatorTest, StaleSamplesAreNeverDiagnosed) {
  auto job = Make(2);
  source_->caught_up = false;
  source_->Enter(0, "barrier", 5, "save_checkpoint");
  source_->Enter(1, "all_reduce", 5, "engine.step");
  EXPECT_FALSE(RunFor(*job, 10));
  EXPECT_TRUE(source_->stack_requests.empty());
  EXPECT_TRUE(source_->signals.empty());
  EXPECT_TRUE(recorder_.findings.empty());
  source_->caught_up = true;
  EXPECT_TRUE(RunFor(*job, 2));
  EXPECT_EQ(source_->signals, std::vector<int>{SIGTERM});
}

// A silent agent: AGENT_LOST names its node and ranks, no exit code is invented for them, nothing
// about them is proof, and the job is never stopped on their account.
TEST_F(JobCoordinatorTest, SilentAgentIsLostNamedAndNotGivenAnExitCode) {
  auto job = Make(4, {.lost_give_up = std::chrono::seconds(5)});
  EXPECT_TRUE(job->Tick());
  source_->health = {{"node-0", {0, 1}, true, false, false, false, 0.2, ""},
                     {"node-1", {2, 3}, true, false, true, false, 1.2, ""}};
  source_->unreachable = {2, 3};
  source_->Enter(0, "all_reduce", 7, "engine.step");
  source_->Enter(1, "all_reduce", 7, "engine.step");
  EXPECT_TRUE(job->Tick());
  ASSERT_FALSE(recorder_.findings.empty());
  EXPECT_EQ(recorder_.findings[0], "AGENT_LOST");
  EXPECT_TRUE(job->job().ranks[2].unobserved);
  EXPECT_FALSE(job->current().hang);
  source_->Exit(0, 0);
  source_->Exit(1, 0);
  EXPECT_FALSE(RunFor(*job, 4)) << "a partition may heal: the lost ranks get lost_give_up";
  EXPECT_TRUE(RunFor(*job, 2));
  JobResult r = job->Finish();
  EXPECT_EQ(r.exit_code, 1) << "ranks that were never seen to end are not a success";
  EXPECT_EQ(r.job.ranks[2].status, RankStatus::kRunning);
  EXPECT_EQ(r.job.ranks[2].exit_code, 0);
  const auto& f = r.diagnosis.findings[0];
  EXPECT_EQ(f.code, "AGENT_LOST");
  EXPECT_EQ(f.severity, diagnosis::Severity::kError);
  EXPECT_EQ(f.nodes, std::vector<std::string>{"node-1"});
  EXPECT_EQ(f.ranks, (std::vector<int>{2, 3}));
  for (const auto& g : r.diagnosis.findings) EXPECT_NE(g.code, "RANK_MISSING") << g.summary;
  EXPECT_EQ(RunJson()["agents_lost"][0]["node"], "node-1");
}

TEST_F(JobCoordinatorTest, AgentThatComesBackLeavesAWarningAndTheJobsCode) {
  auto job = Make(2);
  source_->health = {{"node-0", {0, 1}, true, false, true, false, 3.0, ""}};
  EXPECT_TRUE(job->Tick());
  source_->health = {{"node-0", {0, 1}, true, false, false, false, 0.0, ""}};
  source_->Exit(0, 0);
  source_->Exit(1, 0);
  EXPECT_TRUE(RunFor(*job, 1));
  JobResult r = job->Finish();
  EXPECT_EQ(r.exit_code, 0);
  ASSERT_FALSE(r.diagnosis.findings.empty());
  EXPECT_EQ(r.diagnosis.findings[0].code, "AGENT_LOST");
  EXPECT_EQ(r.diagnosis.findings[0].severity, diagnosis::Severity::kWarning);
  EXPECT_NE(r.diagnosis.findings[0].summary.find("came back"), std::string::npos);
}

// An agent whose address refuses connections took its ranks with it: the job ends without waiting
// for them.
TEST_F(JobCoordinatorTest, GoneAgentEndsWithoutWaiting) {
  auto job = Make(2);
  source_->health = {{"node-0", {0, 1}, false, false, true, true, 0.1, "connection lost: connection reset by peer"}};
  EXPECT_FALSE(job->Tick());
  JobResult r = job->Finish();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.diagnosis.findings[0].summary.find("connection reset by peer"), std::string::npos);
}

// A node whose agent is gone lost its ranks: like a failed rank, the others are stopped after the
// grace period instead of waiting forever in a collective with the dead ranks.
TEST_F(JobCoordinatorTest, GoneAgentStopsTheOthersAfterTheGrace) {
  auto job = Make(4);
  source_->health = {{"node-0", {0, 1}, true, false, false, false, 0.1, ""},
                     {"node-1", {2, 3}, false, false, true, true, 0.1, "connection lost: connection closed by peer"}};
  source_->unreachable = {2, 3};
  EXPECT_FALSE(RunFor(*job, 9.5));
  EXPECT_TRUE(source_->signals.empty());
  EXPECT_TRUE(RunFor(*job, 2));
  EXPECT_EQ(source_->signals, std::vector<int>{SIGTERM});
  JobResult r = job->Finish();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.stop.reason, "failed");
  EXPECT_EQ(r.diagnosis.findings[0].code, "AGENT_LOST");
}

// A broken link is a partition that may heal: the agent keeps its ranks, the source connects again.
// The job neither fails fast nor ends without them, and once the agent is back its ranks' own exit
// codes make the job's.
TEST_F(JobCoordinatorTest, APartitionThatHealsNeverChangesTheExitCode) {
  auto job = Make(4);
  source_->health = {{"node-0", {0, 1}, true, false, false, false, 0.1, ""},
                     {"node-1", {2, 3}, false, false, true, false, 5.0, "connection lost: connection timed out"}};
  source_->unreachable = {2, 3};
  EXPECT_FALSE(RunFor(*job, 20)) << "the job waits for the partitioned node";
  EXPECT_TRUE(source_->signals.empty()) << "a partition is not a failure";
  source_->health = {{"node-0", {0, 1}, true, false, false, false, 0.1, ""},
                     {"node-1", {2, 3}, true, false, false, false, 0.1, ""}};
  source_->unreachable.clear();
  for (int r = 0; r < 4; ++r) source_->Exit(r, 0);
  EXPECT_TRUE(RunFor(*job, 2));
  JobResult r = job->Finish();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(source_->signals.empty());
}

// Ranks the coordinator cannot see never prove a hang, also on the look after the stacks.
TEST_F(JobCoordinatorTest, AHangThatRestsOnALostAgentsRanksNeverStopsTheJob) {
  auto job = Make(4);
  source_->health = {{"node-0", {0, 1}, true, false, false, false, 0.1, ""},
                     {"node-1", {2, 3}, true, false, true, false, 2.0, ""}};
  source_->unreachable = {2, 3};
  source_->Enter(0, "barrier", 5, "save_checkpoint");
  for (int r = 1; r < 4; ++r) source_->Enter(r, "all_reduce", 5, "engine.step");
  EXPECT_FALSE(RunFor(*job, 20));
  EXPECT_TRUE(source_->signals.empty());
  for (const auto& req : source_->stack_requests)
    for (int r : req) EXPECT_LT(r, 2) << "no stack request for a lost agent's rank";
  EXPECT_FALSE(job->current().hang);
}

}  // namespace
}  // namespace dsd::coordinator
