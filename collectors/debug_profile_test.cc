#include "collectors/debug_profile.h"

#include <gtest/gtest.h>

namespace dsd::collectors {
namespace {

TEST(DebugProfileTest, DefaultGetsNcclWarnLinesOnly) {
  std::map<std::string, std::string> env;
  ApplyDiagnosticProfile(false, &env);
  EXPECT_EQ(env, (std::map<std::string, std::string>{{"NCCL_DEBUG", "WARN"}}));
}

TEST(DebugProfileTest, DebugTurnsOnEveryLibrarysLogging) {
  std::map<std::string, std::string> env;
  ApplyDiagnosticProfile(true, &env);
  EXPECT_EQ(env.at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(env.at("TORCH_DISTRIBUTED_DEBUG"), "DETAIL");
  EXPECT_EQ(env.at("TORCH_CPP_LOG_LEVEL"), "INFO");
  EXPECT_EQ(env.at("TORCH_SHOW_CPP_STACKTRACES"), "1");
  EXPECT_EQ(env.at("DSDOCTOR_LOG_LEVEL"), "debug");
}

TEST(DebugProfileTest, TheUsersValueWins) {
  std::map<std::string, std::string> env{{"NCCL_DEBUG", "TRACE"}, {"TORCH_DISTRIBUTED_DEBUG", "OFF"}};
  ApplyDiagnosticProfile(true, &env);
  EXPECT_EQ(env.at("NCCL_DEBUG"), "TRACE");
  EXPECT_EQ(env.at("TORCH_DISTRIBUTED_DEBUG"), "OFF");
  std::map<std::string, std::string> quiet{{"NCCL_DEBUG", "VERSION"}};
  ApplyDiagnosticProfile(false, &quiet);
  EXPECT_EQ(quiet.at("NCCL_DEBUG"), "VERSION");
}

}  // namespace
}  // namespace dsd::collectors
