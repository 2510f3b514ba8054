// End-to-end tests on a real Slurm cluster (tests/e2e/slurm_cluster.sh): slurmctld and one slurmd per
// node, each with its own munged, each machine in its own network, UTS and mount namespace
// (addresses in 198.18.0.0/15). dsdoctor runs on the login node inside `salloc`/`sbatch`
// allocations, as users run it, and starts its agents with one srun step. Every daemon is stopped by
// pid and every namespace removed by the script. Skips where Slurm or namespaces are missing, and
// fails then under DSDOCTOR_REQUIRE_SLURM=1 (CI).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/process.h"

namespace dsd {
namespace {

using nlohmann::json;

class SlurmE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing;
    for (const char* tool : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/srun"})
      if (::access(tool, X_OK) != 0) missing += std::string(missing.empty() ? "" : ", ") + tool;
    auto probe = RunCommand({"unshare", "-n", "-m", "-u", "sh", "-c", "ip link set lo up && hostname probe"}, {});
    if (::geteuid() != 0 || !probe.ok() || probe->exit_code != 0) missing += " (root and namespaces)";
    if (!missing.empty()) {
      if (std::getenv("DSDOCTOR_REQUIRE_SLURM")) FAIL() << "Slurm e2e needs " << missing << ": run scripts/setup.sh";
      GTEST_SKIP() << "needs " << missing;
    }
    // Shared by the machines of the cluster, as a home directory on NFS would be: not under /tmp,
    // which every machine has of its own.
    dir_ = "/var/tmp/dsd-slurm-e2e-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Runs `script` on the login node of a fresh cluster of `nodes` nodes with `cpus` CPUs each;
  // $DSD, $EX, $DIR and $NODE_PID_<i> (a process in node i's namespaces, for nsenter) are set.
  CommandResult OnCluster(int nodes, int cpus, const std::string& script) {
    static std::atomic<int> n{0};
    const std::string prefix = "dsdsl" + std::to_string(::getpid() % 100000) + "x" + std::to_string(n++);
    CommandOptions opts;
    // The software the machines run, wherever the checkout is (under /tmp too, which each machine
    // has of its own): the source and build trees are bound into every machine's /tmp.
    const std::string keep = std::string(DSDOCTOR_SOURCE_DIR) + ":" +
                             std::filesystem::path(DSDOCTOR_BIN).parent_path().parent_path().string();
    opts.env = {
        {"DSD", DSDOCTOR_BIN}, {"EX", EXAMPLES_DIR}, {"DIR", dir_}, {"KEEP", keep}, {"DSDOCTOR_LOG_LEVEL", "warn"}};
    opts.timeout = std::chrono::seconds(200);
    // in_cluster PATTERN: the pids matching PATTERN that run on this cluster's nodes (by network
    // namespace), never another test's processes on this machine.
    const std::string helpers =
        "in_cluster() { for p in $(pgrep -f \"$1\"); do n=$(readlink /proc/$p/ns/net 2>/dev/null) || continue; "
        "for i in $(seq 0 " +
        std::to_string(nodes - 1) +
        "); do q=NODE_PID_$i; "
        "[ \"$n\" = \"$(readlink /proc/${!q}/ns/net)\" ] && echo $p; done; done; }; ";
    auto r = RunCommand({"bash", SLURM_CLUSTER, prefix, std::to_string(nodes), std::to_string(cpus), "--", "bash", "-c",
                         "set -u; " + helpers + script},
                        opts);
    EXPECT_TRUE(r.ok());
    EXPECT_FALSE(r.ok() && r->timed_out) << (r.ok() ? r->out + r->err : "");
    return r.ok() ? *r : CommandResult{};
  }

  json ReadJson(const std::string& name) {
    auto text = ReadFile(dir_ + "/" + name);
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return text.ok() ? json::parse(*text, nullptr, false) : json();
  }

  std::string dir_;
};

// Inside an allocation, `check` with no hostfile finds the allocation's nodes (scontrol show
// hostnames), starts its agents with srun and probes between them; an iptables DROP from node-0 to
// node-1's agent port is PORT_BLOCKED naming that pair. Nothing of the agents' step is left after.
TEST_F(SlurmE2eTest, CheckFindsTheAllocationsNodesAndNamesABlockedPair) {
  auto r =
      OnCluster(2, 4,
                "salloc -N 2 --ntasks-per-node=2 $DSD check --no-bandwidth --json $DIR/ok.json; echo ok=$?; "
                "nsenter --net=/proc/$NODE_PID_1/ns/net iptables -A INPUT -s 198.18.0.10 -p tcp --dport 47000 -j DROP; "
                "salloc -N 2 $DSD check --no-bandwidth --agent-port 47000 --connect-timeout-ms 1000 "
                "--json $DIR/blocked.json; echo blocked=$?; "
                "sleep 0.5; [ -z \"$(in_cluster '[d]sdoctor agent')\" ] && echo no-agents-left; "
                "salloc -N 2 bash -c 'scontrol update nodename=node-1 state=drain reason=\"bad gpu\"; "
                "$DSD check --no-bandwidth --json $DIR/drained.json; echo drained=$?'");
  EXPECT_NE(r.out.find("ok=0"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("blocked=1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("no-agents-left"), std::string::npos) << r.out;
  json ok = ReadJson("ok.json");
  EXPECT_EQ(ok["simulated"], false);
  ASSERT_EQ(ok["nodes"].size(), 2u) << ok.dump(2).substr(0, 2000);
  EXPECT_EQ(ok["nodes"][0]["name"], "node-0");
  EXPECT_EQ(ok["nodes"][1]["name"], "node-1");
  EXPECT_NE(ok.dump().find("4 slots from Slurm job"), std::string::npos) << ok.dump(2).substr(0, 3000);
  // Slurm drains node-1 while the allocation holds it: the probes pass, Slurm's own state fails.
  EXPECT_NE(r.out.find("drained=1"), std::string::npos) << r.out << r.err;
  const std::string drained = ReadJson("drained.json").dump();
  EXPECT_NE(drained.find("SLURM_NODE_STATE"), std::string::npos) << drained.substr(0, 3000);
  EXPECT_NE(drained.find("bad gpu"), std::string::npos) << drained.substr(0, 3000);
  json blocked = ReadJson("blocked.json");
  const std::string text = blocked.dump();
  EXPECT_NE(text.find("PORT_BLOCKED"), std::string::npos) << text.substr(0, 4000);
  EXPECT_NE(text.find("node-0"), std::string::npos);
  EXPECT_NE(text.find("node-1"), std::string::npos);
}

// The cluster's nodes have 4 GPUs each as Slurm knows them (gres.conf). Four tasks a node with two
// GPUs granted: ranks would share GPUs, named. One task a node with four GPUs (the torchrun way): a
// rank per GPU, 8 in all, green.
TEST_F(SlurmE2eTest, CheckComparesTheRanksWithTheGpusSlurmGranted) {
  auto r = OnCluster(2, 4,
                     "salloc -N 2 --ntasks-per-node=4 --gpus-per-node=2 $DSD check --no-bandwidth "
                     "--json $DIR/over.json; echo over=$?; "
                     "salloc -N 2 --ntasks-per-node=1 --gpus-per-node=4 $DSD check --no-bandwidth "
                     "--json $DIR/per_gpu.json; echo per_gpu=$?");
  EXPECT_NE(r.out.find("over=1"), std::string::npos) << r.out << r.err;
  const json over = ReadJson("over.json");
  bool named = false;
  for (const auto& f : over["findings"])
    if (f["code"] == "SLOTS_EXCEED_GPUS") {
      named = true;
      EXPECT_EQ(f["nodes"], json::array({"node-0", "node-1"})) << f.dump(2);
      EXPECT_NE(f["summary"].get<std::string>().find("granted 2 GPUs per node but 4 ranks"), std::string::npos)
          << f.dump(2);
    }
  EXPECT_TRUE(named) << over["findings"].dump(2).substr(0, 3000);
  EXPECT_NE(r.out.find("per_gpu=0"), std::string::npos) << r.out << r.err;
  const std::string per_gpu = ReadJson("per_gpu.json").dump();
  EXPECT_NE(per_gpu.find("8 slots from Slurm job"), std::string::npos) << per_gpu.substr(0, 3000);
  EXPECT_NE(per_gpu.find("a rank per GPU"), std::string::npos) << per_gpu.substr(0, 3000);
}

// Outside an allocation, --slurm-args asks salloc for one: check and run happen inside it. A request
// Slurm cannot meet within --slurm-wait is SLURM_ALLOCATION with salloc's words and, for a job that
// waited, squeue's reason, in a report that checked nothing; never a hang.
TEST_F(SlurmE2eTest, SlurmArgsAskForAnAllocationAndNoneInTimeIsAFinding) {
  auto r =
      OnCluster(2, 4,
                "$DSD check --slurm-args '-N 2 --ntasks-per-node=2' --no-bandwidth --json $DIR/alloc.json; "
                "echo alloc=$?; "
                "$DSD run --quiet --slurm-args '-N 2 --ntasks-per-node=2' --log-dir $DIR/logs --json $DIR/run.json -- "
                "$EX/train_healthy --steps 3; echo run=$?; "
                "busy=$(sbatch --parsable -N 1 -w node-1 --wrap 'sleep 60'); "
                "for i in $(seq 100); do [ \"$(squeue -h -j $busy -o %T)\" = RUNNING ] && break; sleep 0.1; done; "
                "start=$(date +%s); "
                "$DSD check --slurm-args '-N 2' --slurm-wait 4 --no-bandwidth --json $DIR/busy.json; "
                "echo busy=$? waited=$(( $(date +%s) - start )); "
                "$DSD check --slurm-args '-N 2 -p nosuch' --json $DIR/bad.json > /dev/null; echo bad=$?; "
                "scancel $busy; for i in $(seq 100); do squeue -h | grep -q . || break; sleep 0.1; done");
  EXPECT_NE(r.out.find("alloc=0"), std::string::npos) << r.out << r.err;
  json alloc = ReadJson("alloc.json");
  ASSERT_EQ(alloc["nodes"].size(), 2u) << alloc.dump(2).substr(0, 2000);
  EXPECT_NE(alloc.dump().find("4 slots from Slurm job"), std::string::npos) << alloc.dump(2).substr(0, 3000);
  EXPECT_NE(r.out.find("run=0"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(ReadJson("run.json")["ranks"].size(), 4u);
  // node-1 is busy: the job pends for Resources until salloc gives up.
  EXPECT_NE(r.out.find("busy=1"), std::string::npos) << r.out << r.err;
  json busy = ReadJson("busy.json");
  ASSERT_FALSE(busy["findings"].empty()) << busy.dump(2).substr(0, 3000);
  const json& f = busy["findings"][0];
  EXPECT_EQ(f["code"], "SLURM_ALLOCATION") << f.dump(2);
  EXPECT_NE(f["summary"].get<std::string>().find("within 4 s"), std::string::npos) << f.dump(2);
  EXPECT_NE(f["summary"].get<std::string>().find("Resources"), std::string::npos) << f.dump(2);
  EXPECT_NE(f["remedy"].get<std::string>().find("busy"), std::string::npos) << f.dump(2);
  const size_t w = r.out.find("waited=");
  ASSERT_NE(w, std::string::npos);
  EXPECT_LT(std::atoi(r.out.c_str() + w + 7), 30) << "bounded by --slurm-wait, not a hang";
  // A partition that does not exist: salloc's own error, at once.
  EXPECT_NE(r.out.find("bad=1"), std::string::npos) << r.out << r.err;
  const std::string bad = ReadJson("bad.json").dump();
  EXPECT_NE(bad.find("invalid partition"), std::string::npos) << bad.substr(0, 3000);
}

// `run` inside an sbatch job, no hostfile: ranks on both nodes through the agents' srun step, and the
// rank-0-only save_checkpoint hang pinpointed on rank 0 with the remedy. The run dir is the login
// node's own /tmp: the nodes share nothing with it, so their files come over the links.
TEST_F(SlurmE2eTest, RunInAnSbatchJobPinpointsTheRankZeroOnlyCheckpoint) {
  auto r =
      OnCluster(2, 4,
                "cat > $DIR/job.sh <<EOF\n"
                "#!/bin/bash\n"
                "$DSD run --quiet --timeout 30 --log-dir /tmp/run --json $DIR/run.json -- $EX/rank0_only_checkpoint\n"
                "echo run=\\$? > $DIR/rc\n"
                "ls /tmp/run > $DIR/files\n"
                "EOF\n"
                "id=$(sbatch --parsable -N 2 --ntasks-per-node=2 -o $DIR/job.out $DIR/job.sh); "
                "for i in $(seq 600); do [ -s $DIR/rc ] && break; sleep 0.1; done; cat $DIR/rc $DIR/job.out");
  EXPECT_NE(r.out.find("run=1"), std::string::npos) << r.out << r.err;
  json run = ReadJson("run.json");
  ASSERT_FALSE(run["findings"].empty()) << run.dump(2).substr(0, 3000);
  const json& f = run["findings"][0];
  EXPECT_EQ(f["ranks"], json::array({0})) << f.dump(2);
  EXPECT_NE(f["summary"].get<std::string>().find("save_checkpoint"), std::string::npos) << f.dump(2);
  ASSERT_EQ(run["ranks"].size(), 4u);
  EXPECT_EQ(run["ranks"][2]["node"], "node-1");
  const std::string files = ReadFile(dir_ + "/files").value_or("");
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(files.find("rank-" + std::to_string(rank) + ".log"), std::string::npos) << files;
}

// A rank that outgrows the job's memory on node-1: Slurm's accounting kills that node's step (the
// agent and ranks 2 and 3). After the job, `analyze --slurm-job ID RUN_DIR` adds what Slurm says:
// the job's own output (found by scontrol) has slurmstepd's kill on node-1, and sacct (here the
// job completion log: the cluster has no slurmdbd) the job's end; the OOM names node-1's ranks.
TEST_F(SlurmE2eTest, AnalyzeSlurmJobNamesTheRanksOfTheStepKilledForMemory) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/hog.py",
                              "import os, time\n"
                              "if os.environ['RANK'] == '2':\n"
                              "    a = bytearray(600 << 20)\n"
                              "    for i in range(0, len(a), 4096): a[i] = 1\n"
                              "time.sleep(8)\n")
                  .ok());
  auto r = OnCluster(2, 4,
                     "cat > $DIR/job.sh <<EOF\n"
                     "#!/bin/bash\n"
                     "$DSD run --quiet --timeout 30 --log-dir $DIR/run --json $DIR/run.json -- python3 $DIR/hog.py\n"
                     "echo run=\\$? > $DIR/rc\n"
                     "EOF\n"
                     "id=$(sbatch --parsable -N 2 --ntasks-per-node=2 --mem=300M -o $DIR/job.out $DIR/job.sh); "
                     "for i in $(seq 600); do [ -s $DIR/rc ] && break; sleep 0.1; done; "
                     "for i in $(seq 100); do squeue -h -j $id | grep -q . || break; sleep 0.1; done; "
                     "cat $DIR/rc $DIR/job.out; "
                     "$DSD analyze --slurm-job $id --json $DIR/run > $DIR/analyze.json; echo analyze=$?; "
                     "$DSD analyze --slurm-job 999999 $DIR/run > /dev/null 2> $DIR/unknown.err; echo unknown=$?; "
                     "$DSD analyze --slurm-job 'x;y' $DIR/run 2>&1; echo bad=$?");
  EXPECT_NE(r.out.find("run=1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("analyze=1"), std::string::npos) << r.out << r.err;
  json a = ReadJson("analyze.json");
  ASSERT_FALSE(a["findings"].empty()) << a.dump(2).substr(0, 3000);
  const json& f = a["findings"][0];
  EXPECT_EQ(f["code"], "OUT_OF_MEMORY") << a["findings"].dump(2).substr(0, 3000);
  EXPECT_EQ(f["nodes"], json::array({"node-1"})) << f.dump(2);
  EXPECT_EQ(f["ranks"], json::array({2, 3})) << f.dump(2);
  // run's own report already says it: srun's lines are read when the run ends.
  bool in_run = false;
  const json run = ReadJson("run.json");
  for (const auto& g : run["findings"])
    if (g["code"] == "OUT_OF_MEMORY") {
      in_run = true;
      EXPECT_EQ(g["nodes"], json::array({"node-1"})) << g.dump(2);
      EXPECT_EQ(g["ranks"], json::array({2, 3})) << g.dump(2);
    }
  EXPECT_TRUE(in_run) << run["findings"].dump(2).substr(0, 3000);
  // sacct's record of the job is in the report too.
  EXPECT_NE(a.dump().find("sacct --completion"), std::string::npos) << a.dump(2).substr(0, 4000);
  // A job Slurm never ran is said, and the report is not green.
  EXPECT_NE(r.out.find("unknown=1"), std::string::npos) << r.out;
  // An id that is not one is a usage error naming it.
  EXPECT_NE(r.out.find("not a Slurm job id"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bad=2"), std::string::npos) << r.out;
}

// `scancel` of a job whose `run` trains: Slurm ends the batch script, the coordinator and the
// agents' step; no rank and no agent is left on any node.
TEST_F(SlurmE2eTest, ScancelLeavesNothingRunning) {
  // Written here, so that no command line of the test's own holds the pattern pgrep looks for.
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/job.sh", std::string("#!/bin/bash\n") + DSDOCTOR_BIN +
                                                    " run --quiet --log-dir " + dir_ + "/logs -- " + EXAMPLES_DIR +
                                                    "/train_healthy --steps 100000 --step-delay-ms 20\n")
                  .ok());
  auto r =
      OnCluster(2, 4,
                "id=$(sbatch --parsable -N 2 --ntasks-per-node=1 -o $DIR/job.out $DIR/job.sh); "
                "for i in $(seq 300); do [ -s $DIR/logs/rank-1.log ] && break; sleep 0.1; done; "
                "[ -n \"$(in_cluster '[t]rain_healthy --steps 100000')\" ] && echo training; "
                "scancel $id; "
                "for i in $(seq 300); do [ -z \"$(in_cluster '[t]rain_healthy --steps 100000|[d]sdoctor agent')\" ] "
                "&& break; sleep 0.1; done; "
                "left=$(in_cluster '[t]rain_healthy --steps 100000|[d]sdoctor agent'); "
                "[ -z \"$left\" ] && echo nothing-left || ps -o pid,args -p $left");
  EXPECT_NE(r.out.find("training"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("nothing-left"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace dsd
