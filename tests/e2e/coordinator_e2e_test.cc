// End-to-end tests of the coordinator's launchers and of the faults it must survive, with real
// processes: pdsh over a real sshd, OpenMPI's mpirun, an agent killed with SIGKILL, the
// coordinator stopped with SIGSTOP, and an iptables DROP between the coordinator and one agent.
// Each runs inside a private network namespace (`unshare -n`, only lo), so nothing touches the
// host's network; every process a script starts is ended by pid.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/process.h"
#include "tests/e2e/netns_test.h"
#include "tests/e2e/sshd.h"

namespace dsd {
namespace {

using nlohmann::json;

class CoordinatorE2eTest : public e2e::NetnsTest {
 protected:
  void SetUp() override {
    NetnsTest::SetUp();
    env_["EX"] = EXAMPLES_DIR;
  }
  // No rank of the report still runs.
  static void ExpectNoRankLeft(const json& doc) {
    for (const auto& rank : doc["ranks"]) {
      int pid = rank.value("pid", 0);
      if (pid > 0) EXPECT_NE(::kill(pid, 0), 0) << "rank " << rank["rank"] << " (pid " << pid << ") still runs";
    }
  }
};

bool HavePdshAndSshd() {
  bool ok = ::access("/usr/sbin/sshd", X_OK) == 0 && ::access("/usr/bin/pdsh", X_OK) == 0;
  if (!ok && std::getenv("DSDOCTOR_REQUIRE_NETNS")) ADD_FAILURE() << "pdsh or sshd missing: run scripts/setup.sh";
  return ok;
}

// DeepSpeed's default launcher: pdsh over ssh starts one agent per hostfile node (named by %h),
// `check` probes between them and `run` trains over them; a node sshd refuses is named with pdsh's
// own message, and no agent outlives the coordinator.
TEST_F(CoordinatorE2eTest, PdshLauncherChecksAndRunsOverRealSsh) {
  if (!HavePdshAndSshd()) GTEST_SKIP() << "no pdsh/sshd";
  auto r = InNamespace(
      std::string(e2e::kSshd) +
      "printf '127.0.0.2 slots=2\\n127.0.0.3 slots=2\\n127.0.0.4 slots=1\\n' > $DIR/hostfile; "
      "iptables -A INPUT -d 127.0.0.4 -p tcp --dport 2222 -j REJECT --reject-with tcp-reset; "
      "$DSD check --hostfile $DIR/hostfile --launcher pdsh --ssh-opts \"$SSH_OPTS\" --no-bandwidth "
      "--agent-port 47930 "
      "--connect-timeout-ms 500 --json $DIR/check.json; echo check=$?; "
      "$DSD run --hostfile $DIR/hostfile --exclude 127.0.0.4 --launcher pdsh --ssh-opts \"$SSH_OPTS\" "
      "--agent-port 47930 --master_port 29561 --quiet --log-dir $DIR/logs --json $DIR/run.json -- $EX/train_healthy "
      "--steps 5; echo run=$?; "
      // The agents leave when ssh closes their stdin: within seconds, later on a loaded machine.
      "for i in $(seq 50); do pgrep -f '[a]gent --listen 127.0.0.[234]:47930' >/dev/null || break; sleep 0.1; done; "
      "pgrep -f '[a]gent --listen 127.0.0.[234]:47930' || echo no-agents-left; kill $S; wait $S");
  EXPECT_NE(r.out.find("check=1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("run=0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out;
  json check = ReadJson("check.json");
  auto unreachable = FindingsWithCode(check, "AGENT_UNREACHABLE");
  ASSERT_EQ(unreachable.size(), 1u) << check["findings"].dump(2);
  EXPECT_EQ(unreachable[0]["nodes"], json({"127.0.0.4"}));
  EXPECT_NE(unreachable[0]["evidence"].dump().find("pdsh started no agent for 127.0.0.4"), std::string::npos)
      << unreachable[0].dump();
  EXPECT_EQ(check["matrix"]["agent"][0][1].get<std::string>().rfind("ok", 0), 0u) << check["matrix"].dump();
  json run = ReadJson("run.json");
  ASSERT_EQ(run["ranks"].size(), 4u);
  EXPECT_EQ(run["ranks"][3]["node"], "127.0.0.3");
  EXPECT_EQ(run["ranks"][3]["exit_code"], 0);
  EXPECT_TRUE(run["findings"].empty()) << run["findings"].dump(2);
  EXPECT_EQ(run["ranks"][3]["step"], 5) << "its trace, read from the node's log dir";
  ExpectNoRankLeft(run);
}

TEST_F(CoordinatorE2eTest, MpirunLauncherRunsTheJob) {
  auto r = InNamespace(
      "$DSD run --local 2 --slots 2 --launcher mpirun --agent-port 47940 --quiet --log-dir $DIR/logs --json "
      "$DIR/run.json -- "
      "$EX/train_healthy --steps 5; echo run=$?; sleep 0.3; pgrep -f '[l]isten mpi:47940' || echo no-agents-left");
  EXPECT_NE(r.out.find("run=0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out;
  json run = ReadJson("run.json");
  ASSERT_EQ(run["ranks"].size(), 4u);
  EXPECT_EQ(run["ranks"][2]["node"], "node-1");
  EXPECT_TRUE(run["findings"].empty()) << run["findings"].dump(2);
}

// Every rank gets NCCL's profiler plugin from its agent; a plugin the user set is chained behind it,
// and --no-nccl-profiler leaves the environment alone.
TEST_F(CoordinatorE2eTest, RanksGetTheNcclProfilerPluginAndTheUsersIsChained) {
  auto r = InNamespace(
      "P='echo plugin=$NCCL_PROFILER_PLUGIN chain=$DSDOCTOR_NCCL_PROFILER_CHAIN'; "
      "$DSD run --local 2 --slots 1 --quiet --log-dir $DIR/a -- sh -c \"$P\"; "
      "NCCL_PROFILER_PLUGIN=inspector $DSD run --local 1 --slots 1 --quiet --log-dir $DIR/b -- sh -c \"$P\"; "
      "$DSD run --no-nccl-profiler --local 1 --slots 1 --quiet --log-dir $DIR/c -- sh -c \"$P\"; "
      "cat $DIR/a/rank-1.log $DIR/b/rank-0.log $DIR/c/rank-0.log");
  std::string plugin =
      std::filesystem::path(DSDOCTOR_BIN).parent_path().parent_path() / "lib/dsdoctor/libdsdoctor-nccl-profiler.so";
  EXPECT_NE(r.out.find("plugin=" + plugin + " chain=?libnccl-profiler.so\n"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("plugin=" + plugin + " chain=inspector\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plugin= chain=\n"), std::string::npos) << r.out;
}

// Agents that run already (started by a cluster's own tooling): `run --launcher attach` runs the
// job on them with their token, and leaves them running.
TEST_F(CoordinatorE2eTest, AttachLauncherRunsTheJobOnRunningAgents) {
  auto r = InNamespace(
      "umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > $DIR/token; "
      "for a in 2 3; do $DSD agent --listen 127.0.0.$a:47950 --token-file $DIR/token --name host-$a > $DIR/agent$a.out "
      "& "
      "done; for i in $(seq 50); do grep -q READY $DIR/agent3.out 2>/dev/null && grep -q READY $DIR/agent2.out && "
      "break; "
      "sleep 0.1; done; "
      "$DSD run --launcher attach --agents 127.0.0.2:47950,127.0.0.3:47950 --token-file $DIR/token --master_port 29562 "
      "--quiet --log-dir $DIR/logs --json $DIR/run.json -- $EX/train_healthy --steps 3; echo run=$?; "
      "pgrep -f '[a]gent --listen 127.0.0.[23]:47950' | wc -l | sed 's/^/agents=/'; "
      "pkill -f '[a]gent --listen 127.0.0.[23]:47950'; wait");
  EXPECT_NE(r.out.find("run=0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("agents=2"), std::string::npos) << "attached agents outlive the run: " << r.out;
  json run = ReadJson("run.json");
  ASSERT_EQ(run["ranks"].size(), 2u);
  EXPECT_EQ(run["ranks"][1]["node"], "host-3") << "the agent's own name";
  EXPECT_EQ(run["ranks"][1]["step"], 3);
  EXPECT_TRUE(run["findings"].empty()) << run["findings"].dump(2);
}

// kill -9 of one node's agent: AGENT_LOST names the node and its rank, no exit code is made up for
// the rank (it died with its agent), the other node's rank ends normally, and the job is not a
// success (exit 1).
TEST_F(CoordinatorE2eTest, KilledAgentIsAgentLostWithoutAnInventedExitCode) {
  auto r = InNamespace(
      "$DSD run --local 2 --agent-port 47920 --quiet --log-dir $DIR/logs --json $DIR/run.json -- sh -c 'exec sleep 4' "
      "& "
      "C=$!; "
      "for i in $(seq 50); do [ -f $DIR/logs/rank-1.log ] && break; sleep 0.1; done; sleep 0.5; "
      "kill -9 $(pgrep -f '[a]gent --listen 127.0.0.3:47920'); wait $C; echo run=$?; sleep 0.3; "
      "pgrep -f '[a]gent --listen 127.0.0.[23]:47920' || echo no-agents-left");
  EXPECT_NE(r.out.find("run=1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out;
  json run = ReadJson("run.json");
  ASSERT_FALSE(run["findings"].empty()) << r.out;
  const json& f = run["findings"][0];
  EXPECT_EQ(f["code"], "AGENT_LOST") << run["findings"].dump(2);
  EXPECT_EQ(f["nodes"], json({"node-1"}));
  EXPECT_EQ(f["ranks"], json({1}));
  EXPECT_NE(f["summary"].get<std::string>().find("is gone (connection lost"), std::string::npos) << f.dump();
  EXPECT_TRUE(FindingsWithCode(run, "RANK_EXITED").empty()) << run["findings"].dump(2);
  EXPECT_EQ(run["ranks"][1]["unobserved"], true);
  EXPECT_EQ(run["ranks"][1]["status"], "running") << "its last known state";
  EXPECT_NE(run["ranks"][1].value("exit_code", 0), 255);
  EXPECT_EQ(run["ranks"][0]["exit_code"], 0);
  ExpectNoRankLeft(run);
}

// The log dir on a 1 MiB tmpfs that the ranks fill (a private mount namespace): LOG_DIR_FULL names
// the file system and its free space, the ranks run on to their own end, and run exits with the
// job's code. What fit on the disk stays there.
TEST_F(CoordinatorE2eTest, FullLogDirIsNamedAndTheJobGoesOn) {
  auto r = InNamespace(
      "mkdir -p $DIR/logs; unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs $DIR/logs && "
      "$DSD run --local 2 --agent-port 47930 --quiet --log-dir $DIR/logs --json $DIR/run.json -- "
      "sh -c \"head -c 3000000 /dev/zero | tr \\\"\\\\000\\\" x; sleep 2; exit 0\"; echo run=$?; "
      "du -b $DIR/logs/rank-0.log; $DSD tui --replay $DIR/logs --dump; echo replay=$?'");
  EXPECT_NE(r.out.find("run=0"), std::string::npos) << r.out << r.err;
  // The live view's recording filled up too: its replay says so, and where it stops.
  EXPECT_NE(r.out.find("replay=0"), std::string::npos) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("the recording stops here: No space left on device"), std::string::npos)
      << r.out << r.err;
  EXPECT_EQ((r.out + r.err).find("killed while writing"), std::string::npos) << r.out << r.err;
  json run = ReadJson("run.json");
  auto full = FindingsWithCode(run, "LOG_DIR_FULL");
  ASSERT_FALSE(full.empty()) << run["findings"].dump(2);
  EXPECT_EQ(full[0]["severity"], "error");
  const std::string summary = full[0]["summary"].get<std::string>();
  EXPECT_NE(summary.find("tmpfs mounted at " + (dir_ / "logs").string()), std::string::npos) << summary;
  EXPECT_NE(summary.find("0 B free of 1 MiB"), std::string::npos) << summary;
  EXPECT_EQ(full[0]["proof"], "disk");
  EXPECT_EQ(run["ranks"][0]["exit_code"], 0);
  EXPECT_EQ(run["ranks"][1]["exit_code"], 0);
  EXPECT_TRUE(FindingsWithCode(run, "RANK_EXITED").empty()) << run["findings"].dump(2);
  EXPECT_TRUE(FindingsWithCode(run, "AGENT_LOST").empty()) << run["findings"].dump(2);
}

// A Python rank that prints on a full log file system: under torchrun (a pipe) it finishes, and
// under dsdoctor it must too. Its output goes through the node's pipe, so `print` never meets
// ENOSPC: the job exits 0, LOG_DIR_FULL says how many bytes of which rank were lost, and the log
// marks the gap. (Before, the rank's print raised OSError: rc 1.)
TEST_F(CoordinatorE2eTest, ARankThatPrintsOnAFullLogDirFinishesAndItsLostBytesAreCounted) {
  auto r = InNamespace(
      "mkdir -p $DIR/logs; unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs $DIR/logs && "
      "$DSD run --local 1 --slots 2 --agent-port 47935 --quiet --log-dir $DIR/logs --json $DIR/run.json -- "
      "/usr/bin/python3 -c \"import os, sys, time\n"
      "for i in range(3000): print(\\\"step %d \\\" % i + \\\"x\\\" * 1000, flush=True)\n"
      "time.sleep(1.5)\nprint(\\\"finished\\\", flush=True)\"; echo run=$?; tail -c 300 $DIR/logs/rank-1.log'");
  EXPECT_NE(r.out.find("run=0"), std::string::npos) << r.out << r.err;
  json run = ReadJson("run.json");
  ASSERT_EQ(run["ranks"].size(), 2u) << run.dump(2);
  EXPECT_EQ(run["ranks"][0]["exit_code"], 0) << run["ranks"][0].dump();
  EXPECT_EQ(run["ranks"][1]["exit_code"], 0) << run["ranks"][1].dump();
  auto full = FindingsWithCode(run, "LOG_DIR_FULL");
  ASSERT_FALSE(full.empty()) << run["findings"].dump(2);
  EXPECT_EQ(full[0]["severity"], "error");
  const std::string summary = full[0]["summary"].get<std::string>();
  EXPECT_NE(summary.find("was dropped"), std::string::npos) << summary;
  EXPECT_NE(summary.find("rank 0 "), std::string::npos) << summary;
  EXPECT_NE(summary.find("rank 1 "), std::string::npos) << summary;
  EXPECT_NE(full[0]["evidence"].dump().find("rank-1.log: "), std::string::npos) << full[0].dump(2);
  EXPECT_TRUE(FindingsWithCode(run, "RANK_EXITED").empty()) << run["findings"].dump(2);
}

// A rank that prints 40 MB at once: its output travels in chunks under the frame limit (one sample
// with it would exceed 16 MiB, and an agent that cannot send stops the job), and all of it is on disk.
TEST_F(CoordinatorE2eTest, ARankPrintingFastNeverBreaksTheAgentLink) {
  auto r = InNamespace(
      "$DSD run --local 1 --quiet --log-dir $DIR/logs --json $DIR/run.json -- "
      "sh -c 'head -c 40000000 /dev/zero | tr \"\\000\" x; echo; echo done'; echo run=$?");
  EXPECT_NE(r.out.find("run=0"), std::string::npos) << r.out << r.err;
  json run = ReadJson("run.json");
  EXPECT_EQ(run["ranks"][0]["exit_code"], 0);
  EXPECT_TRUE(FindingsWithCode(run, "AGENT_LOST").empty()) << run["findings"].dump(2);
  EXPECT_EQ(std::filesystem::file_size(dir_ / "logs" / "rank-0.log"), 40000000u + 6u);
}

// kill -9 of the coordinator mid-run (a crash, a lost ssh session): the job is not harmed. The
// agents see their stdin close, let the ranks run to their own end, write their logs and exit
// files, and exit after them; `analyze` of the run dir then reports the finished job from them.
// (Before, every rank was stopped within 2 s.)
TEST_F(CoordinatorE2eTest, AJobOutlivesItsKilledCoordinatorAndAnalyzeReportsIt) {
  auto r = InNamespace(
      "$DSD run --local 2 --agent-port 47945 --quiet --log-dir $DIR/logs --reattach-window 0 -- "
      "sh -c 'sleep 4; echo finished' & C=$!; "
      "for i in $(seq 100); do [ -e $DIR/logs/rank-0.log ] && [ -e $DIR/logs/rank-1.log ] && break; sleep 0.1; done; "
      "sleep 1; kill -9 $C; wait $C; echo run=$?; "
      "for i in $(seq 150); do [ -s $DIR/logs/rank-0.exit ] && [ -s $DIR/logs/rank-1.exit ] && break; sleep 0.1; done; "
      "echo exits=$(cat $DIR/logs/rank-0.exit $DIR/logs/rank-1.exit | tr '\\n' ' '); "
      "grep -h finished $DIR/logs/rank-0.log $DIR/logs/rank-1.log; "
      "for i in $(seq 50); do pgrep -f '[a]gent --listen 127.0.0.[23]:47945' >/dev/null || break; sleep 0.1; done; "
      "pgrep -f '[a]gent --listen 127.0.0.[23]:47945' || echo no-agents-left; "
      "$DSD analyze $DIR/logs --json > $DIR/analyze.json; echo analyze=$?");
  EXPECT_NE(r.out.find("run=137"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("exits=0 0"), std::string::npos) << "the ranks ran to their end: " << r.out << r.err;
  size_t finished = 0;
  for (size_t at = r.out.find("finished"); at != std::string::npos; at = r.out.find("finished", at + 1)) ++finished;
  EXPECT_EQ(finished, 2u) << r.out;
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("analyze=0"), std::string::npos) << "every rank's exit status is on disk: " << r.out;
  json a = ReadJson("analyze.json");
  ASSERT_EQ(a["ranks"].size(), 2u) << a.dump(2);
  for (const auto& rank : a["ranks"]) EXPECT_EQ(rank["exit_code"], 0) << rank.dump();
  for (const auto& f : a["findings"]) EXPECT_NE(f["severity"], "error") << f.dump(2);
}

// kill -9 of the coordinator mid-run; `dsdoctor attach` takes the run over from the run dir while
// the ranks train: every line they print is in its output (the log's tail before it came, what was
// printed while no one watched, then live), its report and exit code are the job's (rank 1 exits 3),
// and after it nothing is left: no agent, no token.
TEST_F(CoordinatorE2eTest, AKilledCoordinatorsRunIsTakenOverByAttach) {
  auto r = InNamespace(
      "$DSD run --local 2 --agent-port 47955 --quiet --log-dir $DIR/logs -- "
      "sh -c 'for i in $(seq 10); do echo tick $i; sleep 0.4; done; [ \"$RANK\" = 1 ] && exit 3; exit 0' & C=$!; "
      "for i in $(seq 100); do [ -e $DIR/logs/agents.json ] && [ -s $DIR/logs/rank-0.log ] && "
      "[ -s $DIR/logs/rank-1.log ] && break; sleep 0.1; done; "
      "$DSD attach $DIR/logs > $DIR/alive.out 2>&1; echo alive=$?; "
      "sleep 0.5; kill -9 $C; wait $C; echo run=$?; sleep 1; "
      "$DSD attach $DIR/logs --json $DIR/attach.json > $DIR/attach.out 2>&1; echo attach=$?; "
      "for i in $(seq 50); do pgrep -f '[a]gent --listen 127.0.0.[23]:47955' >/dev/null || break; sleep 0.1; done; "
      "pgrep -f '[a]gent --listen 127.0.0.[23]:47955' || echo no-agents-left; "
      "[ -e $DIR/logs/agents.token ] && echo token-left || echo token-removed");
  EXPECT_NE(r.out.find("run=137"), std::string::npos) << r.out << r.err;
  // While the first coordinator lives, attach refuses: two coordinators would fight for the agents.
  EXPECT_NE(r.out.find("alive=2"), std::string::npos) << r.out;
  EXPECT_NE(ReadFile((dir_ / "alive.out").string()).value_or("").find("is alive: watch it with `dsdoctor tui"),
            std::string::npos);
  EXPECT_NE(r.out.find("attach=3"), std::string::npos) << "the job's own code: " << r.out << r.err;
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("token-removed"), std::string::npos) << r.out;
  std::string out = ReadFile((dir_ / "attach.out").string()).value_or("");
  EXPECT_NE(out.find("dsdoctor: took over run"), std::string::npos) << out;
  for (int rank = 0; rank < 2; ++rank)
    for (int i = 1; i <= 10; ++i) {
      const std::string line = "[" + std::to_string(rank) + "] tick " + std::to_string(i) + "\n";
      EXPECT_NE(out.find(line), std::string::npos) << "missing " << line << out;
    }
  json a = ReadJson("attach.json");
  ASSERT_EQ(a["ranks"].size(), 2u) << a.dump(2);
  EXPECT_EQ(a["ranks"][0]["exit_code"], 0);
  EXPECT_EQ(a["ranks"][1]["exit_code"], 3);
  auto exited = FindingsWithCode(a, "RANK_EXITED");
  ASSERT_EQ(exited.size(), 1u) << a["findings"].dump(2);
  EXPECT_EQ(exited[0]["ranks"], json::array({1}));
}

// The ranks ended while no coordinator watched: their agents wait (--reattach-window) and `attach`
// collects their ends, the report and the job's code; then the agents go. After the window, attach
// says the agents are gone and points at analyze.
TEST_F(CoordinatorE2eTest, AttachAfterTheRanksEndedCollectsTheirEndsWithinTheWindow) {
  auto r = InNamespace(
      "$DSD run --local 2 --agent-port 47960 --quiet --log-dir $DIR/logs --reattach-window 60 -- "
      "sh -c 'echo start-$RANK; sleep 1.5; echo done-$RANK' & C=$!; "
      // Both ranks must have started: an agent whose coordinator dies before its rank starts has
      // nothing to keep and exits (agents.json is written before the ranks start).
      "for i in $(seq 100); do [ -e $DIR/logs/agents.json ] && [ -s $DIR/logs/rank-0.log ] && "
      "[ -s $DIR/logs/rank-1.log ] && break; sleep 0.1; done; "
      "kill -9 $C; wait $C; "
      "for i in $(seq 100); do [ -s $DIR/logs/rank-0.exit ] && [ -s $DIR/logs/rank-1.exit ] && break; sleep 0.1; done; "
      "sleep 1; pgrep -f '[a]gent --listen 127.0.0.[23]:47960' >/dev/null && echo agents-wait; "
      "$DSD attach $DIR/logs --json $DIR/attach.json > $DIR/attach.out 2>&1; echo attach=$?; "
      "for i in $(seq 50); do pgrep -f '[a]gent --listen 127.0.0.[23]:47960' >/dev/null || break; sleep 0.1; done; "
      "pgrep -f '[a]gent --listen 127.0.0.[23]:47960' || echo no-agents-left; "
      "$DSD attach $DIR/logs > $DIR/again.out 2>&1; echo again=$?");
  EXPECT_NE(r.out.find("agents-wait"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("attach=0"), std::string::npos)
      << r.out << r.err << ReadFile((dir_ / "attach.out").string()).value_or("");
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out;
  json a = ReadJson("attach.json");
  ASSERT_EQ(a["ranks"].size(), 2u) << a.dump(2);
  for (const auto& rank : a["ranks"]) EXPECT_EQ(rank["exit_code"], 0) << rank.dump();
  std::string out = ReadFile((dir_ / "attach.out").string()).value_or("");
  EXPECT_NE(out.find("[1] done-1"), std::string::npos) << out;
  // The run is over and collected: nothing to take over any more, and the user is told where to look.
  EXPECT_EQ(r.out.find("again=0"), std::string::npos) << r.out;
  std::string again = ReadFile((dir_ / "again.out").string()).value_or("");
  EXPECT_NE(again.find("dsdoctor analyze"), std::string::npos) << again;
}

// A partition longer than the link survives (9 s of DROP both ways: the coordinator gives up on the
// silent link after 5 s and connects again once it heals): the agent kept its ranks running, the
// new link takes the run over, every line printed meanwhile reaches the coordinator, and the job's
// code is unchanged (0), with AGENT_LOST as a warning that the node came back.
TEST_F(CoordinatorE2eTest, APartitionLongerThanTheLinkHealsWithoutChangingTheExitCode) {
  auto r = InNamespace(
      "$DSD run --local 2 --agent-port 47965 --log-dir $DIR/logs --json $DIR/run.json -- "
      "sh -c 'for i in $(seq 30); do echo tick $i; sleep 0.5; done' > $DIR/live.out 2>&1 & C=$!; sleep 1.5; "
      "iptables -A INPUT -s 127.0.0.3 -p tcp --sport 47965 -j DROP; "
      "iptables -A INPUT -d 127.0.0.3 -p tcp --dport 47965 -j DROP; sleep 9; iptables -F INPUT; "
      "wait $C; echo run=$?");
  EXPECT_NE(r.out.find("run=0"), std::string::npos) << r.out << r.err;
  std::string live = ReadFile((dir_ / "live.out").string()).value_or("");
  EXPECT_NE(live.find("agent node-1: connected again"), std::string::npos) << live;
  for (int i = 1; i <= 30; ++i) {
    const std::string line = "[1] tick " + std::to_string(i) + "\n";
    EXPECT_NE(live.find(line), std::string::npos) << "missing " << line << live;
  }
  json run = ReadJson("run.json");
  auto lost = FindingsWithCode(run, "AGENT_LOST");
  ASSERT_EQ(lost.size(), 1u) << run["findings"].dump(2);
  EXPECT_EQ(lost[0]["severity"], "warning");
  EXPECT_EQ(run["ranks"][1]["exit_code"], 0);
}

// A coordinator stopped (SIGSTOP) longer than --hang-after finds stale samples queued when it
// resumes: it catches up before it diagnoses, so a healthy job is neither flagged nor stopped.
TEST_F(CoordinatorE2eTest, StoppedCoordinatorNeverDiagnosesStaleSamples) {
  auto r = InNamespace(
      "$DSD run --local 2 --slots 2 --hang-after 1 --quiet --log-dir $DIR/logs --json $DIR/run.json -- "
      "$EX/train_healthy --steps 120 --step-delay-ms 100 & C=$!; sleep 3; kill -STOP $C; sleep 8; kill -CONT $C; "
      "wait $C; echo run=$?");
  EXPECT_NE(r.out.find("run=0"), std::string::npos) << r.out << r.err;
  json run = ReadJson("run.json");
  EXPECT_TRUE(run["findings"].empty()) << run["findings"].dump(2);
  EXPECT_FALSE(run.contains("stopped_by_dsdoctor")) << run.dump(2);
  for (const auto& rank : run["ranks"]) EXPECT_EQ(rank["exit_code"], 0);
}

// iptables DROP between the coordinator and one agent: AGENT_LOST within the live output, no stack
// request waits on the silent agent, and once the partition heals a job whose ranks all exited 0
// reports 0 with a warning about the gap.
TEST_F(CoordinatorE2eTest, DroppedLinkIsAgentLostAndAHealedPartitionReportsTheJobsCode) {
  auto r = InNamespace(
      "$DSD run --local 2 --agent-port 47910 --log-dir $DIR/logs --json $DIR/run.json -- sh -c 'exec sleep 6' "
      "> $DIR/live.out & C=$!; sleep 1.5; "
      "iptables -A INPUT -s 127.0.0.3 -p tcp --sport 47910 -j DROP; "
      "iptables -A INPUT -d 127.0.0.3 -p tcp --dport 47910 -j DROP; sleep 3; iptables -F INPUT; "
      "wait $C; echo run=$?");
  EXPECT_NE(r.out.find("run=0"), std::string::npos) << r.out << r.err;
  std::string live = ReadFile((dir_ / "live.out").string()).value_or("");
  EXPECT_NE(live.find("dsdoctor: error AGENT_LOST: the agent on node-1 has sent nothing for"), std::string::npos)
      << live;
  EXPECT_NE(live.find("dsdoctor: agent on node-1 is back after"), std::string::npos) << live;
  json run = ReadJson("run.json");
  auto lost = FindingsWithCode(run, "AGENT_LOST");
  ASSERT_EQ(lost.size(), 1u) << run["findings"].dump(2);
  EXPECT_EQ(lost[0]["severity"], "warning");
  EXPECT_EQ(lost[0]["nodes"], json({"node-1"}));
  EXPECT_TRUE(FindingsWithCode(run, "RANK_MISSING").empty()) << run["findings"].dump(2);
  EXPECT_EQ(run["ranks"][1]["exit_code"], 0);
  EXPECT_FALSE(run["ranks"][1].contains("unobserved"));
}

}  // namespace
}  // namespace dsd
