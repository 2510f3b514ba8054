#include "runtime/rank_env.h"

#include <gtest/gtest.h>

namespace dsd::runtime {
namespace {

using Env = std::map<std::string, std::string>;

TEST(RankEnvTest, EnvMethod) {
  auto r = ParseRankEnv({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "198.18.0.1"}, {"MASTER_PORT", "29500"},
                         {"LOCAL_RANK", "1"}, {"LOCAL_SIZE", "2"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->world_size, 4);
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->master_port, 29500);
  EXPECT_EQ(r->source, "env://");
}

TEST(RankEnvTest, OpenMpi) {
  auto r = ParseRankEnv({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, "openmpi");
  EXPECT_EQ(r->rank, 1);
}

struct BadEnv {
  Env env;
  std::string message_part;
};
class RankEnvErrorTest : public ::testing::TestWithParam<BadEnv> {};

TEST_P(RankEnvErrorTest, NamesTheVariable) {
  auto r = ParseRankEnv(GetParam().env);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(GetParam().message_part), std::string::npos) << r.status().message();
}

const Env kBase = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "29500"}};
Env With(std::string k, std::string v) {
  Env e = kBase;
  e[k] = v;
  return e;
}
Env Without(std::string k) {
  Env e = kBase;
  e.erase(k);
  return e;
}

INSTANTIATE_TEST_SUITE_P(
    Table, RankEnvErrorTest,
    ::testing::Values(BadEnv{{}, "no distributed environment"}, BadEnv{With("RANK", "2"), "RANK=2 is not below WORLD_SIZE=2"},
                      BadEnv{With("WORLD_SIZE", "two"), "WORLD_SIZE=two is not an integer"},
                      BadEnv{With("MASTER_PORT", "70000"), "MASTER_PORT=70000 is out of range"},
                      BadEnv{Without("MASTER_ADDR"), "MASTER_ADDR is not set"},
                      BadEnv{With("LOCAL_RANK", "-1"), "LOCAL_RANK=-1 is out of range"},
                      BadEnv{Without("RANK"), "RANK is not set"}));

}  // namespace
}  // namespace dsd::runtime
