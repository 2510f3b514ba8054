#include "tui/model.h"

#include <gtest/gtest.h>

#include "diagnosis/engine.h"

namespace dsd::tui {
namespace {

constexpr int64_t kNow = 1'000'000'000'000;

// The rank-0-only save_checkpoint hang of `n` ranks, diagnosed by the real engine.
diagnosis::JobState CheckpointHang(int n) {
  diagnosis::JobState job;
  job.world_size = n;
  job.now_ns = kNow;
  for (int r = 0; r < n; ++r) {
    diagnosis::RankState s;
    s.rank = r;
    s.node = "node-" + std::to_string(r / 2);
    s.status = diagnosis::RankStatus::kRunning;
    s.has_trace = true;
    diagnosis::OpRecord o;
    o.op = r == 0 ? "barrier" : "all_reduce";
    o.seq = 5;
    o.callsite = r == 0 ? "save_checkpoint" : "engine.step";
    o.dtype = r == 0 ? "" : "float32";
    o.count = r == 0 ? 0 : 5508;
    o.state = "started";
    o.started_ns = kNow - 2'000'000'000;
    s.in_flight = o;
    s.last = o;
    s.recent = {o};
    job.ranks.push_back(s);
  }
  return job;
}

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
    std::map<int, std::deque<std::string>> tails = {{0, {"engine ready", "saving checkpoint"}}};
    Snapshot s = BuildSnapshot(job, d, {"rank0_only_checkpoint", kNow - 5'000'000'000, 1.5, &tails});
    Layout layout = ComputeLayout(cols, rows);
    Frame f = BuildFrame(s, layout, {});
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
  std::map<int, std::deque<std::string>> tails = {{0, {"rank 0: saving"}}, {1, {"rank 1: step 5"}}};
  Snapshot s = BuildSnapshot(job, d, {"rank0_only_checkpoint", kNow - 65'000'000'000, 0.5, &tails});
  EXPECT_TRUE(s.rows[0].culprit);
  EXPECT_FALSE(s.rows[1].culprit);
  Frame f = BuildFrame(s, ComputeLayout(80, 24), {});
  std::string text = All(f);
  EXPECT_NE(text.find("!0    node-0     wait     barrier#5 @save_checkp"), std::string::npos) << "the culprit is marked: " << text;
  EXPECT_NE(text.find(" 1    node-0     wait     all_reduce#5"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: save_checkpoint is a collective"), std::string::npos) << text;
  EXPECT_NE(text.find("1m05s"), std::string::npos) << "elapsed";
  EXPECT_NE(text.find("log of rank 0"), std::string::npos);
  EXPECT_NE(text.find("rank 0: saving"), std::string::npos);
  EXPECT_NE(text.find("q quit"), std::string::npos);
  // Moving the selection shows the next rank's log.
  ViewState v;
  v.selected = 1;
  text = All(BuildFrame(s, ComputeLayout(80, 24), v));
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
  Snapshot s = BuildSnapshot(job, d, {"big", kNow, 0, nullptr});
  Frame f = BuildFrame(s, ComputeLayout(80, 24), {});
  ASSERT_TRUE(f.class_view);
  std::string text = All(f);
  EXPECT_NE(text.find(" 4095  1-4095"), std::string::npos) << text;
  EXPECT_NE(text.find("!1     0 "), std::string::npos) << text;
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

TEST(FrameTest, TinyTerminalSaysSo) {
  Snapshot s;
  Frame f = BuildFrame(s, ComputeLayout(30, 8), {});
  ASSERT_EQ(f.runs.size(), 1u);
  EXPECT_NE(f.runs[0].text.find("too small"), std::string::npos);
  EXPECT_LE(static_cast<int>(f.runs[0].text.size()), 30);
}

}  // namespace
}  // namespace dsd::tui
