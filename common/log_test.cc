#include "common/log.h"

#include <gtest/gtest.h>

namespace dsd::log {
namespace {

TEST(LogLevelTest, ParsesEveryValidName) {
  EXPECT_EQ(ParseLevel("trace"), spdlog::level::trace);
  EXPECT_EQ(ParseLevel("DEBUG"), spdlog::level::debug);
  EXPECT_EQ(ParseLevel("info"), spdlog::level::info);
  EXPECT_EQ(ParseLevel("warn"), spdlog::level::warn);
  EXPECT_EQ(ParseLevel("warning"), spdlog::level::warn);
  EXPECT_EQ(ParseLevel("error"), spdlog::level::err);
  EXPECT_EQ(ParseLevel("off"), spdlog::level::off);
  EXPECT_EQ(ParseLevel("verbose"), std::nullopt);
  EXPECT_EQ(ParseLevel(""), std::nullopt);
}

TEST(LogLevelTest, DefaultIsInfo) {
  auto c = ChooseLevel(std::nullopt, std::nullopt);
  EXPECT_EQ(c.level, spdlog::level::info);
  EXPECT_EQ(c.source, "default");
  EXPECT_TRUE(c.warning.empty());
}

TEST(LogLevelTest, EnvironmentThenFlagOverrides) {
  auto env_only = ChooseLevel(std::nullopt, std::string("debug"));
  EXPECT_EQ(env_only.level, spdlog::level::debug);
  EXPECT_EQ(env_only.source, "DSDOCTOR_LOG_LEVEL");
  auto both = ChooseLevel(std::string("error"), std::string("debug"));
  EXPECT_EQ(both.level, spdlog::level::err);
  EXPECT_EQ(both.source, "--log-level");
}

TEST(LogLevelTest, InvalidValueWarnsNamingValidLevels) {
  auto c = ChooseLevel(std::nullopt, std::string("loud"));
  EXPECT_EQ(c.level, spdlog::level::info);
  EXPECT_NE(c.warning.find("DSDOCTOR_LOG_LEVEL='loud'"), std::string::npos);
  EXPECT_NE(c.warning.find("trace|debug|info|warn|error|off"), std::string::npos);
  auto flag = ChooseLevel(std::string("chatty"), std::string("warn"));
  EXPECT_EQ(flag.level, spdlog::level::warn);  // the valid env value still applies
  EXPECT_NE(flag.warning.find("--log-level 'chatty'"), std::string::npos);
}

TEST(LogTest, ComponentLoggersAreSharedAndFollowGlobalLevel) {
  auto a = Get("unit-a");
  EXPECT_EQ(a, Get("unit-a"));
  spdlog::set_level(spdlog::level::debug);
  EXPECT_TRUE(a->should_log(spdlog::level::debug));
  spdlog::set_level(spdlog::level::info);
  EXPECT_FALSE(a->should_log(spdlog::level::debug));
}

}  // namespace
}  // namespace dsd::log
