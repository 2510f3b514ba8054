#include "collectors/python_tracer.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace dsd::collectors {
namespace {

constexpr char kPlugin[] = "/opt/dsdoctor/lib/dsdoctor/libdsdoctor-nccl-profiler.so";

class NcclProfilerEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("NCCL_PROFILER_PLUGIN");
    ::unsetenv("DSDOCTOR_NCCL_PROFILER");
  }
  void TearDown() override { SetUp(); }
};

TEST_F(NcclProfilerEnvTest, ARankGetsThePlugin) {
  std::map<std::string, std::string> env;
  AddNcclProfiler(kPlugin, &env);
  EXPECT_EQ(env["NCCL_PROFILER_PLUGIN"], kPlugin);
  // NCCL's default plugin, had the user one installed, keeps working behind ours.
  EXPECT_EQ(env["DSDOCTOR_NCCL_PROFILER_CHAIN"], "?libnccl-profiler.so");
}

// The user's plugin (job env or the shell's) keeps working behind ours, never replaced.
TEST_F(NcclProfilerEnvTest, TheUsersPluginIsChainedNotReplaced) {
  std::map<std::string, std::string> env = {{"NCCL_PROFILER_PLUGIN", "inspector"}};
  AddNcclProfiler(kPlugin, &env);
  EXPECT_EQ(env["NCCL_PROFILER_PLUGIN"], kPlugin);
  EXPECT_EQ(env["DSDOCTOR_NCCL_PROFILER_CHAIN"], "inspector");

  ::setenv("NCCL_PROFILER_PLUGIN", "/x/libnccl-profiler-mine.so", 1);
  std::map<std::string, std::string> inherited;
  AddNcclProfiler(kPlugin, &inherited);
  EXPECT_EQ(inherited["NCCL_PROFILER_PLUGIN"], kPlugin);
  EXPECT_EQ(inherited["DSDOCTOR_NCCL_PROFILER_CHAIN"], "/x/libnccl-profiler-mine.so");
}

TEST_F(NcclProfilerEnvTest, OptOutAndNoneLeaveTheEnvironmentAlone) {
  std::map<std::string, std::string> off = {{"DSDOCTOR_NCCL_PROFILER", "off"}};
  AddNcclProfiler(kPlugin, &off);
  EXPECT_EQ(off.count("NCCL_PROFILER_PLUGIN"), 0u);
  for (const char* off_value : {"none", "NONE"}) {
    std::map<std::string, std::string> none = {{"NCCL_PROFILER_PLUGIN", off_value}};
    AddNcclProfiler(kPlugin, &none);
    EXPECT_EQ(none["NCCL_PROFILER_PLUGIN"], off_value);
    EXPECT_EQ(none.count("DSDOCTOR_NCCL_PROFILER_CHAIN"), 0u);
  }
  std::map<std::string, std::string> again = {{"NCCL_PROFILER_PLUGIN", kPlugin}};  // a rank's child run
  AddNcclProfiler(kPlugin, &again);
  EXPECT_EQ(again.count("DSDOCTOR_NCCL_PROFILER_CHAIN"), 0u);
}

}  // namespace
}  // namespace dsd::collectors
