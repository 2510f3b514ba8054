// `dsdoctor run --tui` inside a real tmux: the screen (capture-pane) must show the finding and the
// culprit rank of the rank-0-only save_checkpoint hang; pressing q must stop the job.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/file.h"
#include "common/process.h"

namespace dsd {
namespace {

namespace fs = std::filesystem;

class TuiE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/tmux", X_OK) != 0) GTEST_SKIP() << "tmux is not installed (scripts/setup.sh installs it)";
    socket_ = "dsd-tui-" + std::to_string(::getpid());
    dir_ = fs::temp_directory_path() / socket_;
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!socket_.empty()) (void)Tmux({"kill-server"});  // our private server only (-L)
    fs::remove_all(dir_);
  }
  CommandResult Tmux(std::vector<std::string> args) {
    args.insert(args.begin(), {"tmux", "-L", socket_});
    CommandOptions o;
    o.timeout = std::chrono::seconds(10);
    o.env = {{"TERM", "xterm-256color"}};
    auto r = RunCommand(args, o);
    return r.ok() ? *r : CommandResult{};
  }
  std::string Screen() { return Tmux({"capture-pane", "-p", "-t", "job"}).out; }

  std::string socket_;
  fs::path dir_;
};

TEST_F(TuiE2eTest, ShowsTheCulpritOfRankZeroOnlyCheckpointAndQStopsTheJob) {
  std::string cmd = std::string(DSDOCTOR_BIN) + " run --tui --local 2 --slots 2 --log-dir " + (dir_ / "logs").string() + " --json " +
                    (dir_ / "report.json").string() + " -- " + EXAMPLES_DIR + "/rank0_only_checkpoint; echo $? > " + (dir_ / "exit").string() +
                    "; sleep 60";
  auto started = Tmux({"new-session", "-d", "-s", "job", "-x", "100", "-y", "30", cmd});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  std::string screen;
  for (int i = 0; i < 100; ++i) {
    screen = Screen();
    if (screen.find("COLLECTIVE_MISMATCH") != std::string::npos && screen.find("!0 ") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_NE(screen.find("COLLECTIVE_MISMATCH ranks 0"), std::string::npos) << screen;
  EXPECT_NE(screen.find("!0    node-0     wait     barrier#5 @save_checkp"), std::string::npos) << "culprit row: " << screen;
  EXPECT_NE(screen.find("HUNG"), std::string::npos) << screen;
  EXPECT_NE(screen.find("fix: save_checkpoint is a collective"), std::string::npos) << screen;
  EXPECT_NE(screen.find("q quit"), std::string::npos) << screen;
  EXPECT_FALSE(fs::exists(dir_ / "exit")) << "the TUI shows the hang; it does not end the job by itself";

  ASSERT_EQ(Tmux({"send-keys", "-t", "job", "q"}).exit_code, 0);
  for (int i = 0; i < 100 && !fs::exists(dir_ / "exit"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto code = ReadFile((dir_ / "exit").string());
  ASSERT_TRUE(code.ok()) << "dsdoctor did not exit after q: " << Screen();
  EXPECT_EQ(*code, "1\n");
  auto report = ReadFile((dir_ / "report.json").string());
  ASSERT_TRUE(report.ok());
  auto j = nlohmann::json::parse(*report);
  EXPECT_EQ(j["findings"][0]["code"], "COLLECTIVE_MISMATCH");
  EXPECT_EQ(j["findings"][0]["ranks"], nlohmann::json({0}));
  for (const auto& r : j["ranks"]) {
    int pid = r["pid"].get<int>();
    ASSERT_GT(pid, 0) << r.dump();
    EXPECT_NE(::kill(pid, 0), 0) << "rank " << r["rank"] << " still runs after q";
  }
  // After the TUI closes, the text report is on the terminal.
  EXPECT_NE(Screen().find("error COLLECTIVE_MISMATCH"), std::string::npos) << Screen();
}

}  // namespace
}  // namespace dsd
