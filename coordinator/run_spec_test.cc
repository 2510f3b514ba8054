#include "coordinator/run_spec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "common/file.h"
#include "common/strings.h"
#include "coordinator/mpi_ranks.h"

namespace dsd::coordinator {
namespace {

namespace fs = std::filesystem;

RunPlanOptions Local(int nodes, int slots) {
  RunPlanOptions o;
  o.nodes.local = nodes;
  o.nodes.local_slots = slots;
  o.command = {"python3", "train.py"};
  o.log_dir = "logs-of-this-test";
  return o;
}

TEST(RunSpecTest, APlanHoldsEveryRanksLaunchAndTheRunsChoices) {
  auto o = Local(2, 2);
  o.timeout_s = 45;
  auto s = PlanRun(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->launcher, "local");
  EXPECT_TRUE(s->simulated);
  EXPECT_TRUE(s->python);
  EXPECT_TRUE(s->trace_python);
  EXPECT_TRUE(s->stop_on_hang);
  EXPECT_EQ(s->run_dir.path(), (fs::current_path() / "logs-of-this-test").string()) << "absolute";
  EXPECT_EQ(s->run_id.size(), 32u);
  EXPECT_EQ(s->master_addr, "127.0.0.2") << "the first local agent's address";
  EXPECT_GT(s->master_port, 0) << "a free port";
  ASSERT_EQ(s->ranks.ranks.size(), 4u);
  auto node1 = s->NodeRanks(1);
  ASSERT_EQ(node1.size(), 2u);
  EXPECT_EQ(node1[0].rank, 2);
  EXPECT_EQ(s->ranks.RankEnv(node1[1]).at("LOCAL_RANK"), "1");
  EXPECT_EQ(s->ranks.RankEnv(node1[1]).at("MASTER_PORT"), std::to_string(s->master_port));
  EXPECT_EQ(s->env.at("DSDOCTOR_TIMEOUT"), "45");
  EXPECT_EQ(s->env.at("PYTHONUNBUFFERED"), "1");
  EXPECT_EQ(s->env.at("NCCL_DEBUG"), "WARN") << "the diagnostic profile";
  EXPECT_EQ(s->stop_escalation, std::chrono::seconds(3));
  // A dry run starts nothing: no port picked, no run id.
  o.dry_run = true;
  auto dry = PlanRun(o);
  ASSERT_TRUE(dry.ok());
  EXPECT_EQ(dry->master_port, 0);
  EXPECT_TRUE(dry->run_id.empty());
}

TEST(RunSpecTest, TheTuiWaitsOnAHangAndFlagsAreKept) {
  auto o = Local(1, 1);
  o.tui = true;
  o.trace = false;
  o.share_group = true;
  auto s = PlanRun(o);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->stop_on_hang) << "--tui shows a hang until q";
  EXPECT_FALSE(s->trace_python);
  EXPECT_EQ(s->env.at("DSDOCTOR_TRACE_MODE"), "0640");
  o.on_hang = "stop";
  EXPECT_TRUE(PlanRun(o)->stop_on_hang);
}

TEST(RunSpecTest, MasterAddressAndLauncherFollowTheNodes) {
  RunPlanOptions o;
  o.command = {"./train"};
  o.agents = {{"198.18.0.10", 47000}, {"198.18.0.11", 47000}};
  o.nodes.attach_agents = 2;
  auto attached = PlanRun(o);
  ASSERT_TRUE(attached.ok());
  EXPECT_EQ(attached->launcher, "attach");
  EXPECT_EQ(attached->master_addr, "198.18.0.10");
  EXPECT_EQ(attached->master_port, 29500);
  o.master_addr = "10.0.0.1";
  o.master_port = 1234;
  EXPECT_EQ(PlanRun(o)->master_addr, "10.0.0.1");
  auto with_port = PlanRun(o);
  EXPECT_EQ(with_port->ranks.RankEnv(with_port->ranks.ranks[1]).at("MASTER_PORT"), "1234");
  auto direct = Local(1, 2);
  direct.direct = true;
  EXPECT_EQ(PlanRun(direct)->launcher, "direct");
  EXPECT_EQ(PlanRun(direct)->master_addr, "127.0.0.1");
}

TEST(RunSpecTest, DirectModeWithAHostfileIsRefused) {
  const std::string hostfile = fs::temp_directory_path() / ("dsd_spec_hosts_" + std::to_string(::getpid()));
  ASSERT_TRUE(WriteFileAtomic(hostfile, "w1 slots=2\nw2 slots=2\n").ok());
  RunPlanOptions o;
  o.nodes.hostfile = hostfile;
  o.direct = true;
  o.command = {"x"};
  auto s = PlanRun(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("--direct starts ranks on this machine only"), std::string::npos);
  o.direct = false;
  auto ssh = PlanRun(o);
  ASSERT_TRUE(ssh.ok());
  EXPECT_EQ(ssh->launcher, "ssh");
  EXPECT_EQ(ssh->master_addr, "w1");
  fs::remove(hostfile);
}

// One rule for "is it Python", by the program's name or its #! line, never a substring of a path.
TEST(RunSpecTest, PythonIsTheInterpreterNotAWordInAPath) {
  EXPECT_TRUE(IsPythonCommand({"python3", "train.py"}));
  EXPECT_TRUE(IsPythonCommand({"/opt/venv/bin/python3.11", "-m", "torch.distributed.run"}));
  EXPECT_TRUE(IsPythonCommand({"pypy3", "x.py"}));
  EXPECT_TRUE(IsPythonCommand({"/usr/bin/env", "-u", "PYTHONPATH", "OMP_NUM_THREADS=1", "python3", "x.py"}));
  EXPECT_TRUE(IsPythonCommand({"ipython", "x.ipy"}));
  EXPECT_FALSE(IsPythonCommand({"env", "FOO=1", "./train_healthy"}));
  EXPECT_FALSE(IsPythonCommand({"/home/u/python-projects/run.sh"}));
  EXPECT_FALSE(IsPythonCommand({"bash", "run_python.sh"}));
  EXPECT_FALSE(IsPythonCommand({}));
  const std::string dir = fs::temp_directory_path() / ("dsd_spec_py_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic(dir + "/train", "#!/usr/bin/env python3\nprint(1)\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/job.sh", "#!/bin/sh\npython3 train.py\n").ok());
  ::chmod((dir + "/train").c_str(), 0755);
  EXPECT_TRUE(IsPythonCommand({dir + "/train"}));
  EXPECT_FALSE(IsPythonCommand({dir + "/job.sh"}));
  fs::remove_all(dir);
}

// An MPI program is found by what it links (DT_NEEDED libmpi), or by the mpi4py a script imports;
// --trace-mpi and --no-mpi decide for any other.
TEST(RunSpecTest, AnMpiProgramLinksLibmpiOrImportsMpi4py) {
  const auto needed = ElfNeeded(MPI_PROGRAM);
  EXPECT_NE(std::find(needed.begin(), needed.end(), "libmpi.so.40"), needed.end());
  EXPECT_TRUE(IsMpiCommand({MPI_PROGRAM, "healthy"}));
  EXPECT_TRUE(IsMpiCommand({"python3", "-u", MPI4PY_SCRIPT, "healthy"}));
  EXPECT_TRUE(IsMpiCommand({"python3", "-W", "ignore", MPI4PY_SCRIPT}));
  EXPECT_FALSE(IsMpiCommand({"/bin/sh", "-c", "true"}));
  // The bundled runtime links MPI beside Gloo and picks its backend at run time: env://, no mpirun.
  const auto runtime_needs = ElfNeeded(ENV_PROGRAM);
  ASSERT_NE(std::find(runtime_needs.begin(), runtime_needs.end(), "libmpi.so.40"), runtime_needs.end());
  EXPECT_FALSE(IsMpiCommand({ENV_PROGRAM}));
  EXPECT_TRUE(IsMpiCommand({"python3", "-m", "mpi4py", "x.py"}));
  EXPECT_FALSE(IsMpiCommand({"python3", "-m", "torch.distributed.run", "x.py"}));
  EXPECT_FALSE(IsMpiCommand({"python3", "no-such-script.py"}));
  EXPECT_FALSE(IsMpiCommand({}));
  // Whatever a file holds, it is read safely: a cut ELF, text, nothing.
  const std::string dir = fs::temp_directory_path() / ("dsd_spec_mpi_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string elf = ReadFile(MPI_PROGRAM, 1 << 30).value_or("");
  for (size_t cut : {size_t{0}, size_t{4}, size_t{64}, size_t{200}, elf.size() / 2}) {
    ASSERT_TRUE(WriteFileAtomic(dir + "/cut", elf.substr(0, cut)).ok());
    EXPECT_NO_FATAL_FAILURE(ElfNeeded(dir + "/cut")) << cut;
  }
  ASSERT_TRUE(WriteFileAtomic(dir + "/train.py", "import torch\nprint('no MPI here')\n").ok());
  EXPECT_FALSE(IsMpiCommand({"python3", dir + "/train.py"}));
  EXPECT_TRUE(ElfNeeded(dir + "/train.py").empty());

  auto o = Local(2, 2);
  o.command = {MPI_PROGRAM, "healthy"};
  auto s = PlanRun(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->mpi);
  o.mpi = "off";
  EXPECT_FALSE(PlanRun(o)->mpi);
  o.command = {"python3", dir + "/train.py"};
  o.mpi = "on";
  EXPECT_TRUE(PlanRun(o)->mpi);
  o.direct = true;
  o.mpi = "";
  o.command = {MPI_PROGRAM};
  EXPECT_FALSE(PlanRun(o)->mpi) << "--direct runs a program it takes for MPI as singletons";
  o.mpi = "on";
  auto direct = PlanRun(o);
  ASSERT_FALSE(direct.ok());
  EXPECT_NE(direct.status().message().find("--direct"), std::string::npos);
  fs::remove_all(dir);
}

// mpirun puts rank r where the plan put it: --map-by slot over the nodes' slot counts, and each
// shim finds its node's agent from the same counts.
TEST(RunSpecTest, TheMpiRanksCommandPlacesEachRankOnItsPlannedNode) {
  auto o = Local(2, 3);
  o.command = {"./prog", "--flag"};
  o.mpi = "on";
  auto s = PlanRun(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  MpiRanksOptions m;
  m.dsdoctor_binary = "/opt/dsdoctor/bin/dsdoctor";
  m.extra_args = {"--mca", "btl", "tcp,self"};
  auto joined = Join(MpiRanksCommand(*s, m), " ");
  const std::string sockets = "3:dsdoctor-rank-exec/" + s->run_id + "/0,3:dsdoctor-rank-exec/" + s->run_id + "/1";
  EXPECT_NE(
      joined.find("-np 6 --bind-to none --map-by slot --host localhost:6 --wdir " + s->cwd +
                  " --mca btl tcp,self /opt/dsdoctor/bin/dsdoctor rank-exec --nodes " + sockets + " -- ./prog --flag"),
      std::string::npos)
      << joined;
  s->simulated = false;  // real nodes: each by its name and slot count
  joined = Join(MpiRanksCommand(*s, m), " ");
  EXPECT_NE(joined.find("--host " + s->nodes.nodes[0].host + ":3," + s->nodes.nodes[1].host + ":3 "), std::string::npos)
      << joined;
}

TEST(JobEnvTest, OnlyTheNamedFamiliesTravelAndDeepSpeedEnvWins) {
  const EnvMap shell = {{"NCCL_SOCKET_IFNAME", "eth0"},
                        {"GLOO_SOCKET_IFNAME", "eth0"},
                        {"TORCH_NCCL_BLOCKING_WAIT", "1"},
                        {"PYTHONPATH", "/src"},
                        {"UCX_TLS", "tcp"},
                        {"DSDOCTOR_TIMEOUT", "30"},
                        {"HOME", "/root"},
                        {"SSH_AUTH_SOCK", "/tmp/agent"},
                        {"CUDA_VISIBLE_DEVICES", "0"},
                        {"DSDOCTOR_TRACE_FILE", "/x"}};
  const EnvMap env = JobEnvironment(shell, {{"NCCL_SOCKET_IFNAME", "ib0"}, {"CUSTOM", "1"}});
  EXPECT_EQ(env, (EnvMap{{"NCCL_SOCKET_IFNAME", "ib0"},
                         {"GLOO_SOCKET_IFNAME", "eth0"},
                         {"TORCH_NCCL_BLOCKING_WAIT", "1"},
                         {"PYTHONPATH", "/src"},
                         {"UCX_TLS", "tcp"},
                         {"DSDOCTOR_TIMEOUT", "30"},
                         {"CUSTOM", "1"}}));
  for (const auto& f : JobEnvFamilies()) EXPECT_FALSE(f.why.empty()) << f.prefix << " is explained";
}

}  // namespace
}  // namespace dsd::coordinator
