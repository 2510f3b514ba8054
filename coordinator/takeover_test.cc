#include "coordinator/takeover.h"

#include <gtest/gtest.h>

namespace dsd::coordinator {
namespace {

Takeover ATakeover() {
  Takeover t;
  t.run_id = "run-1";
  t.command = {"python3", "train.py"};
  t.python = true;
  t.mpi = true;
  t.launcher = "ssh";
  t.timeout_s = 90;
  t.hang_after_s = 7;
  t.sample_ms = 250;
  t.stop_escalation_ms = 2000;
  t.nodes = {{"worker-1", "worker-1", {"10.0.0.1", 47000}, {{0, 0}, {1, 1}}},
             {"worker-2", "worker-2", {"10.0.0.2", 47001}, {{2, 0}, {3, 1}}}};
  return t;
}

TEST(TakeoverTest, ReadsBackAsWrittenAndGivesTheFirstCoordinatorsLayout) {
  auto back = ParseTakeover(TakeoverJson(ATakeover()).dump(), "agents.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->run_id, "run-1");
  EXPECT_EQ(back->nodes.size(), 2u);
  EXPECT_EQ(back->nodes[1].endpoint.port, 47001);
  RunSpec spec = SpecOfTakeover(*back, RunDir("/tmp/run"));
  EXPECT_EQ(spec.nodes.world_size(), 4);
  ASSERT_EQ(spec.ranks.ranks.size(), 4u);
  EXPECT_EQ(spec.ranks.ranks[3].node_index, 1);
  EXPECT_EQ(spec.ranks.ranks[3].local_rank, 1);
  EXPECT_EQ(spec.NodeRanks(1).size(), 2u);
  EXPECT_EQ(spec.sample_period, std::chrono::milliseconds(250));
  EXPECT_EQ(spec.timeout_s, 90);
  EXPECT_TRUE(spec.python);
  EXPECT_TRUE(spec.mpi) << "a coordinator taking over an MPI run knows mpirun tears it down";
}

TEST(TakeoverTest, BadRecordsNameTheFileAndTheField) {
  EXPECT_NE(ParseTakeover("{", "/r/agents.json").status().message().find("/r/agents.json: not JSON"),
            std::string::npos);
  nlohmann::json j = TakeoverJson(ATakeover());
  j["nodes"][0]["agent"]["port"] = 70000;
  auto bad_port = ParseTakeover(j.dump(), "/r/agents.json");
  ASSERT_FALSE(bad_port.ok());
  EXPECT_NE(bad_port.status().message().find("port"), std::string::npos) << bad_port.status().message();
  j = TakeoverJson(ATakeover());
  j["nodes"][1]["ranks"][0]["rank"] = 1;  // rank 1 twice, rank 2 on no node
  auto twice = ParseTakeover(j.dump(), "/r/agents.json");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("rank 1 is on two nodes"), std::string::npos) << twice.status().message();
  j = TakeoverJson(ATakeover());
  j["nodes"][1]["ranks"][0]["rank"] = 5;
  auto gap = ParseTakeover(j.dump(), "/r/agents.json");
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("rank 2 is on no node"), std::string::npos) << gap.status().message();
  j = TakeoverJson(ATakeover());
  j.erase("run_id");
  EXPECT_NE(ParseTakeover(j.dump(), "/r/agents.json").status().message().find("run_id"), std::string::npos);
}

TEST(TakeoverTest, ARunDirWithoutAgentsIsNotFound) {
  auto t = ReadTakeover(RunDir("/nonexistent-dsd-run"));
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("agents.json"), std::string::npos);
}

}  // namespace
}  // namespace dsd::coordinator
