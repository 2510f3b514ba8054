#include "coordinator/launcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "collectors/proc_stat.h"
#include "common/file.h"
#include "common/strings.h"

namespace dsd::coordinator {
namespace {

TEST(LauncherTest, ReadyLineIsFoundBehindPdshAndMpirunPrefixes) {
  auto r = ParseReadyLine("worker-1: DSDOCTOR_AGENT_READY name=worker-1 addr=worker-1 port=4100 pid=77");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->name, "worker-1");
  EXPECT_EQ(r->port, 4100);
  EXPECT_FALSE(ParseReadyLine("worker-1: DSDOCTOR_AGENT_READY name=worker-1 addr=worker-1").has_value());
  EXPECT_FALSE(ParseReadyLine("worker-1: ssh: connect to host worker-1 port 22: No route to host").has_value());
}

TEST(LauncherTest, ShellQuoteLeavesPdshPlaceholdersBare) {
  EXPECT_EQ(ShellQuote("%h:0"), "%h:0");
  EXPECT_EQ(ShellQuote("/opt/ds doctor/bin"), "'/opt/ds doctor/bin'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

// DeepSpeed's PDSHRunner: `pdsh -S -f 1024 -w HOSTS …` over ssh; each agent binds to the name pdsh puts for %h.
TEST(LauncherTest, PdshCommandStartsOneAgentPerHostWithItsName) {
  PdshLauncherOptions o;
  o.remote_dsdoctor = "/opt/dsdoctor";
  o.ssh_args = {"-p", "2222"};
  o.agent_port = 7000;
  o.log_level = "debug";
  PdshLauncher l(o);
  auto c = l.PdshCommand({"worker-0", "worker-1"}, "/shared/tok/token");
  EXPECT_EQ(Join(c.argv, " "),
            "pdsh -S -f 1024 -R ssh -w worker-0,worker-1 exec /opt/dsdoctor --log-level debug agent --listen %h:7000 "
            "--token-file /shared/tok/token --name %h --exit-with-coordinator");
  ASSERT_EQ(c.env.size(), 1u);
  EXPECT_EQ(c.env[0].first, "PDSH_SSH_ARGS_APPEND");
  EXPECT_EQ(c.env[0].second, "-o BatchMode=yes -o ConnectTimeout=10 -p 2222");
}

// pdsh goes on with the other hosts when one fails: its stderr says which, so the wait ends early.
TEST(LauncherTest, PdshStderrNamesTheFailedHosts) {
  PdshLauncher l({});
  auto failed = l.FailedNodes(
      "worker-2: ssh: connect to host worker-2 port 22: Connection refused\n"
      "pdsh@launch: worker-2: ssh exited with exit code 255\n"
      "pdsh@launch: worker-3: connect: Connection timed out\n"
      "worker-1: some agent log line\n");
  EXPECT_EQ(failed, (std::set<std::string>{"worker-2", "worker-3"}));
}

TEST(LauncherTest, MpirunOnSimulatedNodesUsesLocalhostSlots) {
  MpirunLauncherOptions o;
  o.mpirun = "mpirun";
  o.dsdoctor_binary = "/bin/dsdoctor";
  o.simulated = true;
  MpirunLauncher l(o);
  std::string cmd = Join(l.MpirunCommand({{"node-0", "127.0.0.2"}, {"node-1", "127.0.0.3"}}, "/tmp/t"), " ");
  EXPECT_NE(cmd.find("-np 2 --bind-to none --map-by node --host localhost:2"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("agent --mpi-nodes node-0=127.0.0.2,node-1=127.0.0.3 --listen mpi:0 --token-file /tmp/t"),
            std::string::npos)
      << cmd;
}

// A stand-in for dsdoctor's main in a forked local agent. The port of its ready line carries what
// it found: bit 0 the argv an exec would get, bit 1 the coordinator's other descriptors closed,
// bit 2 the coordinator's signal handler gone, bit 3 the token on stdin. Then it waits for stdin
// to close, as `agent --exit-with-coordinator` does.
std::string g_binary;
int g_coordinator_fd = -1;
void OnUsr1(int) {}

int FakeAgentMain(int argc, char** argv) {
  int bits = 0;
  std::vector<std::string> args(argv, argv + argc);
  if (argv[argc] == nullptr && args.size() == 9 && args[0] == g_binary && args[1] == "agent" &&
      args[3].rfind("127.0.0.", 0) == 0 && args[8] == "--exit-with-coordinator")
    bits |= 1;
  if (::fcntl(g_coordinator_fd, F_GETFD) == -1 && errno == EBADF) bits |= 2;
  struct sigaction sa {};
  if (::sigaction(SIGUSR1, nullptr, &sa) == 0 && sa.sa_handler == SIG_DFL) bits |= 4;
  std::string token;
  char c;
  while (::read(0, &c, 1) == 1 && c != '\n') token += c;
  if (token == "secret") bits |= 8;
  std::printf("DSDOCTOR_AGENT_READY name=%s addr=127.0.0.2 port=%d pid=%d\n", args[7].c_str(), 40000 + bits,
              static_cast<int>(::getpid()));
  std::fflush(stdout);
  while (::read(0, &c, 1) == 1) {
  }
  return 0;
}

TEST(LocalLauncherTest, AgentsAreForksThatRunMainAsAnExecWould) {
  auto stat = collectors::ReadProcStat(::getpid(), /*with_wchan=*/false);
  ASSERT_TRUE(stat.ok()) << stat.status().ToString();
  if (stat->num_threads != 1) GTEST_SKIP() << "another thread is running: agents would be exec'd (this binary)";
  if (!AgentsAreForked()) GTEST_SKIP() << "sanitizer build: agents are exec'd";
  char self[4096] = {};
  ASSERT_GT(::readlink("/proc/self/exe", self, sizeof self - 1), 0);
  g_binary = self;
  g_coordinator_fd = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC: only an exec would close it
  struct sigaction usr1 {
  }, old{};
  usr1.sa_handler = OnUsr1;
  ::sigaction(SIGUSR1, &usr1, &old);
  LocalLauncherOptions o;
  o.dsdoctor_binary = g_binary;
  o.in_process = FakeAgentMain;
  {
    LocalLauncher launcher(o);
    auto handles = launcher.Start({{"node-0", {0}}, {"node-1", {0}}}, "secret");
    ASSERT_EQ(handles.size(), 2u);
    for (const auto& h : handles) {
      EXPECT_EQ(h.error, "") << h.name;
      EXPECT_EQ(h.endpoint.port, 40000 + 15) << h.name;
      EXPECT_GT(h.pid, 0);
    }
    EXPECT_EQ(handles[1].endpoint.host, "127.0.0.3");
    // ps and pgrep -f show each agent's command, as if exec'd.
    auto read = ReadFile("/proc/" + std::to_string(handles[1].pid) + "/cmdline");
    std::string cmdline = read.ok() ? *read : "";
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    EXPECT_NE(cmdline.find(g_binary + " agent --listen 127.0.0.3:0 --token-file - --name node-1"), std::string::npos)
        << cmdline;
  }  // Stop(): stdin closes and each child exits
  ::sigaction(SIGUSR1, &old, nullptr);
  ::close(g_coordinator_fd);
}

struct BadChoice {
  std::string name;
  LauncherChoice choice;
  size_t nodes;
  std::string message;
};
void PrintTo(const BadChoice& c, std::ostream* os) { *os << c.name; }
class MakeLauncherErrorTest : public ::testing::TestWithParam<BadChoice> {};

TEST_P(MakeLauncherErrorTest, IsAUsageError) {
  auto s = MakeLauncher(GetParam().choice, GetParam().nodes);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(GetParam().message), std::string::npos) << s.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, MakeLauncherErrorTest,
    ::testing::Values(
        BadChoice{"SshLocal", {.kind = "ssh", .simulated = true}, 2, "--launcher ssh needs a hostfile"},
        BadChoice{"PdshLocal", {.kind = "pdsh", .simulated = true}, 2, "--launcher pdsh needs a hostfile"},
        BadChoice{"AttachNoAgents", {.kind = "attach"}, 2, "needs --agents"},
        BadChoice{"AttachCount", {.kind = "attach", .agents = {{"a", 1}}}, 2, "--agents lists 1 agents for 2 nodes"},
        BadChoice{"SlurmLocal", {.kind = "slurm", .simulated = true}, 2, "--launcher slurm needs the nodes of a Slurm"},
        BadChoice{"Unknown", {.kind = "condor"}, 2, "unknown --launcher 'condor'"}),
    [](const auto& info) { return info.param.name; });

TEST(LauncherTest, EveryLauncherKindIsMade) {
  for (const char* kind : {"local", "ssh", "pdsh", "mpirun", "slurm"}) {
    auto s = MakeLauncher({.kind = kind, .self_binary = "/bin/dsdoctor"}, 2);
    ASSERT_TRUE(s.ok()) << kind << ": " << s.status().ToString();
    EXPECT_NE(s->launcher, nullptr);
    EXPECT_EQ(s->token.size(), 64u) << "a fresh token";
  }
}

}  // namespace
}  // namespace dsd::coordinator

namespace dsd::coordinator {
namespace {

// 16,000 agents exceed the kernel's 128 KiB limit for one argument: --agents @FILE reads them.
TEST(LauncherTest, AgentListFromAFileTakesLinesCommasAndCommentsAndNamesABadLine) {
  std::string path = std::filesystem::temp_directory_path() / ("dsd-agents-" + std::to_string(::getpid()));
  std::string text = "# the allocation's agents\n10.0.0.1:4790, 10.0.0.2:4790\n\n";
  for (int i = 0; i < 16000; ++i) text += "node-" + std::to_string(i) + ":4790\n";
  ASSERT_TRUE(WriteFileAtomic(path, text).ok());
  auto list = ParseAgentList("@" + path);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 16002u);
  EXPECT_EQ((*list)[1].host, "10.0.0.2");
  EXPECT_EQ(list->back().host, "node-15999");
  ASSERT_TRUE(WriteFileAtomic(path, "a:1\nb:2\nnot-an-endpoint\n").ok());
  auto bad = ParseAgentList("@" + path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path + ":3: 'not-an-endpoint'"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ParseAgentList("@/nonexistent/agents").ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dsd::coordinator
