// The bundled runtime as real processes: the example programs on 127.0.0.1, started the way
// torchrun does (env://) or by OpenMPI's mpirun, with per-rank logs and traces in a temporary
// folder. Ranks are killed, frozen and crashed for real; other processes read their traces.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "common/file.h"
#include "common/subprocess.h"
#include "runtime/testing.h"
#include "runtime/trace.h"

namespace dsd {
namespace {

using runtime::Op;
using runtime::ReadTrace;
using runtime::RecordState;
using runtime::TraceSnapshot;

std::string Bin(const std::string& name) { return std::string(EXAMPLES_DIR) + "/" + name; }

class Job {
 public:
  Job(const std::string& dir, int n, const std::vector<std::string>& argv, std::map<std::string, std::string> extra = {})
      : dir_(dir), n_(n) {
    int port = runtime::testing::FreePort();
    for (int r = 0; r < n; ++r) {
      SubprocessOptions o;
      o.env = runtime::testing::RankEnvMap(r, n, port);
      o.env["DSDOCTOR_TRACE_DIR"] = dir;
      for (const auto& [k, v] : extra) o.env[k] = v;
      o.log_path = Log(r);
      auto p = Subprocess::Start(argv, o);
      EXPECT_TRUE(p.ok()) << p.status().ToString();
      procs_.push_back(*p);
    }
  }
  ~Job() {
    for (auto& p : procs_) {
      p.Signal(SIGKILL);
      p.Wait(std::chrono::seconds(5));
    }
  }
  std::string Log(int r) const { return dir_ + "/rank-" + std::to_string(r) + ".log"; }
  std::string LogText(int r) const { return ReadFile(Log(r)).value_or(""); }
  std::string TracePath(int r) const { return dir_ + "/rank-" + std::to_string(r) + ".trace"; }
  Subprocess& proc(int r) { return procs_[r]; }
  ExitInfo Wait(int r, Duration timeout = std::chrono::seconds(60)) {
    auto e = procs_[r].Wait(timeout);
    EXPECT_TRUE(e.has_value()) << "rank " << r << " still running; log:\n" << LogText(r);
    return e.value_or(ExitInfo{});
  }
  TraceSnapshot Trace(int r) const {
    auto s = ReadTrace(TracePath(r));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : TraceSnapshot{};
  }
  // Polls rank r's trace until `pred` holds (or 30 s pass).
  bool WaitTrace(int r, const std::function<bool(const TraceSnapshot&)>& pred) const {
    for (int i = 0; i < 600; ++i) {
      auto s = ReadTrace(TracePath(r));
      if (s.ok() && pred(*s)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::string dir_;
  int n_;
  std::vector<Subprocess> procs_;
};

bool InFlightAt(const TraceSnapshot& s, Op op, const std::string& callsite) {
  const auto* r = s.InFlight();
  return r && r->op == op && r->callsite == callsite;
}

class RuntimeE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dsdrt-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!HasFailure()) std::system(("rm -rf " + dir_).c_str());
  }
  std::string Sub(const std::string& name) {
    std::string d = dir_ + "/" + name;
    std::system(("mkdir -p " + d).c_str());
    return d;
  }
  std::string dir_;
};

std::vector<float> ReadFloats(const std::string& path) {
  std::string b = ReadFile(path).value_or("");
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
  return v;
}

// Healthy training as separate processes over Gloo: exits 0, every trace ends "finished", and 1
// rank and 4 ranks with the same global batch reach the same parameters.
TEST_F(RuntimeE2eTest, HealthyTrainingMatchesAcrossWorldSizes) {
  std::string cfg = dir_ + "/ds_config.json";
  std::ofstream(cfg) << R"({"train_batch_size": 32, "optimizer": {"type": "Adam", "params": {"lr": 0.005}}})";
  std::vector<std::vector<float>> params;
  for (int n : {1, 4}) {
    std::string d = Sub("w" + std::to_string(n));
    Job job(d, n, {Bin("train_healthy"), "--steps", "15", "--config", cfg, "--dump-params", d + "/params.bin"});
    for (int r = 0; r < n; ++r) {
      ExitInfo e = job.Wait(r);
      EXPECT_EQ(e.Describe(), "exit 0") << job.LogText(r);
      TraceSnapshot t = job.Trace(r);
      EXPECT_TRUE(t.flags & runtime::kTraceFlagFinished);
      EXPECT_EQ(t.step, 15u);
      EXPECT_EQ(t.world_size, n);
      EXPECT_EQ(t.backend, "gloo");
    }
    params.push_back(ReadFloats(d + "/params.bin"));
  }
  ASSERT_EQ(params[0].size(), params[1].size());
  ASSERT_FALSE(params[0].empty());
  double diff = 0;
  for (size_t i = 0; i < params[0].size(); ++i) diff = std::max(diff, double(std::abs(params[0][i] - params[1][i])));
  EXPECT_LT(diff, 1e-4);
}

// OpenMPI's mpirun starts 3 ranks; fp16 and ZeRO stage 1 over MPI_Allreduce/MPI_Allgather.
TEST_F(RuntimeE2eTest, MpiBackendUnderMpirun) {
  std::string cfg = dir_ + "/ds_config.json";
  std::ofstream(cfg) << R"({"train_batch_size": 48, "fp16": {"enabled": true}, "zero_optimization": {"stage": 1}})";
  SubprocessOptions o;
  o.log_path = dir_ + "/mpirun.log";
  std::vector<std::string> argv = {"mpirun"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.insert(argv.end(), {"--oversubscribe", "-np", "3", "--bind-to", "none", "--mca", "btl", "tcp,self", "-x",
                           "DSDOCTOR_TRACE_DIR=" + dir_, Bin("train_healthy"), "--steps", "12", "--config", cfg});
  auto p = Subprocess::Start(argv, o);
  ASSERT_TRUE(p.ok());
  auto e = p->Wait(std::chrono::seconds(90));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->Describe(), "exit 0") << ReadFile(o.log_path).value_or("");
  for (int r = 0; r < 3; ++r) {
    auto t = ReadTrace(dir_ + "/rank-" + std::to_string(r) + ".trace");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->backend, "mpi");
    EXPECT_EQ(t->step, 12u);
    EXPECT_TRUE(t->flags & runtime::kTraceFlagFinished);
    bool saw_allgather = false;
    for (const auto& rec : t->records) saw_allgather |= rec.op == Op::kAllGather && rec.callsite == "engine.step.allgather";
    EXPECT_TRUE(saw_allgather);
  }
}

// Rank 1 stalls before step 3 and is killed while the others wait in step 3's all-reduce: their
// traces show where they waited, and Gloo fails them instead of hanging.
TEST_F(RuntimeE2eTest, KilledRankOverGlooSurvivorsShowWhereTheyWait) {
  Job job(dir_, 3, {Bin("slow_rank"), "--rank", "1", "--delay-ms", "0", "--stall-at-step", "3", "--stall-ms", "60000"});
  for (int r : {0, 2}) ASSERT_TRUE(job.WaitTrace(r, [](auto& s) { return s.step == 3 && InFlightAt(s, Op::kAllReduce, "engine.step"); }));
  uint64_t seq = job.Trace(0).InFlight()->seq;
  EXPECT_EQ(job.Trace(2).InFlight()->seq, seq);
  job.proc(1).Signal(SIGKILL);
  EXPECT_EQ(job.Wait(1).Describe(), "signal 9 (Killed)");
  for (int r : {0, 2}) {
    EXPECT_EQ(job.Wait(r).Describe(), "exit 1") << job.LogText(r);
    TraceSnapshot t = job.Trace(r);
    ASSERT_NE(t.Last(), nullptr);
    EXPECT_EQ(t.Last()->op, Op::kAllReduce);
    EXPECT_EQ(t.Last()->seq, seq);
    EXPECT_EQ(t.Last()->callsite, "engine.step");
    EXPECT_EQ(t.Last()->state, RecordState::kFailed);
    EXPECT_NE(t.last_error.find("gloo allreduce"), std::string::npos) << t.last_error;
  }
  TraceSnapshot victim = job.Trace(1);  // readable after SIGKILL
  EXPECT_EQ(victim.step, 3u);
  EXPECT_EQ(victim.InFlight(), nullptr);
  EXPECT_EQ(victim.Last()->seq, seq - 1);
}

// The same under mpirun: the killed rank's pid comes from its trace; mpirun ends the job, and the
// survivors' traces still show the all-reduce they were blocked in.
TEST_F(RuntimeE2eTest, KilledRankUnderMpirunSurvivorsShowWhereTheyWait) {
  SubprocessOptions o;
  o.log_path = dir_ + "/mpirun.log";
  std::vector<std::string> argv = {"mpirun"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.insert(argv.end(), {"--oversubscribe", "-np", "3", "--bind-to", "none", "--mca", "btl", "tcp,self", "-x",
                           "DSDOCTOR_TRACE_DIR=" + dir_, Bin("slow_rank"), "--rank", "1", "--delay-ms", "0",
                           "--stall-at-step", "3", "--stall-ms", "60000"});
  auto p = Subprocess::Start(argv, o);
  ASSERT_TRUE(p.ok());
  auto trace = [&](int r) { return ReadTrace(dir_ + "/rank-" + std::to_string(r) + ".trace"); };
  bool waiting = false;
  for (int i = 0; i < 600 && !waiting; ++i) {
    auto a = trace(0), c = trace(2);
    // Both survivors in the same all-reduce of step 3: one of them still finishing step 2's (its
    // peer's data on the way) would be left in that one when rank 1 dies.
    waiting = a.ok() && c.ok() && InFlightAt(*a, Op::kAllReduce, "engine.step") &&
              InFlightAt(*c, Op::kAllReduce, "engine.step") && a->step == 3 && c->step == 3 &&
              a->InFlight()->seq == c->InFlight()->seq;
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(waiting) << ReadFile(o.log_path).value_or("");
  auto victim = trace(1);
  ASSERT_TRUE(victim.ok());
  ASSERT_GT(victim->pid, 0);
  ASSERT_EQ(::kill(victim->pid, SIGKILL), 0);  // a rank of our mpirun, named by its own trace
  auto e = p->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->Describe(), "exit 0");
  for (int r : {0, 2}) {
    auto t = trace(r);
    ASSERT_TRUE(t.ok());
    ASSERT_NE(t->Last(), nullptr);
    EXPECT_EQ(t->Last()->op, Op::kAllReduce);
    EXPECT_EQ(t->Last()->callsite, "engine.step");
    EXPECT_EQ(t->Last()->seq, trace(0)->Last()->seq);
    EXPECT_NE(t->Last()->state, RecordState::kCompleted);
  }
}

// A frozen rank (SIGSTOP): another process reads its trace (step, phase, a heartbeat that stopped),
// the other rank's watchdog (DSDOCTOR_TIMEOUT=1, warn) logs one line and marks its trace, and after
// SIGCONT training goes on.
TEST_F(RuntimeE2eTest, FrozenRankIsReadableAndTripsTheOthersWatchdog) {
  Job job(dir_, 2, {Bin("train_healthy"), "--steps", "1000000", "--step-delay-ms", "5"}, {{"DSDOCTOR_TIMEOUT", "1"}});
  ASSERT_TRUE(job.WaitTrace(1, [](auto& s) { return s.step >= 3; }));
  job.proc(1).Signal(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  TraceSnapshot a = job.Trace(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  TraceSnapshot b = job.Trace(1);
  EXPECT_EQ(a.heartbeat_ns, b.heartbeat_ns);  // its watchdog thread is frozen too
  EXPECT_EQ(a.step, b.step);
  EXPECT_GE(a.step, 3u);
  EXPECT_EQ(a.pid, job.proc(1).pid());
  ASSERT_TRUE(job.WaitTrace(0, [](auto& s) { return (s.flags & runtime::kTraceFlagWatchdogFired) != 0; }))
      << job.LogText(0);
  TraceSnapshot waiting = job.Trace(0);
  ASSERT_NE(waiting.InFlight(), nullptr);
  EXPECT_EQ(waiting.InFlight()->op, Op::kAllReduce);
  EXPECT_NE(waiting.heartbeat_ns, 0);
  std::string log = job.LogText(0);
  EXPECT_NE(log.find("watchdog: rank 0: all_reduce#" + std::to_string(waiting.InFlight()->seq)), std::string::npos) << log;
  EXPECT_NE(log.find("@engine.step [started] in flight for"), std::string::npos) << log;
  uint64_t frozen_step = b.step;
  job.proc(1).Signal(SIGCONT);
  EXPECT_TRUE(job.WaitTrace(0, [&](auto& s) { return s.step > frozen_step + 2; }));
}

// Only rank 0 calls save_checkpoint: rank 0 waits in save_checkpoint's barrier, rank 1 in the next
// step's all-reduce, at the same sequence number; the abort policy ends the first rank whose
// watchdog fires with SIGABRT, and the other either aborts too or fails as its peer vanishes.
TEST_F(RuntimeE2eTest, RankZeroOnlyCheckpointHangsUntilTheWatchdogAborts) {
  Job job(dir_, 2, {Bin("rank0_only_checkpoint"), "--at-step", "3", "--checkpoint-dir", dir_ + "/ckpt"},
          {{"DSDOCTOR_TIMEOUT", "1"}, {"DSDOCTOR_WATCHDOG_POLICY", "abort"}});
  std::vector<std::string> ends = {job.Wait(0).Describe(), job.Wait(1).Describe()};
  int aborted = 0;
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(ends[r] == "signal 6 (Aborted)" || ends[r] == "exit 1") << ends[r] << job.LogText(r);
    aborted += ends[r] == "signal 6 (Aborted)";
  }
  EXPECT_GE(aborted, 1);
  TraceSnapshot t0 = job.Trace(0), t1 = job.Trace(1);
  ASSERT_NE(t0.Last(), nullptr);
  ASSERT_NE(t1.Last(), nullptr);
  EXPECT_EQ(t0.Last()->op, Op::kBarrier);
  EXPECT_EQ(t0.Last()->callsite, "save_checkpoint");
  // Aborted in the barrier, the phase stays save_checkpoint; when the peer aborted first, rank 0's
  // barrier fails, the example shuts down and the phase becomes finished. Both watchdogs fire after
  // the same 1 s, so rank 0's own abort can also land just after its failed barrier returned and
  // save_checkpoint's phase ended (the program's own code: user), before the shutdown.
  if (ends[0] == "signal 6 (Aborted)")
    EXPECT_TRUE(t0.phase == runtime::Phase::kSaveCheckpoint || t0.phase == runtime::Phase::kUser)
        << static_cast<int>(t0.phase);
  else
    EXPECT_EQ(t0.phase, runtime::Phase::kFinished) << ends[0];
  EXPECT_EQ(t1.Last()->op, Op::kAllReduce);
  EXPECT_EQ(t1.Last()->callsite, "engine.step");
  EXPECT_EQ(t0.Last()->seq, t1.Last()->seq);
  for (int r = 0; r < 2; ++r) {
    const TraceSnapshot& t = r == 0 ? t0 : t1;
    EXPECT_NE(t.Last()->state, RecordState::kCompleted);
    if (ends[r] == "signal 6 (Aborted)") {
      EXPECT_TRUE(t.flags & runtime::kTraceFlagAborted);
      EXPECT_EQ(t.watchdog_index, t.Last()->index);
      EXPECT_NE(job.LogText(r).find("watchdog: rank " + std::to_string(r) + ": " + (r == 0 ? "barrier#" : "all_reduce#")),
                std::string::npos);
    }
  }
}

TEST_F(RuntimeE2eTest, CrashedRankLeavesTheOthersFailedInTheNextAllReduce) {
  Job job(dir_, 3, {Bin("crash_rank"), "--rank", "1", "--at-step", "3", "--how", "segv"});
  EXPECT_EQ(job.Wait(1).Describe(), "signal 11 (Segmentation fault)");
  for (int r : {0, 2}) {
    EXPECT_EQ(job.Wait(r).Describe(), "exit 1");
    EXPECT_EQ(job.Trace(r).Last()->callsite, "engine.step");
    EXPECT_EQ(job.Trace(r).Last()->state, RecordState::kFailed);
  }
  TraceSnapshot victim = job.Trace(1);
  EXPECT_EQ(victim.step, 3u);
  EXPECT_EQ(victim.Last()->state, RecordState::kCompleted);
  EXPECT_NE(job.LogText(1).find("rank 1 crashing (segv) at step 3"), std::string::npos);
}

TEST_F(RuntimeE2eTest, WrongWorldSizeNamesTheMissingRank) {
  Job job(dir_, 2, {Bin("wrong_world_size")}, {{"DSDOCTOR_RENDEZVOUS_TIMEOUT", "2"}});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(job.Wait(r).Describe(), "exit 2");
    EXPECT_NE(job.LogText(r).find("2 of 3 ranks joined within 2 s; missing rank(s) 2"), std::string::npos) << job.LogText(r);
    TraceSnapshot t = job.Trace(r);
    ASSERT_NE(t.Last(), nullptr);
    EXPECT_EQ(t.Last()->op, Op::kRendezvous);
    EXPECT_EQ(t.Last()->state, RecordState::kFailed);
    EXPECT_EQ(t.world_size, 3);
  }
}

// sum on one rank, max on the other, at the same seq: Gloo completes it without an error, and
// only the traces show the disagreement.
TEST_F(RuntimeE2eTest, MismatchedReduceOpIsVisibleOnlyInTheTraces) {
  Job job(dir_, 2, {Bin("mismatched_collective"), "--mode", "op", "--at-step", "3", "--steps", "5"});
  for (int r = 0; r < 2; ++r) EXPECT_EQ(job.Wait(r).Describe(), "exit 0") << job.LogText(r);
  auto find = [](const TraceSnapshot& t, uint64_t step_record) -> const runtime::TraceRecord* {
    int n = 0;
    for (const auto& r : t.records) {
      if (r.callsite == "user.metrics" && n++ == static_cast<int>(step_record)) return &r;
    }
    return nullptr;
  };
  TraceSnapshot t0 = job.Trace(0), t1 = job.Trace(1);
  const auto *a = find(t0, 3), *b = find(t1, 3);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->seq, b->seq);
  EXPECT_EQ(a->reduce, runtime::ReduceOp::kSum);
  EXPECT_EQ(b->reduce, runtime::ReduceOp::kMax);
}

TEST_F(RuntimeE2eTest, BadConfigIsExitTwoNamingTheKey) {
  std::string cfg = dir_ + "/bad.json";
  std::ofstream(cfg) << R"({"train_batch_size": 8, "zero_optimization": {"stage": 3}})";
  Job job(dir_, 1, {Bin("train_healthy"), "--config", cfg});
  EXPECT_EQ(job.Wait(0).Describe(), "exit 2");
  EXPECT_NE(job.LogText(0).find(cfg + ": zero_optimization.stage: stage 3 is not implemented"), std::string::npos)
      << job.LogText(0);
}

}  // namespace
}  // namespace dsd
