#include "probe/dsenv.h"

#include <gtest/gtest.h>

namespace dsd::probe {
namespace {

TEST(DsEnvTest, ParsesGoodLines) {
  auto f = ParseDsEnv("/x/.deepspeed_env", "NCCL_IB_DISABLE=1\nNCCL_SOCKET_IFNAME=eth0\nPATH_X=a=b\n");
  ASSERT_EQ(f.entries.size(), 3u);
  EXPECT_TRUE(f.problems.empty());
  EXPECT_EQ(f.entries[1].key, "NCCL_SOCKET_IFNAME");
  EXPECT_EQ(f.entries[1].value, "eth0");
  EXPECT_EQ(f.entries[1].line, 2);
  EXPECT_EQ(f.entries[2].value, "a=b");  // split on the first '=' only, like DeepSpeed
}

struct BadLine {
  std::string content;
  int line;
  bool fatal;
  std::string reason_part;
};

class DsEnvBadLineTest : public ::testing::TestWithParam<BadLine> {};

TEST_P(DsEnvBadLineTest, NamesTheLineAndWhy) {
  const BadLine& c = GetParam();
  auto f = ParseDsEnv("f", c.content);
  ASSERT_EQ(f.problems.size(), 1u) << c.content;
  EXPECT_EQ(f.problems[0].line, c.line);
  EXPECT_EQ(f.problems[0].fatal, c.fatal);
  EXPECT_NE(f.problems[0].reason.find(c.reason_part), std::string::npos) << f.problems[0].reason;
}

INSTANTIATE_TEST_SUITE_P(
    Table, DsEnvBadLineTest,
    ::testing::Values(BadLine{"A=1\n\nB=2\n", 2, true, "blank line"},
                      BadLine{"A=1\nNCCL_DEBUG INFO\n", 2, true, "no '='"},
                      BadLine{"# cluster settings\nA=1\n", 1, true, "comment"},
                      BadLine{"=1\n", 1, true, "empty variable name"},
                      BadLine{"#NCCL_DEBUG=INFO\n", 1, false, "commented-out"},
                      BadLine{"1BAD=x\n", 1, false, "not a valid"},
                      BadLine{"A=\"quoted\"\n", 1, false, "quotes"},
                      BadLine{"A=1\n\n", 2, true, "blank line"}));

TEST(DsEnvTest, LaterFilesOverride) {
  auto home = ParseDsEnv("home", "A=1\nB=2\n");
  auto cwd = ParseDsEnv("cwd", "B=3\n");
  auto merged = MergeDsEnv({home, cwd});
  EXPECT_EQ(merged.at("A"), "1");
  EXPECT_EQ(merged.at("B"), "3");
}

}  // namespace
}  // namespace dsd::probe
