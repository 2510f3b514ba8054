// AgentSource against a real in-process agent running real rank processes: what each Tick leaves
// in the job's rank states (read out of the rank's delta reader once per tick).
#include "coordinator/rank_source.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "agent/agent.h"
#include "agent/client.h"
#include "common/clock.h"
#include "common/file.h"
#include "probe/inventory.h"

namespace dsd::coordinator {
namespace {

class AgentSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agent::AgentOptions o;
    o.listen_addr = "127.0.0.1";
    o.token = token_;
    o.name = "node-0";
    agent_ = std::make_unique<agent::Agent>(o, &inventory_);
    ASSERT_TRUE(agent_->Bind().ok());
    thread_ = std::thread([this] { (void)agent_->Run(); });
  }
  void TearDown() override {
    source_.reset();  // its readers end with their links
    agent_->Stop();
    thread_.join();
    std::filesystem::remove_all(logs_);
  }
  // Ticks until `done` holds for the job's ranks or 10 s pass.
  template <typename Pred>
  bool TickUntil(Pred done) {
    for (int i = 0; i < 200; ++i) {
      source_->Tick(0, ranks_, logs_text_);
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  const std::string token_ = std::string(64, 'c');
  const std::string logs_ = std::filesystem::temp_directory_path() / ("dsd-source-" + std::to_string(::getpid()));
  probe::FakeInventorySource inventory_;
  std::unique_ptr<agent::Agent> agent_;
  std::thread thread_;
  std::unique_ptr<AgentSource> source_;
  std::vector<diagnosis::RankState> ranks_ = std::vector<diagnosis::RankState>(2);
  std::vector<std::string> logs_text_ = std::vector<std::string>(2);
};

TEST_F(AgentSourceTest, EachTickTakesTheAgentsStateAndKeepsTheCoordinatorsOwn) {
  auto c = agent::AgentClient::Connect({"127.0.0.1", agent_->port()}, token_, std::chrono::seconds(5));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<agent::AgentClient> clients;
  clients.push_back(std::move(*c));
  AgentSourceOptions options;
  options.sample_period = std::chrono::milliseconds(50);
  source_ = std::make_unique<AgentSource>(options, &RealClock::Instance());
  RunSpec spec;
  spec.nodes.nodes.push_back({"node-0", {0, 1}});
  spec.command = {"sleep", "30"};
  spec.run_dir = RunDir(logs_);
  spec.run_id = "test-run";
  spec.trace_python = false;
  spec.ranks = PlanRanks(spec.nodes, {}, "127.0.0.1", 29500);
  // The run dir is ours and the agent's (one machine): it finds the run id, and nothing is mirrored.
  std::filesystem::create_directories(logs_);
  ASSERT_TRUE(WriteFileAtomic(spec.run_dir.RunId(), spec.run_id + "\n").ok());
  ASSERT_TRUE(source_->Start(std::move(clients), spec).ok());
  ASSERT_TRUE(TickUntil([&] {
    return ranks_[0].status == diagnosis::RankStatus::kRunning && ranks_[1].status == diagnosis::RankStatus::kRunning;
  }));
  for (const auto& r : ranks_) {
    EXPECT_GT(r.pid, 0);
    EXPECT_EQ(r.node, "node-0");
    EXPECT_GT(r.sample_ns, 0) << "when the agent read it";
  }
  EXPECT_EQ(ranks_[1].rank, 1);
  // A stack the coordinator captured, and its judgement that the agent was lost, are its own: a
  // sample without them leaves them.
  ranks_[0].stack = "main (train.py:3)";
  ranks_[0].unobserved = true;
  const int64_t seen = ranks_[0].sample_ns;
  ASSERT_TRUE(TickUntil([&] { return ranks_[0].sample_ns > seen; })) << "newer samples arrive";
  EXPECT_EQ(ranks_[0].stack, "main (train.py:3)");
  EXPECT_TRUE(ranks_[0].unobserved);
  EXPECT_TRUE(ranks_[1].stack.empty());
  source_->Signal(SIGKILL);
  ASSERT_TRUE(TickUntil([&] {
    return ranks_[0].status == diagnosis::RankStatus::kExited && ranks_[1].status == diagnosis::RankStatus::kExited;
  }));
  EXPECT_EQ(ranks_[0].signal, SIGKILL);
  EXPECT_EQ(ranks_[1].signal, SIGKILL);
  // The agent's sample frames, and every entry in them, were read in place, never as JSON trees.
  const auto reads = source_->sample_reads();
  EXPECT_GE(reads.frames_in_place, 3u);  // ranks running, a newer sample, ranks exited: 3 frames at least
  EXPECT_EQ(reads.frames_parsed, 0u);
  EXPECT_GE(reads.entries_in_place, 2 * reads.frames_in_place);
  EXPECT_EQ(reads.entries_parsed, 0u);
}

}  // namespace
}  // namespace dsd::coordinator
