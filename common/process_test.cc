#include "common/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace dsd {
namespace {

TEST(ProcessTest, CapturesOutputAndExitCode) {
  ChildOptions opts;
  opts.env["DSD_CHILD_TEST"] = "hello";
  auto r = RunInChild(
      [] {
        std::printf("out:%s\n", std::getenv("DSD_CHILD_TEST"));
        std::fprintf(stderr, "err\n");
        return 7;
      },
      opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_FALSE(r->timed_out);
  EXPECT_NE(r->output.find("out:hello"), std::string::npos);
  EXPECT_NE(r->output.find("err"), std::string::npos);
  EXPECT_EQ(std::getenv("DSD_CHILD_TEST"), nullptr);  // the parent's env is untouched
}

TEST(ProcessTest, KillsAHangingChildAtTheDeadline) {
  ChildOptions opts;
  opts.timeout = std::chrono::milliseconds(200);
  auto r = RunInChild(
      [] {
        ::pause();
        return 0;
      },
      opts);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->term_signal, SIGKILL);
  EXPECT_EQ(DescribeChildEnd(*r), "timed out");
}

TEST(ProcessTest, ReportsACrash) {
  auto r = RunInChild(
      [] {
        ::raise(SIGSEGV);
        return 0;
      },
      {});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->signaled);
  EXPECT_EQ(r->term_signal, SIGSEGV);
}

TEST(ProcessTest, TruncatesHugeOutput) {
  ChildOptions opts;
  opts.max_output = 100;
  auto r = RunInChild(
      [] {
        for (int i = 0; i < 1000; ++i) std::printf("0123456789");
        return 0;
      },
      opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output.size(), 100u);
  EXPECT_TRUE(r->truncated);
}

TEST(RunCommandTest, SeparatesStdoutStderrAndPassesEnvAndStdin) {
  CommandOptions opts;
  opts.env["DSD_CMD_TEST"] = "v1";
  opts.stdin_data = "from-stdin\n";
  auto r = RunCommand({"/bin/sh", "-c", "echo out:$DSD_CMD_TEST; read x; echo err:$x >&2; exit 4"}, opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->out, "out:v1\n");
  EXPECT_EQ(r->err, "err:from-stdin\n");
}

TEST(RunCommandTest, MissingProgramExits127) {
  auto r = RunCommand({"/nonexistent/dsdoctor-prog"}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 127);
  EXPECT_NE(r->err.find("/nonexistent/dsdoctor-prog"), std::string::npos);
}

TEST(RunCommandTest, TimesOutAndKills) {
  CommandOptions opts;
  opts.timeout = std::chrono::milliseconds(200);
  auto r = RunCommand({"sleep", "30"}, opts);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGKILL);
}

// A job with a huge environment (50,000 variables, near the kernel's 2 MiB limit) still starts, with every variable and the
// overlay's unsets applied (setenv per variable in the child was quadratic).
TEST(ProcessTest, HugeEnvironmentsAreMergedNotSetOneByOne) {
  std::map<std::string, std::string> env;
  for (int i = 0; i < 50000; ++i) env["DSD_V" + std::to_string(i)] = "v" + std::to_string(i);
  env["HOME"] = "";  // unset
  CommandOptions o;
  o.env = env;
  auto r = RunCommand({"sh", "-c", "echo \"$DSD_V49999 ${HOME-unset}\"; env | grep -c ^DSD_V"}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->out, "v49999 unset\n50000\n") << r->err;
  auto merged = MergedEnvironment({{"PATH", "/bin"}, {"DSD_X", "1"}});
  EXPECT_NE(std::find(merged.begin(), merged.end(), "DSD_X=1"), merged.end());
  EXPECT_NE(std::find(merged.begin(), merged.end(), "PATH=/bin"), merged.end());
}

}  // namespace
}  // namespace dsd
