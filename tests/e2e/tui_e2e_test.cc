// The live view in a real tmux (capture-pane reads the screen): `dsdoctor run --tui` must show the
// finding and the culprit rank of the rank-0-only save_checkpoint hang, lay itself out again when
// the terminal shrinks to 80x24, and stop the job on q; its recording must replay to the same
// finding; `dsdoctor tui --attach` must show a running job's hang and detach on q, the job
// running on.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/file.h"
#include "common/process.h"
#include "common/strings.h"
#include "common/subprocess.h"

namespace dsd {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Lines(const std::string& text) {
  auto lines = Split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

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
  // The screen and what scrolled off it (a report longer than 24 rows).
  std::string ScreenAndHistory() { return Tmux({"capture-pane", "-p", "-S", "-", "-t", "job"}).out; }
  // Polls the screen until it holds every one of `words` and, when `last_row` is given, its last
  // row holds that (10 s). After a resize the old frame stays, cut to the new size, until the view
  // draws again: only the help line back on the last row says the new layout is on screen.
  std::string WaitForScreen(const std::vector<std::string>& words, const std::string& last_row = "") {
    std::string screen;
    for (int i = 0; i < 100; ++i) {
      screen = Screen();
      bool all = true;
      for (const auto& w : words) all &= screen.find(w) != std::string::npos;
      if (!last_row.empty()) {
        auto lines = Lines(screen);
        all &= !lines.empty() && lines.back().find(last_row) != std::string::npos;
      }
      if (all) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return screen;
  }
  CommandResult Dsdoctor(std::vector<std::string> args) {
    args.insert(args.begin(), DSDOCTOR_BIN);
    CommandOptions o;
    o.timeout = std::chrono::seconds(30);
    auto r = RunCommand(args, o);
    return r.ok() ? *r : CommandResult{};
  }

  std::string socket_;
  fs::path dir_;
};

TEST_F(TuiE2eTest, ShowsTheCulpritOfRankZeroOnlyCheckpointAndQStopsTheJob) {
  std::string cmd = std::string(DSDOCTOR_BIN) + " run --tui --local 2 --slots 2 --log-dir " + (dir_ / "logs").string() +
                    " --json " + (dir_ / "report.json").string() + " -- " + EXAMPLES_DIR +
                    "/rank0_only_checkpoint; echo $? > " + (dir_ / "exit").string() + "; sleep 60";
  auto started = Tmux({"new-session", "-d", "-s", "job", "-x", "100", "-y", "30", cmd});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  std::string screen;
  for (int i = 0; i < 100; ++i) {
    screen = Screen();
    if (screen.find("COLLECTIVE_MISMATCH") != std::string::npos && screen.find("!0 ") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_NE(screen.find("COLLECTIVE_MISMATCH ranks 0"), std::string::npos) << screen;
  EXPECT_NE(screen.find("!0    node-0     wait     barrier#5 @save_checkp"), std::string::npos)
      << "culprit row: " << screen;
  EXPECT_NE(screen.find("HUNG"), std::string::npos) << screen;
  EXPECT_NE(screen.find("fix: save_checkpoint makes collectives"), std::string::npos) << screen;
  EXPECT_NE(screen.find("q quit"), std::string::npos) << screen;
  EXPECT_FALSE(fs::exists(dir_ / "exit")) << "the TUI shows the hang; it does not end the job by itself";

  // The terminal shrinks to 80x24: the view lays itself out again and keeps the cause on screen.
  ASSERT_EQ(Tmux({"resize-window", "-t", "job", "-x", "80", "-y", "24"}).exit_code, 0);
  screen = WaitForScreen({"COLLECTIVE_MISMATCH", "!0 "}, "q quit");
  std::vector<std::string> lines = Lines(screen);
  EXPECT_EQ(lines.size(), 24u) << screen;
  for (const auto& l : lines) EXPECT_LE(l.size(), 80u) << l;
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("q quit"), std::string::npos) << "the help line is the last row: " << screen;
  EXPECT_NE(screen.find("!0    node-0     wait     barrier#5"), std::string::npos) << screen;

  ASSERT_EQ(Tmux({"send-keys", "-t", "job", "q"}).exit_code, 0);
  for (int i = 0; i < 100 && !fs::exists(dir_ / "exit"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto code = ReadFile((dir_ / "exit").string());
  ASSERT_TRUE(code.ok()) << "dsdoctor did not exit after q: " << Screen();
  EXPECT_EQ(*code, "1\n");
  auto report = ReadFile((dir_ / "report.json").string());
  ASSERT_TRUE(report.ok());
  auto j = nlohmann::json::parse(*report);
  EXPECT_EQ(j["findings"][0]["code"], "COLLECTIVE_MISMATCH");
  EXPECT_EQ(j["findings"][0]["ranks"], nlohmann::json::array({0}));  // json({0}) is null under clang
  for (const auto& r : j["ranks"]) {
    int pid = r["pid"].get<int>();
    ASSERT_GT(pid, 0) << r.dump();
    EXPECT_NE(::kill(pid, 0), 0) << "rank " << r["rank"] << " still runs after q";
  }
  // After the TUI closes, the text report is on the terminal.
  std::string after = ScreenAndHistory();
  EXPECT_NE(after.find("error COLLECTIVE_MISMATCH"), std::string::npos) << after;

  // The run recorded its stream: the replay's last frame shows the same cause and culprit, and its
  // first moments show a job that runs, before the hang.
  auto replay = Dsdoctor({"tui", "--replay", (dir_ / "logs").string(), "--dump", "--size", "100x30"});
  EXPECT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_NE(replay.out.find("COLLECTIVE_MISMATCH ranks 0"), std::string::npos) << replay.out;
  EXPECT_NE(replay.out.find("!0    node-0"), std::string::npos) << replay.out;
  EXPECT_NE(replay.out.find("dsdoctor replay: "), std::string::npos) << replay.out;
  // The job hangs within a second, so the moment to seek to is read from the recording: the first
  // tick of the running job, which must have no finding yet.
  auto events = ReadFile((dir_ / "logs" / "events.jsonl").string());
  ASSERT_TRUE(events.ok());
  std::istringstream lines_in(*events);
  double first_tick_s = -1;
  for (std::string line; std::getline(lines_in, line);) {
    auto e = nlohmann::json::parse(line);
    if (e["type"] != "tick" || e["overall"] != "running") continue;
    EXPECT_TRUE(e["findings"].empty()) << line;
    first_tick_s = e["t"].get<double>();
    break;
  }
  ASSERT_GE(first_tick_s, 0) << *events;
  char at[32];
  std::snprintf(at, sizeof at, "%.6f", first_tick_s + 1e-6);
  auto early = Dsdoctor({"tui", "--replay", (dir_ / "logs" / "events.jsonl").string(), "--dump", "--at", at});
  EXPECT_EQ(early.exit_code, 0) << early.err;
  EXPECT_EQ(early.out.find("COLLECTIVE_MISMATCH"), std::string::npos) << early.out;
  EXPECT_NE(early.out.find("running [replay"), std::string::npos) << early.out;
}

// The two headline features together: with debug logging everywhere, the view keeps the screen
// (no log line on it, the culprit row whole) and dsdoctor's log goes to the run dir's dsdoctor.log.
TEST_F(TuiE2eTest, DebugLoggingUnderTheViewGoesToDsdoctorLogNotTheScreen) {
  const std::string logs = (dir_ / "logs").string();
  std::string cmd = "DSDOCTOR_LOG_LEVEL=debug " + std::string(DSDOCTOR_BIN) +
                    " run --tui --local 2 --slots 2 --log-dir " + logs + " -- " + EXAMPLES_DIR +
                    "/rank0_only_checkpoint; echo $? > " + (dir_ / "exit").string() + "; sleep 60";
  auto started = Tmux({"new-session", "-d", "-s", "job", "-x", "100", "-y", "30", cmd});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  std::string screen = WaitForScreen({"COLLECTIVE_MISMATCH", "!0 "}, "q quit");
  EXPECT_NE(screen.find("!0    node-0     wait     barrier#5 @save_checkp"), std::string::npos)
      << "culprit row: " << screen;
  auto file = ReadFile(logs + "/dsdoctor.log");
  ASSERT_TRUE(file.ok()) << "no dsdoctor.log in the run dir";
  EXPECT_NE(file->find(" debug "), std::string::npos) << "debug logging is on: " << *file;
  // The rank's own debug lines are in its log pane; none of dsdoctor's (timestamp, level, logger:
  // unique to each line) is anywhere on the screen.
  for (const auto& line : Lines(*file))
    if (line.size() >= 36) EXPECT_EQ(screen.find(line.substr(0, 36)), std::string::npos) << line << "\n" << screen;

  ASSERT_EQ(Tmux({"send-keys", "-t", "job", "q"}).exit_code, 0);
  for (int i = 0; i < 100 && !fs::exists(dir_ / "exit"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(dir_ / "exit")) << "dsdoctor did not exit after q: " << Screen();
  std::string after = ScreenAndHistory();
  EXPECT_NE(after.find("logged while the view was open: " + logs + "/dsdoctor.log"), std::string::npos) << after;
  EXPECT_NE(after.find("error COLLECTIVE_MISMATCH"), std::string::npos) << after;
}

TEST_F(TuiE2eTest, AttachShowsARunningJobsHangAndQDetachesWhileTheJobRunsOn) {
  std::string logs = (dir_ / "logs").string();
  SubprocessOptions so;
  so.log_path = (dir_ / "run.out").string();
  auto run = Subprocess::Start({DSDOCTOR_BIN, "run", "--local", "2", "--slots", "2", "--on-hang", "wait", "--quiet",
                                "--log-dir", logs, "--", std::string(EXAMPLES_DIR) + "/rank0_only_checkpoint"},
                               so);
  ASSERT_TRUE(run.ok()) << run.status().message();
  for (int i = 0; i < 100 && !fs::exists(logs + "/viewer.addr"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(logs + "/viewer.addr"));
  EXPECT_EQ(fs::status(logs + "/viewer.token").permissions() & (fs::perms::group_all | fs::perms::others_all),
            fs::perms::none);

  // A wrong token is refused: exit 1, and the reason.
  ASSERT_TRUE(
      WriteFileAtomic((dir_ / "wrong.token").string(), std::string(64, '0').replace(0, 16, "0123456789abcdef") + "\n")
          .ok());
  fs::permissions(dir_ / "wrong.token", fs::perms::owner_read | fs::perms::owner_write);
  auto addr = ReadFile(logs + "/viewer.addr");
  ASSERT_TRUE(addr.ok());
  std::string address = addr->substr(0, addr->find('\n'));
  auto refused = Dsdoctor({"tui", "--attach", address, "--token-file", (dir_ / "wrong.token").string(), "--dump"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("authentication failed"), std::string::npos) << refused.err;

  std::string cmd =
      std::string(DSDOCTOR_BIN) + " tui --attach " + logs + "; echo $? > " + (dir_ / "exit").string() + "; sleep 60";
  ASSERT_EQ(Tmux({"new-session", "-d", "-s", "job", "-x", "100", "-y", "30", cmd}).exit_code, 0);
  std::string screen = WaitForScreen({"COLLECTIVE_MISMATCH", "!0 "});
  EXPECT_NE(screen.find("dsdoctor attach: "), std::string::npos) << screen;
  EXPECT_NE(screen.find("HUNG [attached " + address + "]"), std::string::npos) << screen;
  EXPECT_NE(screen.find("COLLECTIVE_MISMATCH ranks 0"), std::string::npos) << screen;
  EXPECT_NE(screen.find("!0    node-0     wait     barrier#5 @save_checkp"), std::string::npos) << screen;

  // Without a terminal: one frame of the job as it is now.
  auto dump = Dsdoctor({"tui", "--attach", address, "--token-file", logs + "/viewer.token", "--dump"});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("COLLECTIVE_MISMATCH ranks 0"), std::string::npos) << dump.out;

  ASSERT_EQ(Tmux({"send-keys", "-t", "job", "q"}).exit_code, 0);
  for (int i = 0; i < 50 && !fs::exists(dir_ / "exit"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto code = ReadFile((dir_ / "exit").string());
  ASSERT_TRUE(code.ok()) << "the viewer did not exit after q: " << Screen();
  EXPECT_EQ(*code, "0\n");
  EXPECT_FALSE(run->Poll().has_value()) << "q in an attached view must not stop the job";

  // The run ends (SIGTERM to the coordinator we started): a viewer still attached is told, and the
  // recording ends with the run's code.
  ASSERT_EQ(Tmux({"new-session", "-d", "-s", "watch", "-x", "100", "-y", "30",
                  std::string(DSDOCTOR_BIN) + " tui --attach " + logs + "; sleep 60"})
                .exit_code,
            0);
  for (int i = 0;
       i < 100 && Tmux({"capture-pane", "-p", "-t", "watch"}).out.find("COLLECTIVE_MISMATCH") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  run->Signal(SIGTERM);
  auto exit = run->Wait(std::chrono::seconds(30));
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code, 128 + SIGTERM);
  auto events = ReadFile(logs + "/events.jsonl");
  ASSERT_TRUE(events.ok());
  auto all = Lines(*events);
  ASSERT_GE(all.size(), 3u);
  auto last = nlohmann::json::parse(all.back());
  EXPECT_EQ(last["type"], "end");
  EXPECT_EQ(last["code"], 128 + SIGTERM);
  std::string watch;
  for (int i = 0; i < 50; ++i) {
    watch = Tmux({"capture-pane", "-p", "-t", "watch"}).out;
    if (watch.find("the run ended, code 143") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(watch.find("the run ended, code 143"), std::string::npos) << watch;
  EXPECT_NE(watch.find("COLLECTIVE_MISMATCH"), std::string::npos) << "the last frame stays: " << watch;
}

}  // namespace
}  // namespace dsd
