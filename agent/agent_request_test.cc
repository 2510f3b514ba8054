// An authenticated request with bad arguments gets an error reply; the agent stays up.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "agent/agent.h"
#include "agent/client.h"
#include "agent/run_protocol.h"
#include "common/net.h"

namespace dsd::agent {
namespace {

class AgentRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AgentOptions o;
    o.listen_addr = "127.0.0.1";
    o.token = token_;
    o.name = "node-0";
    agent_ = std::make_unique<Agent>(o, &inventory_);
    ASSERT_TRUE(agent_->Bind().ok());
    thread_ = std::thread([this] { (void)agent_->Run(); });
  }
  void TearDown() override {
    agent_->Stop();
    thread_.join();
  }
  Result<nlohmann::json> Call(const nlohmann::json& request) {
    auto c = AgentClient::Connect({"127.0.0.1", agent_->port()}, token_, std::chrono::seconds(5));
    if (!c.ok()) return c.status();
    return c->Call(request, std::chrono::seconds(10));
  }

  const std::string token_ = std::string(64, 'b');
  probe::FakeInventorySource inventory_;
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
};

TEST_F(AgentRequestTest, BadArgumentsAreErrorsAndTheAgentStaysUp) {
  struct Bad {
    nlohmann::json request;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {{{"type", "listen"}, {"port", 70000}}, "listen: field 'port' must be an integer in 0..65535"},
      {{{"type", "allreduce"}, {"backend", "nccl"}, {"sizes", {1024}}, {"first_rank", 0}, {"gpus", -1}, {"size", 2}},
       "field 'gpus' must be an integer in 1..64"},
      {{{"type", "allreduce"},
        {"sizes", {1024}},
        {"rank", 5},
        {"size", 2},
        {"store", {{"host", "127.0.0.1"}, {"port", 1}}}},
       "rank 5 of size 2"},
      {{{"type", "allreduce"}, {"sizes", nlohmann::json::array({0})}, {"rank", 0}, {"size", 1}},
       "field 'sizes' must be a list"},
      {{{"type", "ping"}, {"targets", {{{"host", "x"}}}}}, "ping.targets[0]: not a [host, port] pair"},
      {{{"type", "launch_missiles"}}, "unknown request type 'launch_missiles'"},
  };
  for (const auto& c : cases) {
    auto r = Call(c.request);
    ASSERT_FALSE(r.ok()) << c.request.dump();
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.request.dump() << ": " << r.status().message();
  }
  auto inv = Call({{"type", "inventory"}});
  EXPECT_TRUE(inv.ok()) << inv.status().ToString();
}

// A coordinator that refused a rank's delta sends "resync": that rank's next entry is a keyframe,
// the other rank's stay deltas.
TEST_F(AgentRequestTest, AResyncMakesThatRanksNextSampleAKeyframe) {
  const std::string logs = std::filesystem::temp_directory_path() / ("dsd-resync-" + std::to_string(::getpid()));
  auto c = AgentClient::Connect({"127.0.0.1", agent_->port()}, token_, std::chrono::seconds(5));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  RunRequest run;
  run.argv = {"sleep", "30"};
  run.run_dir = logs;
  run.sample_ms = 50;
  run.trace_python = false;
  run.ranks = {{0, 0, {}}, {1, 1, {}}};
  ASSERT_TRUE(net::SendFrame(c->link(), WriteRunRequest(run)).ok());
  auto started = net::RecvFrame(c->link(), c->decoder(), std::chrono::seconds(10));
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  ASSERT_EQ((*started)["type"], "started") << started->dump();
  // Each sample: rank -> whether its entry was a keyframe.
  auto next_sample = [&]() -> std::map<int, bool> {
    for (int i = 0; i < 100; ++i) {
      auto m = net::RecvFrame(c->link(), c->decoder(), std::chrono::seconds(5));
      if (!m.ok()) return {};
      if (m->value("type", "") != "sample") continue;
      std::map<int, bool> full;
      for (const auto& e : (*m)["ranks"]) full[e["rank"].get<int>()] = e.value("full", false);
      return full;
    }
    return {};
  };
  EXPECT_EQ(next_sample(), (std::map<int, bool>{{0, true}, {1, true}})) << "first samples are keyframes";
  EXPECT_EQ(next_sample(), (std::map<int, bool>{{0, false}, {1, false}}));
  ASSERT_TRUE(net::SendFrame(c->link(), WriteRunControl(ResyncMessage{{1}})).ok());
  bool restated = false;
  for (int i = 0; i < 20 && !restated; ++i) {
    auto s = next_sample();
    ASSERT_EQ(s.size(), 2u);
    EXPECT_FALSE(s[0]) << "rank 0 was not asked for";
    restated = s[1];
  }
  EXPECT_TRUE(restated) << "rank 1 restated in full after the resync";
  ASSERT_TRUE(net::SendFrame(c->link(), WriteRunControl(StopMessage{9})).ok());
  for (int i = 0; i < 200; ++i) {
    auto m = net::RecvFrame(c->link(), c->decoder(), std::chrono::seconds(5));
    if (!m.ok() || m->value("type", "") == "done") break;
  }
  std::filesystem::remove_all(logs);
}

}  // namespace
}  // namespace dsd::agent
