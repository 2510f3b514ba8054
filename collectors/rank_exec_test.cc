#include "collectors/rank_exec.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "collectors/output_pump.h"
#include "common/file.h"

namespace dsd::collectors {
namespace {

namespace fs = std::filesystem;
using Kind = RankExecListener::Event::Kind;

std::string Unique(const std::string& what) {
  return "dsdoctor-test/" + what + "/" + std::to_string(::getpid()) + "/" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

// A connection to the listener as a raw client (no shim): what a confused or hostile process of
// the same user can send.
net::Fd Connect(const std::string& name) {
  auto fd = ConnectRankExec(name);
  EXPECT_TRUE(fd.ok()) << fd.status().ToString();
  return fd.ok() ? std::move(*fd) : net::Fd();
}

// Polls until `n` events came or `ms` passed.
std::vector<RankExecListener::Event> PollFor(RankExecListener& l, size_t n, const RankExecListener::GrantFn& grant,
                                             int ms = 10000) {
  std::vector<RankExecListener::Event> all;
  for (int i = 0; i < ms / 20 && all.size() < n; ++i) {
    for (auto& e : l.Poll(grant)) all.push_back(e);
    if (all.size() < n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return all;
}

TEST(RankExecTest, TheNodeListGivesEachRankItsNodesSocket) {
  auto nodes = ParseRankExecNodes("2:dsdoctor-rank-exec/r/0,3:dsdoctor-rank-exec/r/1");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  EXPECT_EQ(FormatRankExecNodes(*nodes), "2:dsdoctor-rank-exec/r/0,3:dsdoctor-rank-exec/r/1");
  EXPECT_EQ(RankExecSocketOf(*nodes, 0), "dsdoctor-rank-exec/r/0");
  EXPECT_EQ(RankExecSocketOf(*nodes, 1), "dsdoctor-rank-exec/r/0");
  EXPECT_EQ(RankExecSocketOf(*nodes, 2), "dsdoctor-rank-exec/r/1");
  EXPECT_EQ(RankExecSocketOf(*nodes, 4), "dsdoctor-rank-exec/r/1");
  EXPECT_EQ(RankExecSocketOf(*nodes, 5), "");
  EXPECT_EQ(RankExecSocketName("abc", 3), "dsdoctor-rank-exec/abc/3");
  for (const char* bad : {"", "2", "0:x", "x:y", "2:", "-1:x", "2:a,,3:b"}) {
    auto r = ParseRankExecNodes(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_NE(r.status().message().find("--nodes"), std::string::npos) << r.status().message();
  }
}

// The whole hand-over: the shim gets the rank's environment and output pipe, runs the program with
// them, says its pid and its exit, and ends as the program ended.
TEST(RankExecTest, AShimHandsItsProgramToTheAgentWithItsOutputAndExit) {
  const std::string dir = fs::temp_directory_path() / ("dsd-rank-exec-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto listener = RankExecListener::Listen(Unique("handover"), 2);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  OutputPump pump;
  size_t index = 0;
  RankExecOptions o;
  o.nodes = {{1, "nobody-listens-here"}, {1, (*listener)->name()}};
  o.argv = {"/bin/sh", "-c", "echo out-$FOO-$OMPI_FAKE_ID; echo err >&2; exit 3"};
  o.rank = 1;
  ::setenv("OMPI_FAKE_ID", "launcher", 1);
  auto shim = std::async(std::launch::async, [&] { return RunRankExec(o, stderr); });
  std::vector<int> asked;
  auto events = PollFor(**listener, 2, [&](int rank) -> Result<RankExecListener::Grant> {
    asked.push_back(rank);
    RankExecListener::Grant g;
    g.env = {{"FOO", "granted"}, {"OMPI_FAKE_ID", "not-the-launchers"}};
    DSD_ASSIGN_OR_RETURN(g.output, pump.Add(dir + "/rank-1.log", &index));
    return g;
  });
  const RankExecExit exit = shim.get();
  ::unsetenv("OMPI_FAKE_ID");
  EXPECT_EQ(asked, std::vector<int>{1});
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Kind::kStarted);
  EXPECT_EQ(events[0].rank, 1);
  EXPECT_GT(events[0].pid, 0);
  EXPECT_EQ(events[1].kind, Kind::kExited);
  EXPECT_EQ(events[1].exit_code, 3);
  EXPECT_EQ(events[1].signal, 0);
  EXPECT_EQ(exit.exit_code, 3);
  pump.Flush(index);
  // The grant adds to the launcher's variables; it never overrides them.
  EXPECT_EQ(ReadFile(dir + "/rank-1.log").value_or(""), "out-granted-launcher\nerr\n");
  fs::remove_all(dir);
}

TEST(RankExecTest, ASignalToTheShimReachesItsProgramAndTheShimReportsIt) {
  auto listener = RankExecListener::Listen(Unique("signal"), 1);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  OutputPump pump;
  size_t index = 0;
  const std::string log = fs::temp_directory_path() / ("dsd-rank-exec-sig-" + std::to_string(::getpid()) + ".log");
  RankExecOptions o;
  o.nodes = {{1, (*listener)->name()}};
  o.argv = {"/bin/sleep", "30"};
  o.rank = 0;
  auto shim = std::async(std::launch::async, [&] { return RunRankExec(o, stderr); });
  auto grant = [&](int) -> Result<RankExecListener::Grant> {
    RankExecListener::Grant g;
    DSD_ASSIGN_OR_RETURN(g.output, pump.Add(log, &index));
    return g;
  };
  auto started = PollFor(**listener, 1, grant);
  ASSERT_EQ(started.size(), 1u);
  ASSERT_EQ(started[0].kind, Kind::kStarted);
  // mpirun signals the process it started, our shim: the program gets it.
  ::kill(::getpid(), SIGUSR2);  // forwarded like SIGTERM; the test process ignores none of them
  auto ended = PollFor(**listener, 1, grant);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].kind, Kind::kExited);
  EXPECT_EQ(ended[0].signal, SIGUSR2);
  EXPECT_EQ(shim.get().signal, SIGUSR2);
  fs::remove(log);
}

TEST(RankExecTest, ARefusedRankRunsUnwatchedAndTheAgentSeesNothingOfIt) {
  auto listener = RankExecListener::Listen(Unique("refused"), 1);
  ASSERT_TRUE(listener.ok());
  RankExecOptions o;
  o.nodes = {{1, (*listener)->name()}};
  o.argv = {"/bin/sh", "-c", "exit 4"};
  o.rank = 0;
  auto shim = std::async(std::launch::async, [&] { return RunRankExec(o, stderr); });
  std::vector<RankExecListener::Event> events;
  while (shim.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready)
    for (auto& e : (*listener)->Poll([](int rank) -> Result<RankExecListener::Grant> {
           return InvalidArgument("rank " + std::to_string(rank) + " is not one of node-7's ranks");
         }))
      events.push_back(e);
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(shim.get().exit_code, 4) << "the job is never harmed: the program ran";
  // No agent at all: the same.
  o.nodes = {{1, Unique("nobody")}};
  EXPECT_EQ(RunRankExec(o, stderr).exit_code, 4);
}

TEST(RankExecTest, AConnectionThatIsNoShimIsDroppedAndAShimThatDiesIsLost) {
  auto listener = RankExecListener::Listen(Unique("raw"), 1);
  ASSERT_TRUE(listener.ok());
  auto grant = [](int) -> Result<RankExecListener::Grant> {
    RankExecListener::Grant g;
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    ::close(p[0]);
    g.output = net::Fd(p[1]);
    return g;
  };
  {
    net::Fd junk = Connect((*listener)->name());
    ASSERT_EQ(::send(junk.get(), "GET / HTTP/1.0\n", 15, MSG_NOSIGNAL), 15);
    net::Fd wrong_version = Connect((*listener)->name());
    ASSERT_EQ(::send(wrong_version.get(), "hello 99 0\n", 11, MSG_NOSIGNAL), 11);
    EXPECT_TRUE(PollFor(**listener, 1, grant, 500).empty());
    char reply[128] = {};
    ASSERT_GT(::recv(wrong_version.get(), reply, sizeof reply - 1, 0), 0);
    EXPECT_EQ(std::string(reply).rfind("no rank-exec protocol 99", 0), 0u) << reply;
    EXPECT_EQ(::recv(junk.get(), reply, sizeof reply, 0), 0) << "dropped without an answer";
  }
  // A shim killed after it started its program: its program died with it.
  net::Fd shim = Connect((*listener)->name());
  ASSERT_EQ(::send(shim.get(), "hello 1 0\n", 10, MSG_NOSIGNAL), 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (void)(*listener)->Poll(grant);
  ASSERT_EQ(::send(shim.get(), "started 4242\n", 13, MSG_NOSIGNAL), 13);
  auto started = PollFor(**listener, 1, grant);
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].pid, 4242);
  shim.Reset();
  auto lost = PollFor(**listener, 1, grant);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].kind, Kind::kLost);
  EXPECT_EQ(lost[0].rank, 0);
}

TEST(RankExecTest, ASecondListenerOnTheSameNameIsRefused) {
  auto first = RankExecListener::Listen(Unique("twice"), 1);
  ASSERT_TRUE(first.ok());
  auto second = RankExecListener::Listen(Unique("twice"), 1);
  EXPECT_FALSE(second.ok());
  EXPECT_FALSE(RankExecListener::Listen(std::string(200, 'x'), 1).ok());
}

}  // namespace
}  // namespace dsd::collectors
