#include "diagnosis/engine.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <set>

#include "diagnosis/report.h"

namespace dsd::diagnosis {
namespace {

constexpr int64_t kNow = 1'000'000'000'000;  // 1000 s
constexpr int64_t kSec = 1'000'000'000;

OpRecord Call(const std::string& op, uint64_t seq, const std::string& callsite, double started_s_ago, bool in_flight,
              uint64_t count = 1024) {
  OpRecord r;
  r.op = op;
  r.seq = seq;
  r.callsite = callsite;
  r.dtype = op == "barrier" ? "" : "float32";
  r.reduce = op == "all_reduce" ? "sum" : "";
  r.count = op == "barrier" ? 0 : count;
  r.bytes = r.count * 4;
  r.state = in_flight ? "started" : "completed";
  r.started_ns = kNow - static_cast<int64_t>(started_s_ago * kSec);
  r.ended_ns = in_flight ? 0 : r.started_ns + kSec / 100;
  return r;
}

JobState Job(int n) {
  JobState job;
  job.world_size = n;
  job.now_ns = kNow;
  job.stall_after_s = 30;
  job.hang_after_s = 5;
  for (int r = 0; r < n; ++r) {
    RankState s;
    s.rank = r;
    s.node = "node-" + std::to_string(r / 2);
    s.status = RankStatus::kRunning;
    s.has_trace = true;
    s.phase = "step";
    for (uint64_t k = 1; k <= 4; ++k) s.recent.push_back(Call("all_reduce", k, "engine.step", 10.0 - k, false));
    job.ranks.push_back(s);
  }
  return job;
}

void Block(RankState& r, OpRecord rec) {
  r.in_flight = rec;
  r.last = rec;
  r.recent.push_back(rec);
}

const Finding* Find(const Diagnosis& d, const std::string& code) {
  for (const auto& f : d.findings)
    if (f.code == code) return &f;
  return nullptr;
}

// Parameterized over world sizes like the collectives' tests: the rules must not depend on it.
class EngineTest : public ::testing::TestWithParam<int> {};

TEST_P(EngineTest, HealthyJobHasNoFindings) {
  JobState job = Job(GetParam());
  Diagnosis d = Diagnose(job);
  EXPECT_TRUE(d.findings.empty()) << RenderRunText(job, d);
  EXPECT_FALSE(d.hang);
}

TEST_P(EngineTest, RankZeroOnlySaveCheckpointIsAMismatchNamingRankZeroAtOnce) {
  JobState job = Job(GetParam());
  // Blocked only 0.2 s: the traces prove it; no timeout is waited for.
  Block(job.ranks[0], Call("barrier", 5, "save_checkpoint", 0.2, true));
  for (int r = 1; r < GetParam(); ++r) Block(job.ranks[r], Call("all_reduce", 5, "engine.step", 0.2, true));
  Diagnosis d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  const Finding& f = d.findings[0];
  EXPECT_EQ(f.code, "COLLECTIVE_MISMATCH") << RenderRunText(job, d);
  EXPECT_EQ(f.ranks, std::vector<int>{0});
  EXPECT_NE(f.summary.find("barrier#5"), std::string::npos) << f.summary;
  EXPECT_NE(f.summary.find("@save_checkpoint"), std::string::npos);
  EXPECT_NE(f.summary.find("all_reduce#5"), std::string::npos);
  EXPECT_NE(f.remedy.find("every rank must call it: DeepSpeed's engine.save_checkpoint()"), std::string::npos)
      << f.remedy;
  EXPECT_TRUE(d.hang);
  EXPECT_EQ(f.nodes, std::vector<std::string>{"node-0"});
}

TEST_P(EngineTest, SizeMismatchNamesTheOddRankAndRemedy) {
  int n = GetParam();
  JobState job = Job(n);
  for (int r = 0; r < n; ++r)
    Block(job.ranks[r], Call("all_reduce", 5, "engine.step", 0.1, true, r == n - 1 ? 2048 : 1024));
  Diagnosis d = Diagnose(job);
  ASSERT_NE(Find(d, "COLLECTIVE_MISMATCH"), nullptr);
  // Two ranks that disagree: the earlier calls at engine.step (x1024) say which one changed.
  EXPECT_EQ(Find(d, "COLLECTIVE_MISMATCH")->ranks, std::vector<int>{n - 1});
  EXPECT_NE(Find(d, "COLLECTIVE_MISMATCH")->remedy.find("element count"), std::string::npos);
}

TEST_P(EngineTest, TwoSidesAtANewCallsiteAreBothNamed) {
  int n = GetParam();
  JobState job = Job(n);
  for (int r = 0; r < n; ++r)
    Block(job.ranks[r], Call("all_reduce", 5, "eval.metrics", 0.1, true, r < n / 2 ? 2048 : 1024));
  Diagnosis d = Diagnose(job);
  ASSERT_NE(Find(d, "COLLECTIVE_MISMATCH"), nullptr);
  // Nothing earlier was called there: neither side can be told from the other.
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  EXPECT_EQ(Find(d, "COLLECTIVE_MISMATCH")->ranks, all);
}

TEST_P(EngineTest, RanksStoppedBeforeTheCallDoNotHideWhichSideChanged) {
  // The last rank issued a bigger all-reduce, it and the rank before it failed in it, and the job
  // was stopped before the other ranks got there: only two ranks vote, and it is a tie.
  int n = GetParam();
  JobState job = Job(n);
  for (int r = n - 2; r < n; ++r) {
    OpRecord rec = Call("all_reduce", 5, "engine.step", 0.5, false, r == n - 1 ? 64 : 1024);
    rec.state = "failed";
    job.ranks[r].recent.push_back(rec);
    job.ranks[r].last = rec;
  }
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, std::vector<int>{n - 1});
  bool said = false;
  for (const auto& e : f->evidence) said |= e.find("changed: the earlier calls at @engine.step") != std::string::npos;
  EXPECT_TRUE(said) << RenderRunText(job, d);
}

TEST_P(EngineTest, CompletedOpMismatchIsFoundInHistoryButIsNoHang) {
  int n = GetParam();
  JobState job = Job(n);
  job.ranks[1].recent[2].reduce = "max";  // seq 3 completed with a different reduce op
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->ranks, std::vector<int>{1});
  EXPECT_NE(f->summary.find("results are wrong"), std::string::npos);
  EXPECT_FALSE(d.hang);
}

TEST_P(EngineTest, RanksALauncherEndsAfterAFailureAreNotCulprits) {
  // mpirun after MPI_Abort: the failed rank exits with its error code, and mpirun ends the others
  // with SIGTERM and SIGKILL, in the same sampling tick or later.
  int n = GetParam();
  JobState job = Job(n);
  job.launcher_teardown = true;
  for (int r = 0; r < n; ++r) {
    job.ranks[r].status = RankStatus::kExited;
    job.ranks[r].exit_ns = kNow - 2 * kSec + (r % 2) * kSec / 5;
    job.ranks[r].signal = r % 2 ? SIGTERM : SIGKILL;
  }
  job.ranks[n - 1].signal = 0;
  job.ranks[n - 1].exit_code = 15;
  job.ranks[n - 1].exit_ns = kNow - 2 * kSec;
  Diagnosis d = Diagnose(job);
  int exited_findings = 0;
  for (auto& f : d.findings) exited_findings += f.code == "RANK_EXITED";
  EXPECT_EQ(exited_findings, 1) << RenderRunText(job, d);
  const Finding* f = Find(d, "RANK_EXITED");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->ranks, std::vector<int>{n - 1});
  EXPECT_NE(f->summary.find("exited with code 15"), std::string::npos) << f->summary;
  // Without such a launcher (agents' ticks, our own stop) every kill is its own finding.
  job.launcher_teardown = false;
  d = Diagnose(job);
  exited_findings = 0;
  for (auto& g : d.findings) exited_findings += g.code == "RANK_EXITED";
  EXPECT_GT(exited_findings, 1) << RenderRunText(job, d);
}

TEST_P(EngineTest, RanksKilledTogetherAreEachCulprits) {
  // Two ranks the OOM killer took in one tick: neither ended because of the other.
  int n = GetParam();
  JobState job = Job(n);
  job.launcher_teardown = true;
  for (int r : {0, n - 1}) {
    job.ranks[r].status = RankStatus::kExited;
    job.ranks[r].signal = SIGKILL;
    job.ranks[r].exit_ns = kNow - 2 * kSec;
  }
  Diagnosis d = Diagnose(job);
  std::set<int> named;
  for (auto& f : d.findings)
    if (f.code == "RANK_EXITED") named.insert(f.ranks.begin(), f.ranks.end());
  EXPECT_EQ(named, (std::set<int>{0, n - 1})) << RenderRunText(job, d);
}

TEST_P(EngineTest, RanksThatNeverStartedInAJobThatEndedAreALaunchError) {
  // The MPI ranks' mpirun refused its options: the job ended with ranks that never ran.
  int n = GetParam();
  JobState job = Job(n);
  for (auto& r : job.ranks) {
    r = RankState{};
    r.rank = static_cast<int>(&r - job.ranks.data());
    r.status = RankStatus::kExited;
    r.exit_ns = kNow - kSec;
  }
  job.ranks[n - 1].status = RankStatus::kNotStarted;
  job.ranks[n - 1].exit_ns = 0;
  job.job_ended = true;
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "LAUNCH_ERROR");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, std::vector<int>{n - 1});
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_NE(f->summary.find("never started"), std::string::npos) << f->summary;
  EXPECT_NE(f->remedy.find("launcher.log"), std::string::npos) << f->remedy;

  // With mpirun's refusal in the launcher's log, the refusal is the cause, given once.
  LogEvent refusal;
  refusal.code = "LAUNCH_ERROR";
  refusal.kind = "launcher_bad_option";
  refusal.summary = "mpirun refused its option --oversubscrbe and started no rank";
  refusal.remedy = "mpirun does not know --oversubscrbe.";
  refusal.text = "mpirun: Error: unknown option \"--oversubscrbe\"";
  job.events.push_back(refusal);
  d = Diagnose(job);
  int launch_errors = 0;
  for (const Finding& g : d.findings) launch_errors += g.code == "LAUNCH_ERROR";
  EXPECT_EQ(launch_errors, 1) << RenderRunText(job, d);
  f = Find(d, "LAUNCH_ERROR");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->summary.find("never started: mpirun refused its option --oversubscrbe"), std::string::npos)
      << f->summary;
  EXPECT_EQ(f->remedy.rfind("mpirun does not know --oversubscrbe.", 0), 0u) << f->remedy;
  job.events.clear();

  // While the job runs, a rank not started yet is one mpirun has yet to hand over.
  job.job_ended = false;
  EXPECT_EQ(Find(Diagnose(job), "LAUNCH_ERROR"), nullptr);
}

TEST_P(EngineTest, KilledRankIsTheCulpritAndPeersAreConsequences) {
  int n = GetParam();
  JobState job = Job(n);
  job.ranks[1].status = RankStatus::kExited;
  job.ranks[1].signal = 9;
  job.ranks[1].exit_ns = kNow - 2 * kSec;
  Block(job.ranks[1], Call("all_reduce", 5, "engine.step", 2.5, true));
  for (int r = 0; r < n; ++r) {
    if (r == 1) continue;
    job.ranks[r].status = RankStatus::kExited;
    job.ranks[r].exit_code = 1;
    job.ranks[r].exit_ns = kNow - 2 * kSec;  // same sampling tick as the killed rank
    LogEvent e;
    e.rank = r;
    e.code = "COMM_ERROR";
    e.summary = "connection reset by peer";
    job.events.push_back(e);
  }
  Diagnosis d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].code, "RANK_EXITED") << RenderRunText(job, d);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{1});
  EXPECT_NE(d.findings[0].summary.find("SIGKILL"), std::string::npos);
  EXPECT_NE(d.findings[0].summary.find("all_reduce#5"), std::string::npos);
  int exited_findings = 0;
  for (auto& f : d.findings) exited_findings += f.code == "RANK_EXITED";
  EXPECT_EQ(exited_findings, 1);
  for (auto& f : d.findings)
    if (f.code == "COMM_ERROR") {
      EXPECT_EQ(f.severity, Severity::kWarning) << "peers' connection errors are consequences";
    }
}

TEST_P(EngineTest, SkippedBarrierIsRankMissingAtOnce) {
  int n = GetParam();
  JobState job = Job(n);
  // Ranks wait in barrier#5; rank n-1 skipped it and already waits in all_reduce#6 of its own.
  for (int r = 0; r < n - 1; ++r) Block(job.ranks[r], Call("barrier", 5, "user.barrier", 1.0, true));
  job.ranks[n - 1].recent.push_back(Call("all_reduce", 5, "engine.step", 1.2, false));
  Block(job.ranks[n - 1], Call("all_reduce", 6, "engine.step", 1.0, true));
  Diagnosis d = Diagnose(job);
  // seq 5 differs (barrier vs all_reduce): the mismatch names the rank that went elsewhere.
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].code, "COLLECTIVE_MISMATCH") << RenderRunText(job, d);
  EXPECT_EQ(d.findings[0].ranks, (n == 2 ? std::vector<int>{0, 1} : std::vector<int>{n - 1}));
  EXPECT_TRUE(d.hang);
}

TEST_P(EngineTest, RankBusyComputingIsOnlyASuspicionThatNeverStopsTheJob) {
  int n = GetParam();
  JobState job = Job(n);
  for (int r = 1; r < n; ++r) Block(job.ranks[r], Call("all_reduce", 5, "engine.step", 2.0, true));
  job.ranks[0].phase = "forward";
  job.ranks[0].proc = {true, 'R', "0", 1.0, 0};
  EXPECT_EQ(Find(Diagnose(job), "RANK_MISSING"), nullptr) << "2 s is below hang_after_s: it may be a straggler";
  // A long evaluation on rank 0 while the others wait: legitimate until proven otherwise.
  for (int r = 1; r < n; ++r) job.ranks[r].in_flight->started_ns = kNow - 30 * kSec;
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "RANK_MISSING");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, std::vector<int>{0});
  EXPECT_EQ(f->proof, "heuristic");
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NE(f->evidence[0].find("phase forward"), std::string::npos) << f->evidence[0];
  EXPECT_NE(f->evidence[0].find("spinning"), std::string::npos) << f->evidence[0];
  EXPECT_FALSE(d.hang) << "a busy rank is not proof of a hang";
  EXPECT_TRUE(d.suspect);
}

// After the fact (analyze of traces whose writers all stopped: mpirun tore the job down after one
// rank was killed), the others were in all_reduce#5 for under a second when the job ended. The rank
// whose trace stopped before they entered it is named; one that was still alive and computing when
// everything stopped is not.
TEST_P(EngineTest, AfterTheJobEndedTheRankThatStoppedBeforeTheCollectiveIsNamed) {
  int n = GetParam();
  JobState job = Job(n);
  job.traces_stopped = true;
  const int victim = n - 1;
  for (int r = 0; r < n; ++r) job.ranks[r].heartbeat_ns = kNow;  // every trace beat until the end
  for (int r = 0; r < victim; ++r) Block(job.ranks[r], Call("all_reduce", 5, "engine.step", 0.9, true));
  job.ranks[victim].heartbeat_ns = kNow - kSec * 95 / 100;  // gone 50 ms before the others entered
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "RANK_MISSING");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, std::vector<int>{victim});
  EXPECT_NE(f->summary.find("when the job's processes stopped"), std::string::npos) << f->summary;
  EXPECT_NE(f->remedy.find("dmesg"), std::string::npos);
  bool timing = false;
  for (const auto& e : f->evidence) timing |= e.find("stopped beating 950 ms before theirs") != std::string::npos;
  EXPECT_TRUE(timing) << RenderRunText(job, d);
  EXPECT_NE(RenderRunText(job, d).find("(where its trace ends)"), std::string::npos);

  // The same traces read while the job may still run: 0.9 s is below hang_after_s.
  job.traces_stopped = false;
  EXPECT_EQ(Find(Diagnose(job), "RANK_MISSING"), nullptr);

  // A rank that beat as long as the waiting ones (alive, computing, when the job was torn down) is
  // not the one that stopped first.
  job.traces_stopped = true;
  job.ranks[victim].heartbeat_ns = kNow - kSec / 10;
  EXPECT_EQ(Find(Diagnose(job), "RANK_MISSING"), nullptr) << RenderRunText(job, Diagnose(job));

  // A job killed whole while a straggler was still on its way: every trace ends within one beat
  // (100 ms), so the straggler's last beat may be older than the others' arrival. Not a culprit.
  for (int r = 0; r < victim; ++r) job.ranks[r].in_flight->started_ns = kNow - kSec / 50;  // 20 ms before the end
  for (int r = 0; r < victim; ++r) job.ranks[r].heartbeat_ns = kNow - kSec / 20;
  job.ranks[victim].heartbeat_ns = kNow - kSec / 10;  // 80 ms before the last arrival
  EXPECT_EQ(Find(Diagnose(job), "RANK_MISSING"), nullptr) << RenderRunText(job, Diagnose(job));
  for (int r = 0; r < victim; ++r) job.ranks[r].in_flight->started_ns = kNow - kSec * 9 / 10;
  for (int r = 0; r < victim; ++r) job.ranks[r].heartbeat_ns = kNow;

  // One that stopped well before every other rank did, even after they entered, is.
  job.ranks[victim].heartbeat_ns = kNow - kSec * 8 / 10;
  d = Diagnose(job);
  f = Find(d, "RANK_MISSING");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->ranks, std::vector<int>{victim});
}

TEST_P(EngineTest, RankBlockedOutsideCollectivesIsNamedWithItsStackButNeverProven) {
  int n = GetParam();
  JobState job = Job(n);
  for (int r = 1; r < n; ++r) Block(job.ranks[r], Call("all_reduce", 5, "train.py:40 (ddp.bucket)", 8.0, true));
  job.ranks[0].proc = {true, 'S', "futex_wait_queue", 0.0, 7.5};
  job.ranks[0].stack = "get (queue.py:180) < _next_data (dataloader.py:1316) < main (train.py:38)";
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "RANK_MISSING");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, std::vector<int>{0});
  EXPECT_NE(f->evidence[0].find("dataloader.py"), std::string::npos) << f->evidence[0];
  EXPECT_NE(f->summary.find("ddp.bucket"), std::string::npos) << f->summary;
  EXPECT_NE(f->summary.find("its stack says where"), std::string::npos) << f->summary;
  // A GPU-bound evaluation blocks with flat CPU too: where it waits is named, the job is not stopped.
  EXPECT_EQ(f->proof, "heuristic");
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_FALSE(d.hang);
  EXPECT_TRUE(d.suspect);
}

TEST_P(EngineTest, RankBlockedInAnotherCallOnTheWaitingRanksIsProvenByTraces) {
  int n = GetParam();
  JobState job = Job(n);
  for (int r = 1; r < n; ++r) Block(job.ranks[r], Call("all_reduce", 5, "train.py:50", 7.0, true));
  OpRecord recv = Call("recv", 1, "train.py:61", 7.0, true);
  recv.peer = 1;
  Block(job.ranks[0], recv);
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "RANK_MISSING");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, std::vector<int>{0});
  EXPECT_EQ(f->proof, "trace");
  EXPECT_NE(f->summary.find("blocked in another call"), std::string::npos) << f->summary;
  EXPECT_TRUE(d.hang);
}

TEST_P(EngineTest, AStaleSampleOfARankThatAlreadyFinishedTheCallIsNotMissing) {
  int n = GetParam();
  JobState job = Job(n);
  // Node 1's ranks were last seen inside all_reduce#5 (an old sample); rank 0 finished #5 and
  // moved on: it did not skip the call, the others' sample is just late.
  for (int r = 1; r < n; ++r) {
    Block(job.ranks[r], Call("all_reduce", 5, "engine.step", 9.0, true));
    job.ranks[r].sample_ns = kNow - 8 * kSec;
  }
  job.ranks[0].recent.push_back(Call("all_reduce", 5, "engine.step", 9.0, false));
  job.ranks[0].recent.push_back(Call("all_reduce", 6, "engine.step", 0.2, false));
  Diagnosis d = Diagnose(job);
  EXPECT_TRUE(d.findings.empty()) << RenderRunText(job, d);
  EXPECT_FALSE(d.hang);
}

TEST_P(EngineTest, AgesCountToWhenARankWasSeenNotToTheCoordinatorsClock) {
  int n = GetParam();
  JobState job = Job(n);
  // The coordinator was paused for 20 s: its clock moved on, the samples it holds did not.
  for (int r = 0; r < n; ++r) {
    Block(job.ranks[r], Call("all_reduce", 5, "engine.step", 21.0, true));
    job.ranks[r].sample_ns = kNow - 20 * kSec;
  }
  job.stall_after_s = 10;
  EXPECT_EQ(Find(Diagnose(job), "COLLECTIVE_STALL"), nullptr) << "seen waiting 1 s, not 21 s";
  for (int r = 0; r < n; ++r) job.ranks[r].sample_ns = kNow;
  EXPECT_NE(Find(Diagnose(job), "COLLECTIVE_STALL"), nullptr);
}

TEST_P(EngineTest, RanksOutsideASubgroupAreNotMissingFromIt) {
  int n = GetParam();
  JobState job = Job(n);
  OpRecord sub = Call("all_reduce", 3, "train.py:70", 20.0, true);
  sub.comm = 77;
  Block(job.ranks[0], sub);
  if (n > 1) Block(job.ranks[1], sub);
  for (int r = 2; r < n; ++r) job.ranks[r].proc = {true, 'R', "0", 1.0, 0};  // computing, never used group 77
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(Find(d, "RANK_MISSING"), nullptr) << RenderRunText(job, d);
}

TEST_P(EngineTest, UnevenInputsMismatchPointsAtJoin) {
  int n = GetParam();
  JobState job = Job(n);
  // Rank 0 ran out of data and went to the final barrier; the others are in the next step's
  // gradient all-reduce.
  Block(job.ranks[0], Call("barrier", 5, "train.py:90", 1.0, true));
  for (int r = 1; r < n; ++r) {
    OpRecord b = Call("all_reduce", 5, "train.py:41 (ddp.bucket)", 1.0, true);
    b.async = true;
    Block(job.ranks[r], b);
  }
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_NE(f->remedy.find("join()"), std::string::npos) << f->remedy;
  EXPECT_EQ(f->proof, "trace");
}

TEST_P(EngineTest, RankThatExitedZeroWhileOthersWaitIsAnEarlyLoopExit) {
  int n = GetParam();
  JobState job = Job(n);
  for (int r = 1; r < n; ++r) Block(job.ranks[r], Call("all_reduce", 5, "train.py:41 (ddp.bucket)", 2.0, true));
  job.ranks[0].status = RankStatus::kExited;
  job.ranks[0].exit_code = 0;
  job.ranks[0].exit_ns = kNow - kSec;
  job.ranks[0].last = job.ranks[0].recent.back();
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "RANK_EXITED");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, std::vector<int>{0});
  EXPECT_EQ(f->proof, "exit");
  EXPECT_NE(f->remedy.find("uneven inputs"), std::string::npos) << f->remedy;
  EXPECT_NE(f->remedy.find("join()"), std::string::npos) << f->remedy;
  EXPECT_TRUE(d.hang);
}

TEST_P(EngineTest, ConsistentCollectiveStallsOnlyPastTheTimeoutAndCitesTheNetwork) {
  int n = GetParam();
  JobState job = Job(n);
  for (int r = 0; r < n; ++r) Block(job.ranks[r], Call("all_reduce", 5, "engine.step", 10, true));
  EXPECT_EQ(Find(Diagnose(job), "COLLECTIVE_STALL"), nullptr);
  for (int r = 0; r < n; ++r) job.ranks[r].in_flight->started_ns = kNow - 40 * kSec;
  Finding net;
  net.code = "PORT_BLOCKED";
  net.summary = "node-0 → node-1:29500 timed out";
  job.network.push_back(net);
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "COLLECTIVE_STALL");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->ranks.size(), static_cast<size_t>(n));
  bool cites = false;
  for (auto& e : f->evidence) cites |= e.find("PORT_BLOCKED") != std::string::npos;
  EXPECT_TRUE(cites);
}

TEST_P(EngineTest, WrongWorldSizeInInitIsNamedAtOnce) {
  int n = GetParam();
  JobState job = Job(n);
  for (auto& r : job.ranks) {
    r.recent.clear();
    OpRecord rdzv = Call("rendezvous", 0, "init_distributed", 1.0, true);
    rdzv.dtype = "";
    rdzv.count = 0;
    rdzv.peer = n + 1;
    Block(r, rdzv);
  }
  Diagnosis d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].code, "RANK_MISSING") << RenderRunText(job, d);
  EXPECT_NE(d.findings[0].summary.find("started " + std::to_string(n) + " ranks"), std::string::npos)
      << d.findings[0].summary;
  EXPECT_NE(d.findings[0].summary.find("expect " + std::to_string(n + 1)), std::string::npos);
  EXPECT_NE(d.findings[0].summary.find("world-size disagreement"), std::string::npos);
  EXPECT_EQ(d.findings[0].proof, "trace");
  EXPECT_TRUE(d.hang);
}

TEST_P(EngineTest, AWorldSizeDisagreementThatMadeInitFailIsTheCauseNotTheExits) {
  int n = GetParam();
  JobState job = Job(n);
  for (auto& r : job.ranks) {
    r.recent.clear();
    OpRecord rdzv = Call("rendezvous", 0, "train.py:72 (main)", 1.0, false);
    rdzv.state = "failed";
    rdzv.dtype = "";
    rdzv.count = 0;
    rdzv.peer = r.rank == n - 1 ? n + 1 : n;
    r.recent.push_back(rdzv);
    r.last = rdzv;
    r.status = RankStatus::kExited;
    r.exit_code = 1;
    r.exit_ns = kNow - kSec / 2;
  }
  Diagnosis d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].code, "RANK_MISSING") << RenderRunText(job, d);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{n - 1});
  EXPECT_NE(d.findings[0].summary.find("world-size disagreement"), std::string::npos) << d.findings[0].summary;
  EXPECT_NE(d.findings[0].summary.find("init failed"), std::string::npos) << d.findings[0].summary;
  EXPECT_EQ(Find(d, "RANK_EXITED"), nullptr) << "the exits are its consequence: " << RenderRunText(job, d);
}

TEST_P(EngineTest, SigpipeOfAPeerIsAConsequenceOfTheKilledRank) {
  int n = GetParam();
  JobState job = Job(n);
  for (auto& r : job.ranks) {
    r.status = RankStatus::kExited;
    r.exit_code = 1;
    r.exit_ns = kNow - kSec;
    LogEvent e;
    e.rank = r.rank;
    e.code = "COMM_ERROR";
    e.summary = "connection closed by peer";
    job.events.push_back(e);
  }
  job.ranks[0].exit_code = 0;
  job.ranks[0].signal = 13;  // seen first: its agent sampled earlier
  job.ranks[0].exit_ns = kNow - 2 * kSec;
  job.ranks[n - 1].exit_code = 0;
  job.ranks[n - 1].signal = 9;
  Diagnosis d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].code, "RANK_EXITED");
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{n - 1}) << RenderRunText(job, d);
}

// torch 2.x aborts a rank whose communication error was not caught (C++ terminate) and, at exit, one
// that never destroyed its process group: both end with SIGABRT, and the peers' abort may be sampled
// first. The abort after a communication error of its own is the consequence; the rank that aborted
// without one left first (the e2e early_exit scenario on torch 2.15).
TEST_P(EngineTest, AnAbortAfterItsOwnCommunicationErrorIsAConsequence) {
  int n = GetParam();
  JobState job = Job(n);
  for (auto& r : job.ranks) {
    r.status = RankStatus::kExited;
    r.exit_code = 0;
    r.signal = 6;
    r.exit_ns = kNow - 2 * kSec + r.rank * 1000;  // the peers' aborts are seen first
    r.last = r.recent.back();
    LogEvent e;
    e.rank = r.rank;
    e.code = "COMM_ERROR";
    e.summary = "Connection reset by peer";
    if (r.rank != n - 1) job.events.push_back(e);
  }
  job.ranks[n - 1].exit_ns = kNow - kSec;
  Diagnosis d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].code, "RANK_EXITED") << RenderRunText(job, d);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{n - 1}) << RenderRunText(job, d);
  EXPECT_NE(d.findings[0].summary.find("SIGABRT"), std::string::npos) << d.findings[0].summary;
}

// A rank's loop ended early (exit 0) and the others then failed with "Connection reset by peer" in
// DDP's untraced all-reduce (torch 1.13): no record shows where they waited, but the clean exit came
// first. It is the culprit, not the first of the others to fail.
TEST_P(EngineTest, ARankThatLeftCleanlyBeforeThePeersFailedForWantOfItIsTheCulprit) {
  int n = GetParam();
  JobState job = Job(n);
  for (auto& r : job.ranks) {
    r.status = RankStatus::kExited;
    r.exit_code = 1;
    r.exit_ns = kNow - kSec + r.rank * 1000;
    r.last = r.recent.back();
    LogEvent e;
    e.rank = r.rank;
    e.code = "COMM_ERROR";
    e.summary = "Connection reset by peer";
    if (r.rank != n - 1) job.events.push_back(e);
  }
  job.ranks[n - 1].exit_code = 0;
  job.ranks[n - 1].exit_ns = kNow - 2 * kSec;
  Diagnosis d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].code, "RANK_EXITED") << RenderRunText(job, d);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{n - 1}) << RenderRunText(job, d);
  EXPECT_NE(d.findings[0].summary.find("exited with code 0"), std::string::npos) << d.findings[0].summary;
  EXPECT_NE(d.findings[0].summary.find("before the other ranks failed for want of it"), std::string::npos)
      << d.findings[0].summary;
  EXPECT_NE(d.findings[0].remedy.find("uneven inputs"), std::string::npos) << d.findings[0].remedy;
  // A clean exit after the failures is no culprit: the first to fail is.
  job.ranks[n - 1].exit_ns = kNow;
  d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{0}) << RenderRunText(job, d);
  // ... unless its program had finished before them (a traced Python rank: its interpreter's teardown,
  // which closes the connections the others fail on, ends after their failures are sampled).
  for (auto& r : job.ranks) r.phase = "finished", r.phase_ns = r.exit_ns - kSec / 10;
  job.ranks[n - 1].phase_ns = kNow - 2 * kSec;
  d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{n - 1}) << RenderRunText(job, d);
}

TEST_P(EngineTest, APastFindingStaysAWarningUnlessTheRulesFindItAgain) {
  int n = GetParam();
  JobState job = Job(n);
  Finding past;
  past.code = "RANK_MISSING";
  past.severity = Severity::kWarning;
  past.ranks = {n - 1};
  past.summary = "rank waited (seen live for 40 s, then it cleared and the job went on)";
  past.proof = "heuristic";
  job.past.push_back(past);
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "RANK_MISSING");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->summary, past.summary);
  EXPECT_FALSE(d.hang);
  EXPECT_FALSE(d.suspect) << "a past warning proves and suspects nothing now";
  // Found again now (the same code and ranks): the current finding, once.
  for (int r = 0; r < n - 1; ++r) Block(job.ranks[r], Call("all_reduce", 9, "train.py:41", 30.0, true));
  job.ranks[n - 1].in_flight.reset();
  d = Diagnose(job);
  int count = 0;
  for (const auto& g : d.findings) count += g.code == "RANK_MISSING" && g.ranks == past.ranks;
  EXPECT_EQ(count, 1) << RenderRunText(job, d);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, EngineTest, ::testing::Values(2, 4, 8, 64));

TEST(EngineDeadlockTest, SendSendCycleIsADeadlock) {
  JobState job = Job(4);
  auto p2p = [](const std::string& op, int peer) {
    OpRecord r = Call(op, 1, "pipeline", 1.0, true);
    r.peer = peer;
    return r;
  };
  Block(job.ranks[0], p2p("send", 1));
  Block(job.ranks[1], p2p("send", 0));
  Block(job.ranks[2], p2p("send", 3));  // matched pair: 2 sends, 3 receives
  Block(job.ranks[3], p2p("recv", 2));
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "P2P_DEADLOCK");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, (std::vector<int>{0, 1}));
  int deadlocks = 0;
  for (auto& x : d.findings) deadlocks += x.code == "P2P_DEADLOCK";
  EXPECT_EQ(deadlocks, 1);
}

TEST(EngineStragglerTest, RankAlwaysLastByHalfASecondIsAStraggler) {
  JobState job = Job(4);
  for (auto& r : job.ranks) {
    r.recent.clear();
    for (uint64_t k = 1; k <= 6; ++k) {
      OpRecord c = Call("all_reduce", k, "engine.step", 20.0 - k, false);
      if (r.rank == 2) c.started_ns += kSec / 2;
      r.recent.push_back(c);
    }
  }
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "STRAGGLER");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->ranks, std::vector<int>{2});
  EXPECT_NE(f->summary.find("500 ms"), std::string::npos) << f->summary;
  EXPECT_FALSE(d.hang);
}

// DeepSpeed 0.19's engine.step() all-reduces too: two collectives a step, and the late rank makes
// the others wait at the first only (at the second, rank 0, which prints the loss, is last by 1 ms).
TEST(EngineStragglerTest, ALateRankIsAStragglerWhenOnlyOneCollectiveOfEachStepWaitsForIt) {
  JobState job = Job(2);
  for (auto& r : job.ranks) {
    r.recent.clear();
    for (uint64_t k = 1; k <= 12; ++k) {
      OpRecord c = Call("all_reduce", k, k % 2 ? "engine.backward" : "engine.step", 30.0 - k, false);
      if (k % 2 && r.rank == 1) c.started_ns += kSec * 4 / 10;
      if (k % 2 == 0 && r.rank == 0) c.started_ns += kSec / 1000;  // rank 0 prints the loss: last, by 1 ms
      r.recent.push_back(c);
    }
  }
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "STRAGGLER");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, std::vector<int>{1});
  EXPECT_NE(f->summary.find("at 6 of the last 6 collectives the others waited at, a median 400 ms"), std::string::npos)
      << f->summary;
}

TEST(EngineStragglerTest, JitterAndARareLateArrivalAreNoStraggler) {
  JobState job = Job(3);
  for (auto& r : job.ranks) {
    r.recent.clear();
    for (uint64_t k = 1; k <= 12; ++k) {
      OpRecord c = Call("all_reduce", k, "engine.step", 30.0 - k, false);
      if (r.rank == 2) c.started_ns += kSec / 20;                   // always last, by 50 ms: jitter
      if (r.rank == 0 && (k == 3 || k == 9)) c.started_ns += kSec;  // twice late by 1 s
      r.recent.push_back(c);
    }
  }
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(Find(d, "STRAGGLER"), nullptr) << RenderRunText(job, d);
}

TEST(EngineTracebackTest, DifferentCollectivesInTracebacksAreAMismatch) {
  JobState job;
  job.world_size = 4;
  job.now_ns = kNow;
  for (int r = 0; r < 4; ++r) {
    RankState s;
    s.rank = r;
    s.status = RankStatus::kExited;
    s.exit_code = 1;
    job.ranks.push_back(s);
    LogEvent e;
    e.rank = r;
    e.code = "LOG_ERROR";
    e.summary = "Python exception: RuntimeError: Timed out";
    e.collective = r == 1 ? "all_reduce" : "barrier";
    e.location = r == 1 ? "train.py:11" : "train.py:14";
    job.events.push_back(e);
  }
  Diagnosis d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].code, "COLLECTIVE_MISMATCH") << RenderRunText(job, d);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{1});
  EXPECT_NE(d.findings[0].summary.find("train.py:14"), std::string::npos);
}

TEST(EngineTracebackTest, LivePythonStacksInDifferentCollectivesAreAMismatchAndAHang) {
  JobState job;
  job.world_size = 3;
  job.now_ns = kNow;
  for (int r = 0; r < 3; ++r) {
    RankState s;
    s.rank = r;
    s.status = RankStatus::kRunning;
    s.stack = r == 1 ? "all_reduce (distributed_c10d.py:1541) < main (train.py:13) < <module> (train.py:19)"
                     : "barrier (distributed_c10d.py:3152) < main (train.py:16) < <module> (train.py:19)";
    job.ranks.push_back(s);
  }
  Diagnosis d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].code, "COLLECTIVE_MISMATCH") << RenderRunText(job, d);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{1});
  EXPECT_NE(d.findings[0].summary.find("ranks 0,2 in barrier() at train.py:16"), std::string::npos)
      << d.findings[0].summary;
  EXPECT_TRUE(d.hang);
  std::string coll, loc;
  EXPECT_FALSE(StackCollective("gloo::barrier < main", &coll, &loc));
  // torch >= 2.1 wraps each collective in c10d_logger's decorator (py-spy of a torch 2.15 rank).
  ASSERT_TRUE(StackCollective(
      "barrier (distributed_c10d.py:6614) < _exception_logger.<locals>.wrapper (c10d_logger.py:83) < save_checkpoint "
      "(torch_train.py:55) < main (torch_train.py:135)",
      &coll, &loc));
  EXPECT_EQ(coll, "barrier");
  EXPECT_EQ(loc, "torch_train.py:55");
}

TEST(EngineTracebackTest, ARankBlockedInDdpBackwardWaitsInTheGradientAllReduce) {
  JobState job = Job(3);
  for (auto& r : job.ranks) {
    r.has_trace = false;
    r.recent.clear();
    r.proc = {true, 'S', "futex_wait_queue", 0.0, 6.0};
  }
  job.ranks[0].stack = "barrier (distributed_c10d.py:3152) < main (train.py:99)";
  for (int r = 1; r < 3; ++r)
    job.ranks[r].stack =
        "backward (__init__.py:197) < Tensor.backward (_tensor.py:488) < main (train.py:88) < <module> (train.py:104)";
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "COLLECTIVE_MISMATCH");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, std::vector<int>{0});
  EXPECT_NE(f->summary.find("ranks 1,2 in all_reduce (DDP gradients) at train.py:88"), std::string::npos) << f->summary;
  EXPECT_EQ(f->proof, "stacks");
  // A rank still computing its backward is not waiting anywhere yet.
  for (int r = 1; r < 3; ++r) job.ranks[r].proc = {true, 'R', "0", 1.0, 0};
  EXPECT_EQ(Find(Diagnose(job), "COLLECTIVE_MISMATCH"), nullptr);
}

TEST(EngineClassesTest, ThousandRanksReadAsAFewClasses) {
  JobState job = Job(1000);
  for (int r = 0; r < 1000; ++r)
    Block(job.ranks[r],
          Call(r == 7 ? "barrier" : "all_reduce", 5, r == 7 ? "save_checkpoint" : "engine.step", 1, true));
  auto classes = ClassifyRanks(job);
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].ranks.size(), 999u);
  EXPECT_EQ(classes[1].ranks, std::vector<int>{7});
  EXPECT_EQ(FormatRanks(classes[0].ranks), "0-6,8-999");
}

TEST(EngineCrossGroupTest, RanksBlockedInCollectivesOfGroupsThatNeedEachOtherAreAMismatch) {
  // DeepSpeed: gradients are all-reduced on its data-parallel group (the same ranks as the world,
  // another process group); rank 0 alone went into save_checkpoint's barrier on the world.
  JobState job = Job(4);
  for (auto& r : job.ranks) {
    r.recent.clear();
    for (uint64_t k = 1; k <= 9; ++k) {
      OpRecord rec = Call("all_reduce", k, "train.py:41 (engine.backward)", 10.0 - k, false);
      rec.comm = 145585033;
      r.recent.push_back(rec);
    }
  }
  Block(job.ranks[0], Call("barrier", 1, "train.py:48 (engine.save_checkpoint)", 1.0, true));
  for (int r = 1; r < 4; ++r) {
    OpRecord rec = Call("all_reduce", 10, "train.py:41 (engine.backward)", 1.0, true);
    rec.comm = 145585033;
    Block(job.ranks[r], rec);
  }
  Diagnosis d = Diagnose(job);
  ASSERT_FALSE(d.findings.empty());
  const Finding& f = d.findings[0];
  EXPECT_EQ(f.code, "COLLECTIVE_MISMATCH") << RenderRunText(job, d);
  EXPECT_EQ(f.ranks, std::vector<int>{0});
  EXPECT_EQ(f.proof, "trace");
  EXPECT_NE(f.summary.find("different groups"), std::string::npos) << f.summary;
  EXPECT_NE(f.remedy.find("DeepSpeed's engine.save_checkpoint()"), std::string::npos) << f.remedy;
  EXPECT_TRUE(d.hang);
  // The same calls, each on its own group of other ranks, need nothing from each other.
  JobState apart = Job(4);
  for (int r = 0; r < 2; ++r) {
    OpRecord a = Call("all_reduce", 3, "train.py:60", 2.0, true);
    a.comm = 11;
    Block(apart.ranks[r], a);
  }
  for (int r = 2; r < 4; ++r) {
    OpRecord b = Call("barrier", 5, "train.py:61", 2.0, true);
    b.comm = 22;
    Block(apart.ranks[r], b);
  }
  EXPECT_EQ(Find(Diagnose(apart), "COLLECTIVE_MISMATCH"), nullptr);
}

TEST(EngineDeadlockTest, AnIsendThePeerPostedEarlierMatchesARecv) {
  JobState job = Job(2);
  for (int r = 0; r < 2; ++r) {
    OpRecord isend = Call("send", 1, "pipe.py:20", 3.0, true);
    isend.peer = 1 - r;
    isend.async = true;
    job.ranks[r].recent.push_back(isend);
    OpRecord recv = Call("recv", 1, "pipe.py:21", 3.0, true);
    recv.peer = 1 - r;
    Block(job.ranks[r], recv);
  }
  EXPECT_EQ(Find(Diagnose(job), "P2P_DEADLOCK"), nullptr) << "each recv has the peer's isend";
  for (int r = 0; r < 2; ++r) job.ranks[r].recent.erase(job.ranks[r].recent.end() - 2);  // no isends: both only receive
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "P2P_DEADLOCK");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, (std::vector<int>{0, 1}));
  EXPECT_NE(f->remedy.find("receives first"), std::string::npos) << f->remedy;
  EXPECT_EQ(Find(d, "COLLECTIVE_MISMATCH"), nullptr) << "send/recv records are not collectives";
}

TEST(EngineUntracedTest, AllBlockedWithoutStacksIsASuspicionAndNeverPrintedCountsAsSilent) {
  JobState job = Job(4);
  for (auto& r : job.ranks) {
    r.has_trace = false;
    r.recent.clear();
    r.phase.clear();
    r.proc = {true, 'S', "futex_wait_queue", 0.0, 6.0};
    r.last_output_ns = 0;  // never printed: no output age, silent
  }
  Diagnosis d = Diagnose(job);
  const Finding* f = Find(d, "COLLECTIVE_STALL");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->proof, "heuristic");
  EXPECT_FALSE(d.hang);
  EXPECT_TRUE(d.suspect);
  // Stacks: ranks 1-3 in a barrier, rank 0 in its data loader.
  for (int r = 1; r < 4; ++r) job.ranks[r].stack = "barrier (distributed_c10d.py:3152) < main (train.py:16)";
  job.ranks[0].stack = "get (queue.py:180) < _next_data (dataloader.py:1316) < main (train.py:12)";
  d = Diagnose(job);
  f = Find(d, "RANK_MISSING");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->ranks, std::vector<int>{0});
  EXPECT_EQ(f->proof, "heuristic");
  EXPECT_NE(f->summary.find("ranks 1-3 in barrier()"), std::string::npos) << f->summary;
  EXPECT_FALSE(d.hang);
  // Every rank in the same collective past the stall threshold: the stacks prove a stall.
  job.ranks[0].stack = job.ranks[1].stack;
  for (auto& r : job.ranks) r.proc.flat_for_s = 40;
  d = Diagnose(job);
  f = Find(d, "COLLECTIVE_STALL");
  ASSERT_NE(f, nullptr) << RenderRunText(job, d);
  EXPECT_EQ(f->proof, "stacks");
  EXPECT_TRUE(d.hang);
}

TEST(EngineJsonTest, RankStateRoundTrips) {
  JobState job = Job(2);
  Block(job.ranks[0], Call("barrier", 5, "save_checkpoint", 1, true));
  job.ranks[0].proc = {true, 'S', "futex_wait_queue", 0.0, 3.0};
  auto back = RankStateFromJson(ToJson(job.ranks[0]));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->in_flight->Describe(), job.ranks[0].in_flight->Describe());
  EXPECT_EQ(back->recent.size(), job.ranks[0].recent.size());
  EXPECT_EQ(back->proc.wchan, "futex_wait_queue");
  auto bad = RankStateFromJson({{"rank", 1}, {"status", "sleeping"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("status"), std::string::npos);
}

}  // namespace
}  // namespace dsd::diagnosis

namespace dsd::diagnosis {
namespace {

// Logs can claim any rank, and some lines have none: the engine must never index with them.
TEST(EngineLogEventsTest, EventsWithRanksOutsideTheJobAreNeverIndexed) {
  JobState job;
  job.logs_only = true;
  job.world_size = 2;
  job.ranks.resize(2);
  for (int r = 0; r < 2; ++r) job.ranks[r].rank = r, job.ranks[r].status = RankStatus::kRunning;
  for (int rank : {-1, 1, 7, 1 << 30}) {
    LogEvent e;
    e.rank = rank;
    e.code = codes::kLogError;
    e.kind = "python_traceback";
    e.summary = "Python exception: x";
    e.collective = rank == 1 ? "all_reduce" : "barrier";
    e.file = "job.log";
    e.offset = 10 + rank % 100;
    job.events.push_back(e);
    e.kind = "torch_watchdog";
    e.code = codes::kWatchdogTimeout;
    e.fields = {{"seq", "2"}, {"op", "ALLREDUCE"}, {"self_rank", std::to_string(rank)}};
    job.events.push_back(e);
  }
  Diagnosis d = Diagnose(job);
  EXPECT_FALSE(d.findings.empty());
}

// One table entry per state of the log dir's file system (docs/run.md "A full disk").
TEST(EngineLogDirTest, FullNearlyFullAndHealthyFileSystems) {
  struct Case {
    const char* name;
    uint64_t free_bytes, total_bytes;
    std::vector<std::string> write_errors;
    const char* severity;  // "" = no finding
  } cases[] = {
      {"full", 0, 2u << 20, {}, "error"},
      {"write failed", 10u << 20, 100u << 30, {"rank-3.exit: No space left on device"}, "error"},
      {"quota", 10u << 20, 100u << 30, {"rank-1.stack: Disk quota exceeded"}, "error"},
      {"nearly full", 100u << 20, 100ull << 30, {}, "warning"},
      {"small but roomy", 100u << 20, 200u << 20, {}, ""},  // 50 % left of a small disk
      {"healthy", 50ull << 30, 100ull << 30, {}, ""},
      {"unknown size", 0, 0, {}, ""},
  };
  for (const auto& c : cases) {
    JobState job = Job(2);
    LogDirStatus d;
    d.node = "node-0";
    d.path = "/scratch/run1";
    d.mount = "/scratch";
    d.fs_type = "tmpfs";
    d.free_bytes = c.free_bytes;
    d.total_bytes = c.total_bytes;
    d.write_errors = c.write_errors;
    job.log_dirs.push_back(d);
    Diagnosis out = Diagnose(job);
    const Finding* f = Find(out, codes::kLogDirFull);
    if (std::string(c.severity).empty()) {
      EXPECT_EQ(f, nullptr) << c.name;
      continue;
    }
    ASSERT_NE(f, nullptr) << c.name;
    EXPECT_EQ(SeverityName(f->severity), std::string(c.severity)) << c.name;
    EXPECT_EQ(f->nodes, std::vector<std::string>{"node-0"}) << c.name;
    EXPECT_EQ(f->ranks, (std::vector<int>{0, 1})) << c.name;
    EXPECT_NE(f->summary.find("tmpfs mounted at /scratch"), std::string::npos) << f->summary;
    EXPECT_NE(f->summary.find(" free of "), std::string::npos) << f->summary;
    EXPECT_NE(f->remedy.find("--log-dir"), std::string::npos) << f->remedy;
    EXPECT_EQ(f->proof, proof::kDisk);
    for (const auto& e : c.write_errors)
      EXPECT_NE(std::find(f->evidence.begin(), f->evidence.end(), "write failed: " + e), f->evidence.end()) << c.name;
    EXPECT_FALSE(out.hang) << c.name;  // a full disk is never a hang, so never a reason to stop the job
  }
}

// A finding about nodes alone (a peer's address in an NCCL error) names them on a line of their own,
// labelled, as one about ranks does.
TEST(ReportTextTest, NodesAndRanksEachGetALabelledLine) {
  JobState job;
  job.logs_only = true;
  Diagnosis d;
  Finding nodes_only;
  nodes_only.code = "NCCL_ERROR";
  nodes_only.severity = Severity::kError;
  nodes_only.summary = "connection closed by the peer";
  nodes_only.nodes = {"worker-0", "worker-1"};
  nodes_only.evidence = {"job.log:1: NCCL WARN"};
  Finding both = nodes_only;
  both.ranks = {2, 3};
  Finding ranks_only = nodes_only;
  ranks_only.nodes.clear();
  ranks_only.ranks = {5};
  d.findings = {nodes_only, both, ranks_only};
  const std::string text = RenderRunText(job, d);
  EXPECT_NE(text.find("\n  nodes: worker-0,worker-1\n  - job.log:1"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  ranks: 2,3   nodes: worker-0,worker-1\n  - job.log:1"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  ranks: 5\n  - job.log:1"), std::string::npos) << text;
}

}  // namespace
}  // namespace dsd::diagnosis
