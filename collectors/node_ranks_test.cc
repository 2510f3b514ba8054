#include "collectors/node_ranks.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "common/file.h"
#include "common/strings.h"
#include "common/subprocess.h"
#include "common/temp_dirs_testing.h"

namespace dsd::collectors {
namespace {

namespace fs = std::filesystem;

std::string RanksDir(const std::string& name) { return testing::TempDir("node-ranks", name); }

NodeRanksOptions Options(const std::string& dir, std::vector<std::string> argv) {
  NodeRanksOptions o;
  o.node = "node-7";
  o.run_dir = RunDir(dir);
  o.argv = std::move(argv);
  o.env = {{"JOB", "job-wide"}, {"PATH", "/usr/bin:/bin"}};
  o.trace_python = false;
  return o;
}

// Ticks (real time passes for the processes; the fake clock only for escalation) until `done` or
// 20 s; everything printed is appended to `out[i]`.
template <typename Done>
bool TickUntil(NodeRanks& ranks, std::vector<std::string>& out, Done done) {
  out.resize(ranks.size());
  for (int i = 0; i < 400; ++i) {
    const NodeSample& s = ranks.Tick();
    for (size_t k = 0; k < s.fresh.size(); ++k) out[k] += s.fresh[k];
    if (done(s)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

class FakeStacks final : public StackTaker {
 public:
  Result<StackCapture> Take(pid_t pid, bool python) override {
    pids.push_back(pid);
    this->python = python;
    if (fail) return Unavailable("ptrace not permitted");
    return StackCapture{"fake-tool", "frame one\nframe two\n", "one < two"};
  }
  std::vector<pid_t> pids;
  bool python = false;
  bool fail = false;
};

TEST(NodeRanksTest, RanksGetTheJobAndTheirOwnEnvironmentAndLeaveTheirFiles) {
  const std::string d = RanksDir("env");
  FakeClock clock;
  NodeRanks ranks(Options(d, {"/bin/sh", "-c", "echo \"$JOB $RANK_ONLY\"; exit $EXIT"}), &clock);
  ASSERT_TRUE(ranks
                  .Start({{4, 0, {{"RANK_ONLY", "four"}, {"EXIT", "0"}}},
                          {5, 1, {{"RANK_ONLY", "five"}, {"EXIT", "3"}, {"JOB", "overridden"}}}})
                  .ok());
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks.state(1).rank, 5);
  EXPECT_EQ(ranks.state(1).local_rank, 1);
  EXPECT_EQ(ranks.state(1).node, "node-7");
  std::vector<std::string> out;
  std::vector<size_t> exited;
  ASSERT_TRUE(TickUntil(ranks, out, [&](const NodeSample& s) {
    exited.insert(exited.end(), s.exited.begin(), s.exited.end());
    return ranks.AllExited();
  }));
  EXPECT_EQ(out[0], "job-wide four\n");
  EXPECT_EQ(out[1], "overridden five\n");
  EXPECT_EQ(exited.size(), 2u) << "each exit is reported once";
  EXPECT_EQ(ranks.state(1).exit_code, 3);
  EXPECT_EQ(*ReadFile(RunDir(d).RankExit(5)), "3\n");
  EXPECT_EQ(*ReadFile(RunDir(d).RankLog(4)), "job-wide four\n");
}

// A stop that SIGTERM does not end becomes SIGKILL once the escalation delay has passed on the
// node's clock, and not before.
TEST(NodeRanksTest, AStopEscalatesToSigkillAfterTheDelay) {
  const std::string d = RanksDir("escalate");
  FakeClock clock;
  auto o = Options(d, {"/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"});
  o.stop_escalation = std::chrono::seconds(3);
  NodeRanks ranks(o, &clock);
  ASSERT_TRUE(ranks.Start({{0, 0, {}}}).ok());
  std::vector<std::string> out;
  ASSERT_TRUE(TickUntil(ranks, out, [&](const NodeSample&) { return out[0].find("ready") != std::string::npos; }));
  ranks.Signal(SIGTERM);
  clock.Advance(std::chrono::milliseconds(2900));
  // Real time passes too: the rank ignores SIGTERM and keeps running.
  for (int i = 0; i < 10; ++i) {
    ranks.Tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(ranks.AllExited()) << "SIGTERM is trapped: only the escalation can end it";
  clock.Advance(std::chrono::milliseconds(200));
  ASSERT_TRUE(TickUntil(ranks, out, [&](const NodeSample&) { return ranks.AllExited(); }));
  EXPECT_EQ(ranks.state(0).signal, SIGKILL);
}

// MPI programs: mpirun starts each rank through a rank-exec shim, which hands it over. The node
// treats it as its own: the rank's environment and trace file, its log, its exit file, its stop.
TEST(NodeRanksTest, RanksHandedOverByShimsAreWatchedAndStoppedAsTheNodesOwn) {
  const std::string d = RanksDir("handed-over");
  FakeClock clock;
  auto o = Options(d, {"unused: the shims run the program"});
  o.rank_exec_socket = "dsdoctor-test/node-ranks/" + std::to_string(::getpid());
  NodeRanks ranks(o, &clock);
  ASSERT_TRUE(WriteFileAtomic(RunDir(d).RankTrace(3), "a stale ring of an earlier run").ok());
  ASSERT_TRUE(ranks.Start({{2, 0, {{"RANK_ONLY", "two"}}}, {3, 1, {{"RANK_ONLY", "three"}}}}).ok());
  EXPECT_FALSE(fs::exists(RunDir(d).RankTrace(3))) << "an earlier run's files go at the start";
  EXPECT_EQ(ranks.state(0).status, diagnosis::RankStatus::kNotStarted);
  std::vector<std::string> out;
  for (int i = 0; i < 3; ++i) ranks.Tick();
  EXPECT_FALSE(ranks.AllExited()) << "ranks not handed over yet are awaited";
  auto shim = [&](int rank, std::vector<std::string> argv) {
    RankExecOptions e;
    e.nodes = {{2, "elsewhere"}, {2, o.rank_exec_socket}};
    e.argv = std::move(argv);
    e.rank = rank;
    return std::async(std::launch::async, [e] { return RunRankExec(e, stderr); });
  };
  auto two = shim(2, {"/bin/sh", "-c", "echo \"$JOB $RANK_ONLY $(basename $DSDOCTOR_TRACE_FILE)\"; exit 5"});
  auto three = shim(3, {"/bin/sh", "-c", "echo ready; exec sleep 30"});
  ASSERT_TRUE(TickUntil(ranks, out, [&](const NodeSample&) {
    return ranks.state(0).status == diagnosis::RankStatus::kExited && out[1].find("ready") != std::string::npos;
  }));
  EXPECT_EQ(out[0], "job-wide two rank-2.trace\n");
  EXPECT_EQ(ranks.state(0).exit_code, 5);
  EXPECT_EQ(*ReadFile(RunDir(d).RankExit(2)), "5\n");
  EXPECT_EQ(two.get().exit_code, 5) << "the shim ends as its program did";
  EXPECT_EQ(ranks.state(1).status, diagnosis::RankStatus::kRunning);
  EXPECT_GT(ranks.state(1).pid, 0);
  ranks.Signal(SIGTERM);  // the coordinator's stop reaches the program, not our child
  ASSERT_TRUE(TickUntil(ranks, out, [&](const NodeSample&) { return ranks.AllExited(); }));
  EXPECT_EQ(ranks.state(1).signal, SIGTERM);
  EXPECT_EQ(*ReadFile(RunDir(d).RankExit(3)), "143\n");
  EXPECT_EQ(three.get().signal, SIGTERM);
}

// What a shim says, sent by hand: the test process plays the shim (SO_PEERCRED names it).
net::Fd ConnectAsShim(const std::string& name, int rank) {
  auto connected = ConnectRankExec(name);
  EXPECT_TRUE(connected.ok()) << connected.status().ToString();
  net::Fd fd = connected.ok() ? std::move(*connected) : net::Fd();
  const std::string hello = "hello 1 " + std::to_string(rank) + "\n";
  EXPECT_EQ(::send(fd.get(), hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  return fd;
}

void Say(const net::Fd& fd, const std::string& line) {
  EXPECT_EQ(::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL), static_cast<ssize_t>(line.size()));
}

// A rank granted before a stop and started after it gets the stop; a pid that is not the shim's
// child (it ended, and another process took the number) is never signalled.
TEST(NodeRanksTest, AHandedOverRankIsSignalledOnlyWhileItIsTheShimsChild) {
  const std::string d = RanksDir("late-start");
  FakeClock clock;
  auto o = Options(d, {"unused"});
  o.rank_exec_socket = "dsdoctor-test/late/" + std::to_string(::getpid());
  NodeRanks ranks(o, &clock);
  ASSERT_TRUE(ranks.Start({{0, 0, {}}, {1, 1, {}}}).ok());
  net::Fd zero = ConnectAsShim(o.rank_exec_socket, 0);
  net::Fd one = ConnectAsShim(o.rank_exec_socket, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ranks.Tick();  // both granted
  ranks.Signal(SIGTERM);
  // Rank 0's program: our child, so this "shim" is its parent.
  auto mine = Subprocess::Start({"/bin/sleep", "30"}, {});
  ASSERT_TRUE(mine.ok());
  // Rank 1's "program": a pid whose parent is another process (a shell's child).
  auto shell = Subprocess::Start({"/bin/sh", "-c", "sleep 30 & echo $!; wait"}, [] {
    SubprocessOptions so;
    so.log_path = fs::temp_directory_path() / ("dsd-late-" + std::to_string(::getpid()) + ".out");
    return so;
  }());
  ASSERT_TRUE(shell.ok());
  const std::string out_path = fs::temp_directory_path() / ("dsd-late-" + std::to_string(::getpid()) + ".out");
  std::string foreign;
  for (int i = 0; i < 100 && foreign.empty(); ++i) {
    foreign = std::string(Trim(ReadFile(out_path).value_or("")));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(foreign.empty());
  Say(zero, "started " + std::to_string(mine->pid()) + "\n");
  Say(one, "started " + foreign + "\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ranks.Tick();
  auto e = mine->Wait(std::chrono::seconds(10));
  ASSERT_TRUE(e.has_value()) << "the stop reached the rank handed over after it";
  EXPECT_EQ(e->term_signal, SIGTERM);
  EXPECT_EQ(::kill(std::stoi(foreign), 0), 0) << "a process that is not the shim's child was signalled";
  shell->Signal(SIGKILL);
  ::kill(std::stoi(foreign), SIGKILL);
  (void)shell->Wait(std::chrono::seconds(10));
  fs::remove(out_path);
}

// A stop ends the wait for ranks mpirun never handed over (it failed to start them).
TEST(NodeRanksTest, AfterAStopARankNeverHandedOverIsNotAwaited) {
  const std::string d = RanksDir("never-handed");
  FakeClock clock;
  auto o = Options(d, {"unused"});
  o.rank_exec_socket = "dsdoctor-test/never/" + std::to_string(::getpid());
  NodeRanks ranks(o, &clock);
  ASSERT_TRUE(ranks.Start({{0, 0, {}}}).ok());
  ranks.Tick();
  EXPECT_FALSE(ranks.AllExited());
  ranks.Signal(SIGTERM);
  ranks.Tick();
  EXPECT_TRUE(ranks.AllExited());
  EXPECT_EQ(ranks.state(0).status, diagnosis::RankStatus::kNotStarted);
  RankExecOptions late;
  late.nodes = {{1, o.rank_exec_socket}};
  late.argv = {"/bin/true"};
  late.rank = 0;
  EXPECT_EQ(RunRankExec(late, stderr).exit_code, 0) << "a shim that comes too late runs its program unwatched";
}

TEST(NodeRanksTest, StacksAreTakenOfRunningRanksAndWrittenBesideTheirLogs) {
  const std::string d = RanksDir("stacks");
  FakeClock clock;
  FakeStacks fake;
  auto o = Options(d, {"/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 0; fi; exec sleep 30"});
  o.python = true;
  NodeRanks ranks(o, &clock, &fake);
  ASSERT_TRUE(ranks.Start({{0, 0, {{"RANK", "0"}}}, {1, 1, {{"RANK", "1"}}}, {2, 2, {{"RANK", "2"}}}}).ok());
  std::vector<std::string> out;
  ASSERT_TRUE(TickUntil(ranks, out,
                        [&](const NodeSample&) { return ranks.state(1).status == diagnosis::RankStatus::kExited; }));
  int between = 0;
  auto stacks = ranks.Stacks({0, 1, 2, 9}, [&] { ++between; });
  ASSERT_EQ(stacks.size(), 2u) << "rank 1 has exited, rank 9 is not this node's";
  EXPECT_EQ(stacks[0].rank, 0);
  EXPECT_EQ(stacks[1].rank, 2);
  EXPECT_EQ(stacks[1].signature, "one < two");
  EXPECT_EQ(stacks[1].tool, "fake-tool");
  EXPECT_EQ(between, 1) << "between two captures, not before the first";
  EXPECT_TRUE(fake.python) << "a Python command's stacks come from py-spy";
  EXPECT_EQ(fake.pids, (std::vector<pid_t>{ranks.state(0).pid, ranks.state(2).pid}));
  EXPECT_EQ(*ReadFile(RunDir(d).RankStack(2)), "# fake-tool\nframe one\nframe two\n");
  fake.fail = true;
  stacks = ranks.Stacks({0});
  ASSERT_EQ(stacks.size(), 1u);
  EXPECT_EQ(stacks[0].error, "ptrace not permitted");
  EXPECT_TRUE(stacks[0].signature.empty());
  ranks.Signal(SIGKILL);
  ASSERT_TRUE(TickUntil(ranks, out, [&](const NodeSample&) { return ranks.AllExited(); }));
}

// A rank whose files cannot be made is an error naming the rank, and the ranks already started are
// killed with it (a node never runs half a job).
TEST(NodeRanksTest, AFailedStartNamesTheRankAndKillsTheStartedOnes) {
  const std::string d = RanksDir("fail");
  FakeClock clock;
  auto o = Options(d + "/missing", {"/bin/sleep", "30"});
  NodeRanks ranks(o, &clock);
  Status st = ranks.Start({{3, 0, {}}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 3"), std::string::npos) << st.ToString();
}

// The node's run dir file system is reported once a second with the first tick.
TEST(NodeRanksTest, TheFirstTickReportsTheRunDirFileSystem) {
  const std::string d = RanksDir("space");
  FakeClock clock;
  NodeRanks ranks(Options(d, {"/bin/true"}), &clock);
  ASSERT_TRUE(ranks.Start({{0, 0, {}}}).ok());
  const NodeSample& s = ranks.Tick();
  ASSERT_TRUE(s.log_dir.has_value());
  EXPECT_EQ(s.log_dir->node, "node-7");
  EXPECT_EQ(s.log_dir->path, d);
  EXPECT_GT(s.log_dir->total_bytes, 0u);
}

}  // namespace
}  // namespace dsd::collectors
