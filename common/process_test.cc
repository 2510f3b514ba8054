#include "common/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// /proc/self/cmdline as ps shows it: NULs as spaces, trailing ones dropped.
std::string ShownCommandLine() {
  FILE* f = std::fopen("/proc/self/cmdline", "re");
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  while (!text.empty() && text.back() == '\0') text.pop_back();
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

TEST(ProcessTest, SetCommandLineIsWhatPsShowsShortOrLongAndTheEnvironmentSurvives) {
  ChildOptions opts;
  opts.env["DSD_TITLE_TEST"] = "still here";
  auto r = RunInChild(
      [] {
        const char* home = std::getenv("HOME");  // from the kernel's copy, in the area overwritten
        std::string home_before = home ? home : "";
        if (!SetCommandLine({"dsdoctor", "agent", "--name", "n0"})) return 1;
        std::printf("short:%s\n", ShownCommandLine().c_str());
        // Longer than this test's own arguments: it runs on into the environment's area.
        std::vector<std::string> words = {"dsdoctor", "agent"};
        for (int i = 0; i < 200; ++i) words.push_back("--word-" + std::to_string(i));
        if (!SetCommandLine(words)) return 1;
        std::string shown = ShownCommandLine();
        std::printf("long:%zu:%s\n", shown.size(), shown.substr(0, 60).c_str());
        std::printf("env:%s\n", std::getenv("DSD_TITLE_TEST"));
        home = std::getenv("HOME");
        std::printf("home:%s\n", (home ? home : "") == home_before ? "same" : "changed");
        return 0;
      },
      opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_NE(r->output.find("short:dsdoctor agent --name n0\n"), std::string::npos) << r->output;
  EXPECT_NE(r->output.find("long:"), std::string::npos) << r->output;
  EXPECT_NE(r->output.find(":dsdoctor agent --word-0 --word-1 --word-2"), std::string::npos) << r->output;
  size_t env_bytes = 0;  // the room past the arguments (the test's own environment)
  for (char** e = environ; e && *e; ++e) env_bytes += std::strlen(*e) + 1;
  size_t at = r->output.find("long:");
  if (env_bytes > 1000 && at != std::string::npos)
    EXPECT_GT(std::stoul(r->output.substr(at + 5)), 200u) << "longer than the argument area, not cut at it";
  EXPECT_NE(r->output.find("env:still here\n"), std::string::npos) << r->output;
  EXPECT_NE(r->output.find("home:same\n"), std::string::npos) << r->output;
}

// A job with a huge environment (50,000 variables, near the kernel's 2 MiB limit) still starts, with every variable and
// the overlay's unsets applied (setenv per variable in the child was quadratic).
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

// A child that exited before reading its stdin: writing to it is EPIPE, not a SIGPIPE that would end
// the coordinator (a launcher hands each agent its token this way), and no SIGPIPE stays pending.
TEST(ProcessTest, WritingToAPipeWithNoReaderIsAnErrorNotASignal) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ::close(p[0]);
  Status st = WriteToPipe(p[1], "token\n");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Broken pipe"), std::string::npos) << st.ToString();
  sigset_t pending;
  sigpending(&pending);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE));
  ::close(p[1]);
  ASSERT_EQ(::pipe(p), 0);
  EXPECT_TRUE(WriteToPipe(p[1], "token\n").ok());
  char buf[16] = {};
  EXPECT_EQ(::read(p[0], buf, sizeof buf), 6);
  ::close(p[0]);
  ::close(p[1]);
}

}  // namespace
}  // namespace dsd
