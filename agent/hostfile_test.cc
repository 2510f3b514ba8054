#include "agent/hostfile.h"

#include <gtest/gtest.h>

namespace dsd::agent {
namespace {

TEST(HostfileTest, ParsesDeepSpeedFormat) {
  auto hf = ParseHostfile("hf", "# cluster\nworker-1 slots=4\n\n  worker-2   slots=2  # two GPUs\n");
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  ASSERT_EQ(hf->hosts.size(), 2u);
  EXPECT_EQ(hf->hosts[0].host, "worker-1");
  EXPECT_EQ(hf->hosts[0].slots, 4);
  EXPECT_EQ(hf->hosts[1].host, "worker-2");
  EXPECT_EQ(hf->hosts[1].slots, 2);
  EXPECT_EQ(hf->hosts[1].line, 4);
  EXPECT_TRUE(hf->warnings.empty());
}

TEST(HostfileTest, WarnsWhereDeepSpeedSilentlyIgnores) {
  auto hf = ParseHostfile("hf", "a slots=2 max_slots=4\nb slots=1 gpu=8\nc\n");
  ASSERT_TRUE(hf.ok());
  ASSERT_EQ(hf->warnings.size(), 3u);
  EXPECT_NE(hf->warnings[0].find("hf:1: 'max_slots=4' is OpenMPI-only"), std::string::npos);
  EXPECT_NE(hf->warnings[1].find("hf:2: 'gpu=8' is ignored"), std::string::npos);
  EXPECT_NE(hf->warnings[2].find("hf:3: no slots="), std::string::npos);
  EXPECT_EQ(hf->hosts[2].slots, 1);
}

struct BadHostfile {
  std::string content;
  std::string message;
};
class HostfileErrorTest : public ::testing::TestWithParam<BadHostfile> {};

TEST_P(HostfileErrorTest, NamesFileAndLine) {
  auto hf = ParseHostfile("/etc/hosts.ds", GetParam().content);
  ASSERT_FALSE(hf.ok());
  EXPECT_EQ(hf.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(hf.status().message().find(GetParam().message), std::string::npos) << hf.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, HostfileErrorTest,
    ::testing::Values(BadHostfile{"a slots=2\nb slots=1\na slots=4\n", "/etc/hosts.ds:3: duplicate host 'a' (first at line 1)"},
                      BadHostfile{"a slots=x\n", "/etc/hosts.ds:1: slots 'x' is not a whole number"},
                      BadHostfile{"a slots=0\n", "/etc/hosts.ds:1: slots must be at least 1"},
                      BadHostfile{"a slots=-2\n", "/etc/hosts.ds:1: slots must be at least 1, got -2"},
                      BadHostfile{"a slots=1 slots=2\n", "/etc/hosts.ds:1: slots= given twice"},
                      BadHostfile{"\nslots=4\n", "/etc/hosts.ds:2: expected 'HOST slots=N'"},
                      BadHostfile{"# nothing\n\n", "/etc/hosts.ds: no hosts"},
                      BadHostfile{"a slots=99999999999\n", "not a whole number"}));

Hostfile Three() { return *ParseHostfile("hf", "w1 slots=4\nw2 slots=4\nw3 slots=2\n"); }

TEST(PlanTest, AllSlotsByDefault) {
  auto p = PlanNodes(Three(), {});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[2].slots, (std::vector<int>{0, 1}));
}

TEST(PlanTest, IncludeKeepsListedHostsAndSlots) {
  auto p = PlanNodes(Three(), {.include = "w2:0,1@w3"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].host, "w2");
  EXPECT_EQ((*p)[0].slots, (std::vector<int>{0, 1}));
  EXPECT_EQ((*p)[1].slots, (std::vector<int>{0, 1}));
}

TEST(PlanTest, ExcludeRemovesSlotsAndWholeHosts) {
  auto p = PlanNodes(Three(), {.exclude = "w2:0@w3"});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[1].host, "w2");
  EXPECT_EQ((*p)[1].slots, (std::vector<int>{1, 2, 3}));
}

TEST(PlanTest, NumNodesAndNumGpus) {
  auto p = PlanNodes(Three(), {.num_nodes = 2, .num_gpus = 2});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[1].slots, (std::vector<int>{0, 1}));
}

struct BadPlan {
  PlanOptions options;
  std::string message;
};
class PlanErrorTest : public ::testing::TestWithParam<BadPlan> {};

TEST_P(PlanErrorTest, IsAClearError) {
  auto p = PlanNodes(Three(), GetParam().options);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find(GetParam().message), std::string::npos) << p.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, PlanErrorTest,
    ::testing::Values(BadPlan{{.include = "w1", .exclude = "w2"}, "mutually exclusive"},
                      BadPlan{{.include = "w9"}, "--include: host 'w9' is not in hf"},
                      BadPlan{{.exclude = "w3:5"}, "--exclude: slot 5 is not on host 'w3' (it has 2 slots)"},
                      BadPlan{{.include = "w1:a"}, "slot 'a' is not a whole number"},
                      BadPlan{{.include = "w1@@w2"}, "empty host"},
                      BadPlan{{.num_nodes = 4}, "--num_nodes 4 but 3 nodes are available"},
                      BadPlan{{.num_nodes = 0}, "--num_nodes 0"},
                      BadPlan{{.num_gpus = 3}, "--num_gpus 3 but host 'w3' has 2 slots"},
                      BadPlan{{.exclude = "w1@w2@w3"}, "no nodes left"}));

TEST(PlanTest, DefaultHostfileFollowsDeepSpeed) {
  EXPECT_EQ(DefaultHostfilePath("/nonexistent/job/hostfile"), std::nullopt);
  EXPECT_EQ(DefaultHostfilePath("/proc/self/status"), "/proc/self/status");
}

}  // namespace
}  // namespace dsd::agent
