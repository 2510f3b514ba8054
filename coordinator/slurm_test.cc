#include "coordinator/slurm.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/file.h"
#include "common/strings.h"
#include "coordinator/launcher.h"
#include "coordinator/plan.h"

namespace dsd::coordinator {
namespace {

TEST(SlurmTest, TasksPerNodeExpandsSlurmsGrammar) {
  EXPECT_EQ(*ExpandTasksPerNode("4"), std::vector<int>{4});
  EXPECT_EQ(*ExpandTasksPerNode("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*ExpandTasksPerNode("8(x2)"), (std::vector<int>{8, 8}));
  for (const char* bad : {"", "x", "2(x)", "2(3)", "2(x3", "-1", "2,,1", "2(x0)"}) {
    auto r = ExpandTasksPerNode(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("SLURM_TASKS_PER_NODE"), std::string::npos) << r.status().message();
  }
}

// A stand-in for scontrol (the real one needs a controller): the test of the real one is the
// Slurm e2e test. This one prints the hosts of its last argument, or fails as scontrol would.
class FakeScontrol {
 public:
  FakeScontrol() {
    path_ = std::filesystem::temp_directory_path() / ("fake_scontrol_" + std::to_string(::getpid()));
    EXPECT_TRUE(WriteFileAtomic(path_,
                                "#!/bin/sh\n"
                                "case \"$3\" in\n"
                                "  'gpu-[01-02],cpu-7') printf 'gpu-01\\ngpu-02\\ncpu-7\\n';;\n"
                                "  'gpu-[01-02]') printf 'gpu-01\\ngpu-02\\n';;\n"
                                "  gpu-01) echo gpu-01;;\n"
                                "  *) echo \"scontrol: error: Invalid hostlist: $3\" >&2; exit 1;;\n"
                                "esac\n")
                    .ok());
    ::chmod(path_.c_str(), 0755);
  }
  ~FakeScontrol() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(SlurmTest, AnAllocationsNodesComeFromScontrolAndItsTasksPerNode) {
  FakeScontrol scontrol;
  auto none = SlurmAllocationFrom({{"HOME", "/root"}}, scontrol.path());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value()) << "outside an allocation";
  auto a = SlurmAllocationFrom(
      {{"SLURM_JOB_ID", "42"}, {"SLURM_JOB_NODELIST", "gpu-[01-02],cpu-7"}, {"SLURM_TASKS_PER_NODE", "4(x2),1"}},
      scontrol.path());
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->job_id, "42");
  EXPECT_EQ((*a)->hosts, (std::vector<std::string>{"gpu-01", "gpu-02", "cpu-7"}));
  EXPECT_EQ((*a)->tasks_per_node, (std::vector<int>{4, 4, 1}));
  NodeSourceOptions o;
  o.slurm = **a;
  auto nodes = PlanJobNodes(o);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_TRUE(nodes->slurm);
  EXPECT_FALSE(nodes->simulated);
  EXPECT_EQ(nodes->source, "Slurm job 42");
  EXPECT_EQ(nodes->world_size(), 9);
  EXPECT_EQ(DefaultLauncher(false, nodes->simulated, nodes->slurm), "slurm");
  // A hostfile, --local or --agents wins over the allocation (the user named the nodes).
  o.attach_agents = 2;
  EXPECT_FALSE(PlanJobNodes(o)->slurm);
}

TEST(SlurmTest, GpuCountsInSlurmsForms) {
  EXPECT_EQ(ParseSlurmGpuCount("4"), 4);
  EXPECT_EQ(ParseSlurmGpuCount("a100:4"), 4);
  EXPECT_EQ(ParseSlurmGpuCount("gpu:a100:8"), 8);
  EXPECT_EQ(ParseSlurmGpuCount("a100:2,v100:1"), 3);
  EXPECT_EQ(ParseSlurmGpuCount("gpu:4(S:0-1)"), 4);
  EXPECT_EQ(ParseSlurmGpuCount(""), std::nullopt);
  EXPECT_EQ(ParseSlurmGpuCount("lots"), std::nullopt);
}

// `sbatch --nodes=2 --ntasks-per-node=1 --gpus-per-node=8` (the torchrun/deepspeed way): a rank
// per GPU; srun's way (--ntasks-per-node=8) keeps a rank per task.
TEST(SlurmTest, OneTaskPerNodeWithGpusIsARankPerGpu) {
  FakeScontrol scontrol;
  auto a = SlurmAllocationFrom({{"SLURM_JOB_ID", "9"},
                                {"SLURM_JOB_NODELIST", "gpu-[01-02]"},
                                {"SLURM_TASKS_PER_NODE", "1(x2)"},
                                {"SLURM_GPUS_ON_NODE", "8"}},
                               scontrol.path());
  ASSERT_TRUE(a.ok() && a->has_value()) << a.status().message();
  EXPECT_EQ((*a)->gpus_per_node, 8);
  EXPECT_EQ((*a)->gpus_from, "SLURM_GPUS_ON_NODE=8");
  NodeSourceOptions o;
  o.slurm = **a;
  auto nodes = PlanJobNodes(o);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_EQ(nodes->world_size(), 16);
  EXPECT_NE(nodes->source.find("a rank per GPU"), std::string::npos) << nodes->source;
  o.slurm->tasks_per_node = {4, 4};
  EXPECT_EQ(PlanJobNodes(o)->world_size(), 8);
  auto per_node = SlurmAllocationFrom(
      {{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "gpu-01"}, {"SLURM_GPUS_PER_NODE", "a100:4"}}, scontrol.path());
  ASSERT_TRUE(per_node.ok() && per_node->has_value());
  EXPECT_EQ((*per_node)->gpus_per_node, 4);
  o.slurm = **per_node;
  EXPECT_EQ(PlanJobNodes(o)->world_size(), 4) << "no task count: a rank per granted GPU";
}

TEST(SlurmTest, NoAllocationSaysWhySlurmsWordsAndWhatToDo) {
  SallocRequest req;
  req.args = {"-p", "gpu", "-N", "4"};
  req.wait_s = 60;
  SallocOutcome waited;
  waited.job_id = "12";
  waited.pending_reason = "Priority";
  waited.error = {"salloc: Pending job allocation 12",
                  "salloc: error: Unable to allocate resources: Connection timed out"};
  auto f = NoAllocationFinding(req, waited);
  EXPECT_EQ(f.code, diagnosis::codes::kSlurmAllocation);
  EXPECT_EQ(f.summary, "Slurm granted no allocation for `-p gpu -N 4` (job 12) within 60 s: pending (Priority)");
  EXPECT_NE(f.remedy.find("--start"), std::string::npos) << f.remedy;
  EXPECT_NE(Join(f.evidence, "\n").find("Connection timed out"), std::string::npos);
  SallocOutcome refused;
  refused.error = {"salloc: error: invalid partition specified: gpu",
                   "salloc: error: Job submit/allocate failed: Invalid partition name specified"};
  auto g = NoAllocationFinding(req, refused);
  EXPECT_NE(g.remedy.find("sinfo -s"), std::string::npos) << g.remedy;
  EXPECT_NE(Join(g.evidence, "\n").find("invalid partition specified: gpu"), std::string::npos);
}

TEST(SlurmTest, BadAllocationsSayWhatIsWrongInSlurmsWords) {
  FakeScontrol scontrol;
  auto bad_list = SlurmAllocationFrom({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n[1-"}}, scontrol.path());
  ASSERT_FALSE(bad_list.ok());
  EXPECT_NE(bad_list.status().message().find("Invalid hostlist: n[1-"), std::string::npos)
      << bad_list.status().message();
  auto no_list = SlurmAllocationFrom({{"SLURM_JOB_ID", "7"}}, scontrol.path());
  ASSERT_FALSE(no_list.ok());
  EXPECT_NE(no_list.status().message().find("SLURM_JOB_NODELIST"), std::string::npos);
  auto mismatch = SlurmAllocationFrom(
      {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "gpu-[01-02],cpu-7"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}},
      scontrol.path());
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("gives 2 nodes"), std::string::npos) << mismatch.status().message();
  auto no_scontrol = SlurmAllocationFrom({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "a"}}, "/nonexistent/scontrol");
  EXPECT_FALSE(no_scontrol.ok());
}

TEST(SlurmTest, SinfoLinesBecomeNodeStates) {
  auto nodes = ParseSinfoNodes("node-0|mixed|none\nnode-1|drained|bad gpu|again\nnode-0|mixed|none\n\ngarbage\n");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].name, "node-1");
  EXPECT_EQ(nodes[1].state, "drained");
  EXPECT_EQ(nodes[1].reason, "bad gpu|again");
}

// One srun step, one task per node, the token never in argv; each agent finds its entry by name.
TEST(SlurmLauncherTest, SrunCommandStartsOneAgentPerNodeWithTheTokenOnStdin) {
  SlurmLauncherOptions o;
  o.dsdoctor_binary = "/opt/dsdoctor";
  o.extra_args = {"-p", "gpu"};
  o.agent_port = 47000;
  SlurmLauncher launcher(o);
  auto cmd = launcher.SrunCommand({{"gpu-01", "gpu-01"}, {"gpu-02", "gpu-02"}});
  const std::string line = [&] {
    std::string s;
    for (const auto& w : cmd) s += w + " ";
    return s;
  }();
  EXPECT_EQ(cmd[0], "srun");
  for (const char* want : {"--nodes=2 ", "--ntasks=2 ", "--ntasks-per-node=1 ", "--nodelist=gpu-01,gpu-02 ",
                           "--kill-on-bad-exit=0 ", "-p gpu /opt/dsdoctor agent ",
                           "--mpi-nodes gpu-01=gpu-01,gpu-02=gpu-02 ", "--listen mpi:47000 ", "--token-file - "})
    EXPECT_NE(line.find(want), std::string::npos) << want << " in " << line;
}

// Started through a stand-in srun (a script that reads its stdin as the agents would and answers
// with a ready line): the token arrives on srun's stdin, and no token file exists while it starts.
TEST(SlurmLauncherTest, TheTokenTravelsOnSrunsStdinAndNoFileIsWritten) {
  const std::string dir = std::filesystem::temp_directory_path() / ("fake_srun_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic(dir + "/srun",
                              "#!/bin/sh\n"
                              "read token\n"
                              "echo \"$token $(ls -d /tmp/dsdoctor-srun-* 2>/dev/null | wc -l)\" > " +
                                  dir +
                                  "/record\n"
                                  "echo 'DSDOCTOR_AGENT_READY name=gpu-01 addr=127.0.0.1 port=4100 pid=1'\n"
                                  "cat > /dev/null\n")
                  .ok());
  ::chmod((dir + "/srun").c_str(), 0755);
  SlurmLauncherOptions o;
  o.srun = dir + "/srun";
  o.dsdoctor_binary = "/opt/dsdoctor";
  SlurmLauncher launcher(o);
  auto handles = launcher.Start({NodePlan{"gpu-01", {0}}}, "s3cret");
  ASSERT_EQ(handles.size(), 1u);
  EXPECT_EQ(handles[0].error, "");
  EXPECT_EQ(handles[0].endpoint.port, 4100);
  launcher.Stop();
  EXPECT_EQ(ReadFile(dir + "/record").value_or(""), "s3cret 0\n");
  std::filesystem::remove_all(dir);
}

TEST(SlurmLauncherTest, FailedNodesComeFromSrunsErrors) {
  SlurmLauncher launcher({});
  auto failed = launcher.FailedNodes(
      "srun: error: node-1: task 1: Exited with exit code 2\n"
      "srun: error: Task launch for StepId=12.0 failed on node node-3: Invalid node name specified\n"
      "srun: error: Unable to create step for job 12: Requested node configuration is not available\n"
      "some other line\n");
  EXPECT_EQ(failed, (std::set<std::string>{"node-1", "node-3"}));
}

}  // namespace
}  // namespace dsd::coordinator
