#include "tui/model.h"

#include <gtest/gtest.h>

#include "diagnosis/engine.h"
#include "diagnosis/testing.h"

namespace dsd::tui {
namespace {

constexpr int64_t kNow = 1'000'000'000'000;

// The rank-0-only save_checkpoint hang of `n` ranks, waiting for 2 s.
diagnosis::JobState CheckpointHang(int n) { return diagnosis::testing::CheckpointHangJob(n, kNow, kNow - 2'000'000'000); }

std::string All(const Frame& f) {
  std::string s;
  for (const auto& l : f.Text()) s += l + "\n";
  return s;
}

class FrameSizeTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(FrameSizeTest, EveryRunFitsItsScreenAndNoRunsOverlap) {
  auto [cols, rows] = GetParam();
  for (int n : {4, 64, 4096}) {
    auto job = CheckpointHang(n);
    auto d = diagnosis::Diagnose(job);
    LogTails tails;
    tails.Append(0, "engine ready");
    tails.Append(0, "saving checkpoint");
    Snapshot s = BuildSnapshot(job, d, {"rank0_only_checkpoint", kNow - 5'000'000'000, 1.5});
    Layout layout = ComputeLayout(cols, rows);
    ViewState full_log, help;
    full_log.full_log = true;
    help.help = true;
    for (const ViewState& v : {full_log, help}) {  // these views fit too
      Frame g = BuildFrame(s, layout, v, &tails, {"dsdoctor replay", "replay 1.0s/9.0s x1", "quit", "left/right seek"});
      for (size_t i = 0; i < g.runs.size(); ++i) {
        ASSERT_LE(g.runs[i].x + static_cast<int>(g.runs[i].text.size()), cols) << g.runs[i].text;
        ASSERT_LT(g.runs[i].y, rows);
        for (size_t j = i + 1; j < g.runs.size(); ++j)
          ASSERT_FALSE(g.runs[i].y == g.runs[j].y && g.runs[i].x < g.runs[j].x + static_cast<int>(g.runs[j].text.size()) &&
                       g.runs[j].x < g.runs[i].x + static_cast<int>(g.runs[i].text.size()))
              << g.runs[i].text << " / " << g.runs[j].text;
      }
    }
    Frame f = BuildFrame(s, layout, {}, &tails);
    for (size_t i = 0; i < f.runs.size(); ++i) {
      const tui::Run& a = f.runs[i];
      ASSERT_GE(a.x, 0);
      ASSERT_LT(a.y, rows);
      ASSERT_LE(a.x + static_cast<int>(a.text.size()), cols) << "'" << a.text << "' at " << a.x << "," << a.y;
      for (size_t j = i + 1; j < f.runs.size(); ++j) {
        const tui::Run& b = f.runs[j];
        bool overlap = a.y == b.y && a.x < b.x + static_cast<int>(b.text.size()) && b.x < a.x + static_cast<int>(a.text.size());
        ASSERT_FALSE(overlap) << "'" << a.text << "' and '" << b.text << "' on row " << a.y;
      }
    }
    std::string text = All(f);
    EXPECT_NE(text.find("COLLECTIVE_MISMATCH"), std::string::npos) << text;
    EXPECT_NE(text.find("HUNG"), std::string::npos);
    EXPECT_EQ(f.class_view, n > layout.ranks.height - 1) << n << " ranks";
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, FrameSizeTest, ::testing::Values(std::pair{80, 24}, std::pair{40, 12}, std::pair{120, 40}, std::pair{250, 70}));

TEST(FrameTest, At80x24TheCulpritAndTheRemedyAreOnScreen) {
  auto job = CheckpointHang(4);
  auto d = diagnosis::Diagnose(job);
  LogTails tails;
  tails.Append(0, "rank 0: saving");
  tails.Append(1, "rank 1: step 5");
  Snapshot s = BuildSnapshot(job, d, {"rank0_only_checkpoint", kNow - 65'000'000'000, 0.5});
  EXPECT_TRUE(s.rows[0].culprit);
  EXPECT_FALSE(s.rows[1].culprit);
  Frame f = BuildFrame(s, ComputeLayout(80, 24), {}, &tails);
  std::string text = All(f);
  EXPECT_NE(text.find("!0    node-0     wait     barrier#5 @save_checkp"), std::string::npos) << "the culprit is marked: " << text;
  EXPECT_NE(text.find(" 1    node-0     wait     all_reduce#5"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: save_checkpoint makes collectives"), std::string::npos) << text;
  EXPECT_NE(text.find("1m05s"), std::string::npos) << "elapsed";
  EXPECT_NE(text.find("log of rank 0"), std::string::npos);
  EXPECT_NE(text.find("rank 0: saving"), std::string::npos);
  EXPECT_NE(text.find("q quit"), std::string::npos);
  // Moving the selection shows the next rank's log.
  ViewState v;
  v.selected = 1;
  text = All(BuildFrame(s, ComputeLayout(80, 24), v, &tails));
  EXPECT_NE(text.find("rank 1: step 5"), std::string::npos) << text;
  // A filter keeps the matching rows only.
  v = {};
  v.filter = "barrier";
  auto rows = VisibleRows(s, v, false);
  EXPECT_EQ(rows, std::vector<int>{0});
}

TEST(FrameTest, LargeJobsShowEquivalenceClassesWithTheCulpritClass) {
  auto job = CheckpointHang(4096);
  auto d = diagnosis::Diagnose(job);
  Snapshot s = BuildSnapshot(job, d, {"big", kNow, 0});
  Frame f = BuildFrame(s, ComputeLayout(80, 24), {});
  ASSERT_TRUE(f.class_view);
  std::string text = All(f);
  EXPECT_NE(text.find(" 4095  1-4095"), std::string::npos) << text;
  EXPECT_NE(text.find("!1     0 "), std::string::npos) << text;
}

TEST(SnapshotTest, OverallStateIsStartingUntilARankRunsAndFinishedOrFailedAfter) {
  diagnosis::JobState job;
  job.world_size = 2;
  job.now_ns = kNow;
  for (int r = 0; r < 2; ++r) {
    diagnosis::RankState s;
    s.rank = r;
    s.node = "node-0";
    s.status = diagnosis::RankStatus::kNotStarted;
    job.ranks.push_back(s);
  }
  diagnosis::Diagnosis none;
  EXPECT_EQ(BuildSnapshot(job, none, {}).overall, "starting");
  job.ranks[0].status = diagnosis::RankStatus::kRunning;
  EXPECT_EQ(BuildSnapshot(job, none, {}).overall, "running");
  for (auto& r : job.ranks) r.status = diagnosis::RankStatus::kExited, r.has_trace = true, r.step = 7 + r.rank;
  EXPECT_EQ(BuildSnapshot(job, none, {}).overall, "finished");
  EXPECT_EQ(BuildSnapshot(job, none, {}).step, 8u) << "the furthest step once none runs";
  job.ranks[1].exit_code = 3;
  EXPECT_EQ(BuildSnapshot(job, none, {}).overall, "failed");
  // A frame before any snapshot (a replay's header alone) says so instead of showing an empty table.
  std::string text = All(BuildFrame(Snapshot{}, ComputeLayout(80, 24), {}));
  EXPECT_NE(text.find("starting"), std::string::npos) << text;
  EXPECT_NE(text.find("no rank has reported yet"), std::string::npos) << text;
}

TEST(KeyTest, KeysMoveFilterPauseAndQuit) {
  ViewState v;
  EXPECT_FALSE(ApplyKey(v, kKeyDown, 4, 2));
  EXPECT_FALSE(ApplyKey(v, 'j', 4, 2));
  EXPECT_EQ(v.selected, 2);
  ApplyKey(v, kKeyPageDown, 4, 2);
  EXPECT_EQ(v.selected, 3) << "clamped to the last row";
  ApplyKey(v, kKeyUp, 4, 2);
  EXPECT_EQ(v.selected, 2);
  ApplyKey(v, 'p', 4, 2);
  EXPECT_TRUE(v.paused);
  ApplyKey(v, '/', 4, 2);
  for (char c : std::string("node-1")) ApplyKey(v, c, 4, 2);
  EXPECT_FALSE(ApplyKey(v, 'q', 4, 2)) << "q while typing a filter is text";
  ApplyKey(v, kKeyBackspace, 4, 2);
  ApplyKey(v, '\n', 4, 2);
  EXPECT_EQ(v.filter, "node-1");
  EXPECT_FALSE(v.editing_filter);
  ApplyKey(v, '\n', 4, 2);
  EXPECT_TRUE(v.full_log);
  EXPECT_TRUE(ApplyKey(v, 'q', 4, 2));
}

TEST(FrameTest, FullLogScrollsAndSearchJumpsToTheNewestMatchThenOlderOnes) {
  auto job = CheckpointHang(4);
  auto d = diagnosis::Diagnose(job);
  Snapshot s = BuildSnapshot(job, d, {"train", kNow - 5'000'000'000, 1});
  LogTails tails;
  for (int i = 0; i < 100; ++i) tails.Append(0, (i == 10 || i == 40 ? "NCCL WARN line " : "step line ") + std::to_string(i));
  ViewState v;
  ApplyKey(v, '\n', 4, 10);
  ASSERT_TRUE(v.full_log);
  std::string text = All(BuildFrame(s, ComputeLayout(80, 24), v, &tails));
  EXPECT_NE(text.find("step line 99"), std::string::npos) << "the end first: " << text;
  EXPECT_NE(text.find("of last 100"), std::string::npos) << text;
  ApplyKey(v, kKeyPageUp, 4, 10);
  ApplyKey(v, kKeyUp, 4, 10);
  EXPECT_EQ(v.log_scroll, 11);
  text = All(BuildFrame(s, ComputeLayout(80, 24), v, &tails));
  EXPECT_EQ(text.find("step line 99"), std::string::npos) << "scrolled up: " << text;
  EXPECT_NE(text.find("step line 88"), std::string::npos) << text;
  // Search: '/', text, enter; the newest match first, n for the older one.
  ApplyKey(v, '/', 4, 10);
  for (char c : std::string("NCCL WARN")) ApplyKey(v, c, 4, 10);
  EXPECT_FALSE(ApplyKey(v, 'q', 4, 10)) << "q in a search is text";
  ApplyKey(v, kKeyBackspace, 4, 10);
  ApplyKey(v, '\n', 4, 10);
  EXPECT_EQ(v.search, "NCCL WARN");
  Frame f = BuildFrame(s, ComputeLayout(80, 24), v, &tails);
  EXPECT_EQ(f.search_matches, 2);
  text = All(f);
  EXPECT_NE(text.find("NCCL WARN line 40"), std::string::npos) << text;
  EXPECT_EQ(text.find("NCCL WARN line 10"), std::string::npos) << text;
  ApplyKey(v, 'n', 4, 10);
  text = All(BuildFrame(s, ComputeLayout(80, 24), v, &tails));
  EXPECT_NE(text.find("NCCL WARN line 10"), std::string::npos) << text;
  // Matching lines are highlighted.
  f = BuildFrame(s, ComputeLayout(80, 24), v, &tails);
  bool highlighted = false;
  for (const auto& r : f.runs) highlighted |= r.text.find("NCCL WARN line 10") != std::string::npos && r.tone == Tone::kWaiting;
  EXPECT_TRUE(highlighted);
  // Enter goes back to the ranks; o asks the caller for a pager.
  ApplyKey(v, '\n', 4, 10);
  EXPECT_FALSE(v.full_log);
  ApplyKey(v, 'o', 4, 10);
  EXPECT_TRUE(v.open_pager);
}

TEST(FrameTest, HelpListsTheKeysWithTheViewsOwnAndQLeavesItFirst) {
  auto job = CheckpointHang(4);
  Snapshot s = BuildSnapshot(job, diagnosis::Diagnose(job), {"train", kNow, 1});
  ViewState v;
  ApplyKey(v, '?', 4, 10);
  ASSERT_TRUE(v.help);
  std::string text = All(BuildFrame(s, ComputeLayout(80, 24), v, nullptr, {"dsdoctor attach", "attached 127.0.0.1:5", "quit (detaches; the job runs on)", ""}));
  EXPECT_NE(text.find("quit (detaches; the job runs on)"), std::string::npos) << text;
  EXPECT_NE(text.find("$PAGER"), std::string::npos) << text;
  EXPECT_NE(text.find("HUNG [attached 127.0.0.1:5]"), std::string::npos) << text;
  EXPECT_EQ(text.find("COLLECTIVE_MISMATCH"), std::string::npos) << "the help takes the body: " << text;
  EXPECT_FALSE(ApplyKey(v, 'q', 4, 10)) << "q closes the help";
  EXPECT_FALSE(v.help);
  EXPECT_TRUE(ApplyKey(v, 'q', 4, 10));
}

TEST(LogTailsTest, KeepsTheLastLinesWithinTheLineAndByteCaps) {
  LogTails t;
  for (size_t i = 0; i < LogTails::kMaxLines + 50; ++i) t.Append(3, "line " + std::to_string(i));
  ASSERT_NE(t.Find(3), nullptr);
  EXPECT_EQ(t.Find(3)->size(), LogTails::kMaxLines);
  EXPECT_EQ(t.Find(3)->back(), "line " + std::to_string(LogTails::kMaxLines + 49));
  EXPECT_EQ(t.Find(4), nullptr);
  std::string big(10 * 1024, 'x');
  for (int i = 0; i < 10; ++i) t.Append(5, big);
  EXPECT_EQ(t.Find(5)->size(), LogTails::kMaxBytes / big.size());
}

TEST(FrameTest, TinyTerminalSaysSo) {
  Snapshot s;
  Frame f = BuildFrame(s, ComputeLayout(30, 8), {});
  ASSERT_EQ(f.runs.size(), 1u);
  EXPECT_NE(f.runs[0].text.find("too small"), std::string::npos);
  EXPECT_LE(static_cast<int>(f.runs[0].text.size()), 30);
}

}  // namespace
}  // namespace dsd::tui
