#include "coordinator/check_session.h"

#include <gtest/gtest.h>

#include <thread>

#include "agent/agent.h"
#include "common/net.h"

namespace dsd::coordinator {
namespace {

// Hands out the endpoints the test chose; records the token and the stop.
class FakeLauncher final : public Launcher {
 public:
  std::vector<AgentHandle> Start(const std::vector<NodePlan>&, const std::string& token) override {
    token_seen = token;
    return handles;
  }
  void Stop() override { stopped = true; }
  bool simulated() const override { return true; }
  std::vector<AgentHandle> handles;
  std::string token_seen;
  bool stopped = false;
};

int FreePort() { return net::PickUnusedPort(); }

// Two real agents in this process (canned inventories), a third node its launcher could not start:
// the session probes the two, keeps the third's reason, tells the agents to exit and stops the launcher.
TEST(CheckSessionTest, ProbesStartedAgentsAndKeepsWhyTheOthersFailed) {
  const std::string token(64, 'a');
  probe::FakeInventorySource inventory;
  std::vector<std::unique_ptr<agent::Agent>> agents;
  std::vector<std::thread> threads;
  FakeLauncher launcher;
  for (const char* name : {"node-a", "node-b"}) {
    agent::AgentOptions o;
    o.listen_addr = "127.0.0.1";
    o.token = token;
    o.name = name;
    agents.push_back(std::make_unique<agent::Agent>(o, &inventory));
    ASSERT_TRUE(agents.back()->Bind().ok());
    launcher.handles.push_back({name, {"127.0.0.1", agents.back()->port()}, -1, -1, ""});
    agent::Agent* a = agents.back().get();
    threads.emplace_back([a] { (void)a->Run(); });
  }
  launcher.handles.push_back(
      {"node-c", {"node-c", 0}, -1, -1, "ssh: connect to host node-c port 22: No route to host"});
  JobNodes nodes{"hf", true, {{"node-a", {0}}, {"node-b", {0}}, {"node-c", {0, 1}}}, {"hf:3: 'x' is ignored"}};
  CheckSessionOptions o;
  o.bandwidth = false;
  o.master_port = FreePort();
  o.connect_timeout_ms = 1000;
  agent::ClusterCheckInput in = RunCheckSession(nodes, launcher, token, o);
  for (auto& t : threads) t.join();  // the agents exited on the session's shutdown requests
  EXPECT_TRUE(launcher.stopped);
  EXPECT_EQ(launcher.token_seen, token);
  ASSERT_EQ(in.nodes.size(), 3u);
  EXPECT_TRUE(in.nodes[0].error.empty()) << in.nodes[0].error;
  EXPECT_TRUE(in.nodes[0].report.is_object());
  EXPECT_EQ(in.nodes[2].error, "ssh: connect to host node-c port 22: No route to host");
  EXPECT_EQ(in.nodes[2].slots, 2);
  EXPECT_EQ(in.bandwidth.skipped, "--no-bandwidth");
  EXPECT_EQ(in.plan_notes, std::vector<std::string>{"hf:3: 'x' is ignored"});
  auto result = agent::EvaluateCluster(in);
  EXPECT_EQ(result.matrix["agent"][0][1].rfind("ok", 0), 0u) << result.matrix["agent"][0][1];
  EXPECT_EQ(result.matrix["rendezvous"].size(), 3u);
  std::vector<std::string> codes;
  for (const auto& f : result.findings) codes.push_back(f.code);
  EXPECT_NE(std::find(codes.begin(), codes.end(), "AGENT_UNREACHABLE"), codes.end());
  EXPECT_NE(std::find(codes.begin(), codes.end(), "LAUNCH_PLAN"), codes.end());
}

}  // namespace
}  // namespace dsd::coordinator
