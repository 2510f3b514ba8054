#include "coordinator/plan.h"

#include <gtest/gtest.h>

namespace dsd::coordinator {
namespace {

TEST(PlanTest, RanksGetDeepSpeedsEnvironmentNodeAfterNode) {
  JobNodes nodes{"hf", false, {{"w1", {0, 2}}, {"w2", {1}}}, {}};
  RankPlan p = PlanRanks(nodes, {}, "w1", 29500);
  ASSERT_EQ(p.ranks.size(), 3u);
  const RankLaunch& r1 = p.ranks[1];
  EXPECT_EQ(r1.node, "w1");
  const auto e1 = p.RankEnv(r1);
  EXPECT_EQ(e1.at("RANK"), "1");
  EXPECT_EQ(e1.at("LOCAL_RANK"), "1");
  EXPECT_EQ(e1.at("CUDA_VISIBLE_DEVICES"), "0,2");
  EXPECT_EQ(e1.at("WORLD_SIZE"), "3");
  EXPECT_EQ(e1.at("LOCAL_SIZE"), "2");
  const RankLaunch& r2 = p.ranks[2];
  const auto e2 = p.RankEnv(r2);
  EXPECT_EQ(r2.node_index, 1);
  EXPECT_EQ(r2.local_rank, 0);
  EXPECT_EQ(e2.at("CROSS_RANK"), "1");
  EXPECT_EQ(e2.at("CROSS_SIZE"), "2");
  EXPECT_EQ(e2.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(e2.at("MASTER_ADDR"), "w1");
  EXPECT_EQ(e2.at("MASTER_PORT"), "29500");
  // Agents' names, when given, are what reports call the nodes.
  RankPlan named = PlanRanks(nodes, {"node-a", "node-b"}, "w1", 1);
  EXPECT_EQ(named.RankEnv(named.ranks[2]).at("DSDOCTOR_NODE"), "node-b");
  // What differs between a node's ranks is each rank's own; the rest is the node's, once.
  EXPECT_EQ(RankPlan::OwnEnv(r1), (std::map<std::string, std::string>{{"LOCAL_RANK", "1"}, {"RANK", "1"}}));
  ASSERT_EQ(p.node_env.size(), 2u);
  EXPECT_EQ(p.node_env[0].count("RANK"), 0u);
}

// The plan holds a node's slot list once, not once per rank: 64 hosts of 4,096 slots plan in a few
// MB (the per-rank copies made it grow as nodes x slots^2).
TEST(PlanTest, APlanIsLinearInTheSlotsPlanned) {
  JobNodes nodes{"hf", false, {}, {}};
  std::vector<int> slots(4096);
  for (int i = 0; i < 4096; ++i) slots[static_cast<size_t>(i)] = i;
  for (int h = 0; h < 64; ++h) nodes.nodes.push_back({"h" + std::to_string(h), slots});
  RankPlan p = PlanRanks(nodes, {}, "h0", 29500);
  ASSERT_EQ(p.ranks.size(), 64u * 4096u);
  size_t bytes = 0;
  for (const auto& env : p.node_env)
    for (const auto& [k, v] : env) bytes += k.size() + v.size();
  for (const auto& l : p.ranks) bytes += sizeof l + l.node.size();
  EXPECT_LT(bytes, 64u << 20) << "the plan's strings and ranks";
  EXPECT_EQ(p.RankEnv(p.ranks.back()).at("CUDA_VISIBLE_DEVICES").size(), SlotList(slots).size());
}

TEST(PlanTest, LocalNodesAreSimulatedWithTheirSlots) {
  auto n = PlanJobNodes({.local = 3, .local_slots = 2});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_TRUE(n->simulated);
  EXPECT_EQ(n->source, "--local 3");
  EXPECT_EQ(n->world_size(), 6);
  EXPECT_EQ(n->nodes[2].host, "node-2");
  auto filtered = PlanJobNodes({.local = 3, .local_slots = 2, .filters = {.exclude = "node-1:0"}});
  ASSERT_TRUE(filtered.ok());
  EXPECT_EQ(filtered->world_size(), 5);
}

TEST(PlanTest, SourcesAndTheirErrors) {
  EXPECT_FALSE(PlanJobNodes({.hostfile = "/etc/hostname", .local = 2}).ok());
  auto none = PlanJobNodes({.this_node = "me", .this_node_slots = 2, .filters = {.num_nodes = 2}});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("Num nodes is >1 but no extra nodes"), std::string::npos);
  auto attach = PlanJobNodes({.attach_agents = 2});
  ASSERT_TRUE(attach.ok());
  EXPECT_EQ(attach->nodes[1].host, "node-1");
  auto missing = PlanJobNodes({.hostfile = "/nonexistent/hostfile"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/hostfile"), std::string::npos);
}

TEST(PlanTest, JsonAndTextAgree) {
  JobNodes nodes{"hf", false, {{"w1", {0, 2}}, {"w2", {1}}}, {"a note"}};
  RankPlan p = PlanRanks(nodes, {}, "w1", 0);
  auto j = PlanJson(nodes, p, "pdsh");
  EXPECT_EQ(j["nodes"][0]["ranks"], nlohmann::json({0, 1}));
  EXPECT_EQ(j["nodes"][1]["cuda_visible_devices"], "1");
  EXPECT_EQ(j["notes"][0], "a note");
  std::string t = PlanText(nodes, p, "pdsh");
  EXPECT_NE(t.find("Plan: 2 nodes, 3 ranks from hf, launcher pdsh"), std::string::npos) << t;
  EXPECT_NE(t.find("master w1:(a free port at start)"), std::string::npos) << t;
  EXPECT_NE(t.find("  1     w2    2          1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("  note: a note"), std::string::npos) << t;
}

}  // namespace
}  // namespace dsd::coordinator
