#include "tui/stream.h"

#include <gtest/gtest.h>

#include "diagnosis/engine.h"
#include "diagnosis/testing.h"

namespace dsd::tui {
namespace {

constexpr int64_t kStart = 1'000'000'000'000;

// `n` ranks computing at step 3 after 4 s; rank 0 then enters save_checkpoint's barrier alone.
diagnosis::JobState Job(int n, bool hung) {
  auto job = diagnosis::testing::CheckpointHangJob(n, kStart + (hung ? 12'000'000'000 : 4'000'000'000), kStart + 4'000'000'000);
  for (auto& s : job.ranks) {
    s.step = 3;
    s.phase = "forward";
    s.phase_ns = kStart + 3'000'000'000;
    if (!hung) s.in_flight.reset(), s.last.reset(), s.recent.clear();
  }
  return job;
}

Snapshot Snap(int n, bool hung, int64_t now_ns = 0) {
  auto job = Job(n, hung);
  if (now_ns) job.now_ns = now_ns;
  return BuildSnapshot(job, diagnosis::Diagnose(job), {"train --steps 9", kStart, 0.75});
}

void ExpectSameScreen(const Snapshot& a, const Snapshot& b) {
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].rank, b.rows[i].rank);
    EXPECT_EQ(a.rows[i].node, b.rows[i].node);
    EXPECT_EQ(a.rows[i].state, b.rows[i].state);
    EXPECT_EQ(a.rows[i].where, b.rows[i].where);
    EXPECT_EQ(a.rows[i].tone, b.rows[i].tone);
    EXPECT_EQ(a.rows[i].culprit, b.rows[i].culprit);
    EXPECT_NEAR(a.rows[i].in_state_s, b.rows[i].in_state_s, 0.06) << "rank " << i;
  }
  EXPECT_EQ(a.findings, b.findings);
  EXPECT_EQ(a.overall, b.overall);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.running, b.running);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_DOUBLE_EQ(a.elapsed_s, b.elapsed_s);
  ASSERT_EQ(a.classes.size(), b.classes.size());
  for (size_t i = 0; i < a.classes.size(); ++i) {
    EXPECT_EQ(a.classes[i].description, b.classes[i].description);
    EXPECT_EQ(a.classes[i].ranks, b.classes[i].ranks);
  }
}

TEST(StreamTest, DecodedTicksRebuildTheSnapshotsAndOnlyChangesAreSent) {
  StreamEncoder enc;
  StreamDecoder dec;
  ASSERT_TRUE(dec.Apply(HeaderEvent("train --steps 9", 4, 1700000000000)).ok());
  Snapshot healthy = Snap(4, false);
  auto first = enc.Tick(healthy);
  EXPECT_EQ(first["rows"].size(), 4u);
  ASSERT_TRUE(first.contains("findings"));
  ASSERT_TRUE(dec.Apply(first).ok());
  ExpectSameScreen(dec.snapshot(), healthy);
  // The same states 0.2 s later: no rows, no findings, no classes; the times still advance.
  Snapshot later = Snap(4, false, kStart + 4'200'000'000);
  auto quiet = enc.Tick(later);
  EXPECT_TRUE(quiet["rows"].empty()) << quiet.dump();
  EXPECT_FALSE(quiet.contains("findings"));
  EXPECT_FALSE(quiet.contains("classes"));
  ASSERT_TRUE(dec.Apply(quiet).ok());
  ExpectSameScreen(dec.snapshot(), later);
  EXPECT_NEAR(dec.snapshot().rows[2].in_state_s, 1.2, 1e-6);
  // The hang: every row changes, the finding arrives.
  Snapshot hung = Snap(4, true);
  auto change = enc.Tick(hung);
  EXPECT_EQ(change["rows"].size(), 4u);
  ASSERT_TRUE(change.contains("findings"));
  ASSERT_TRUE(dec.Apply(change).ok());
  ExpectSameScreen(dec.snapshot(), hung);
  EXPECT_EQ(dec.snapshot().overall, "HUNG");
  EXPECT_TRUE(dec.snapshot().rows[0].culprit);
  ASSERT_FALSE(dec.snapshot().findings.empty());
  EXPECT_EQ(dec.snapshot().findings[0].code, "COLLECTIVE_MISMATCH");
}

TEST(StreamTest, EvidenceThatOnlyCountsSecondsIsResentEveryFewSecondsAndOnTheLastTick) {
  StreamEncoder enc;
  StreamDecoder dec;
  ASSERT_TRUE(dec.Apply(HeaderEvent("train", 4, 0)).ok());
  constexpr int64_t kHung = kStart + 12'000'000'000;
  ASSERT_TRUE(dec.Apply(enc.Tick(Snap(4, true, kHung))).ok());
  // 1 s on: "for 9.0 s" instead of "for 8.0 s" is no news yet.
  Snapshot one_on = Snap(4, true, kHung + 1'000'000'000);
  ASSERT_NE(one_on.findings, dec.snapshot().findings) << "the evidence counts seconds";
  auto tick = enc.Tick(one_on);
  EXPECT_FALSE(tick.contains("findings")) << tick.dump();
  EXPECT_TRUE(tick["rows"].empty()) << tick.dump();
  // After kEvidenceRefreshS the evidence goes out again.
  Snapshot later = Snap(4, true, kHung + static_cast<int64_t>(kEvidenceRefreshS * 1e9));
  tick = enc.Tick(later);
  ASSERT_TRUE(tick.contains("findings"));
  ASSERT_TRUE(dec.Apply(tick).ok());
  EXPECT_EQ(dec.snapshot().findings, later.findings);
  // The run's last tick sends it at once: a replay ends on the final report's evidence.
  Snapshot last = Snap(4, true, kHung + static_cast<int64_t>(kEvidenceRefreshS * 1e9) + 500'000'000);
  EXPECT_FALSE(enc.Tick(last).contains("findings"));
  Snapshot final_state = Snap(4, true, kHung + static_cast<int64_t>(kEvidenceRefreshS * 1e9) + 1'000'000'000);
  tick = enc.Tick(final_state, /*last=*/true);
  ASSERT_TRUE(tick.contains("findings"));
  ASSERT_TRUE(dec.Apply(tick).ok());
  EXPECT_EQ(dec.snapshot().findings, final_state.findings);
}

TEST(StreamTest, KeyframeBringsANewViewerToTheSameStateWithLogs) {
  StreamEncoder enc;
  StreamDecoder live;
  ASSERT_TRUE(live.Apply(HeaderEvent("train", 4, 1)).ok());
  ASSERT_TRUE(live.Apply(enc.Tick(Snap(4, false))).ok());
  ASSERT_TRUE(live.Apply(LogEvent(4, 0, {"step 1", "step 2"})).ok());
  ASSERT_TRUE(live.Apply(enc.Tick(Snap(4, true))).ok());
  ASSERT_TRUE(live.Apply(LogEvent(12, 0, {"saving checkpoint"})).ok());
  ASSERT_TRUE(live.Apply(EndEvent(13, 1)).ok());
  StreamDecoder late;
  for (const auto& e : live.Keyframe()) ASSERT_TRUE(late.Apply(e).ok()) << e.dump();
  ExpectSameScreen(late.snapshot(), live.snapshot());
  ASSERT_NE(late.logs().Find(0), nullptr);
  EXPECT_EQ(*late.logs().Find(0), (std::deque<std::string>{"step 1", "step 2", "saving checkpoint"}));
  EXPECT_TRUE(late.ended());
  EXPECT_EQ(late.end_code(), 1);
  EXPECT_EQ(late.snapshot().job, "train");
}

TEST(StreamTest, AHealthyTickOf4096ComputingRanksIsSmall) {
  StreamEncoder enc;
  (void)enc.Tick(Snap(4096, false));
  auto next = enc.Tick(Snap(4096, false, kStart + 4'200'000'000));
  EXPECT_LT(next.dump().size(), 300u) << "nothing changed but time: " << next.dump().substr(0, 300);
}

TEST(StreamTest, BadEventsAreRefusedByFieldAndChangeNothing) {
  StreamEncoder enc;
  StreamDecoder dec;
  ASSERT_TRUE(dec.Apply(HeaderEvent("train", 4, 1)).ok());
  ASSERT_TRUE(dec.Apply(enc.Tick(Snap(4, true))).ok());
  Snapshot before = dec.snapshot();
  nlohmann::json bad = {{"type", "tick"}, {"t", 20}, {"overall", "running"}, {"nodes", 2}, {"ranks", 4}, {"running", 4}, {"step", 1}, {"steps_per_s", 1}};
  bad["rows"] = {{{"rank", 9}, {"node", "n"}, {"tone", "ok"}, {"state", "compute"}, {"where", ""}}};
  Status st = dec.Apply(bad);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("rank 9"), std::string::npos) << st.message();
  ExpectSameScreen(dec.snapshot(), before);
  st = dec.Apply({{"type", "log"}, {"t", 1}, {"rank", 0}});
  EXPECT_NE(st.message().find("\"lines\""), std::string::npos) << st.message();
  st = dec.Apply({{"type", "header"}, {"t", 0}, {"version", 99}, {"job", "x"}, {"ranks", 1}});
  EXPECT_NE(st.message().find("version 99"), std::string::npos) << st.message();
  st = dec.Apply({{"t", 0}});
  EXPECT_NE(st.message().find("\"type\""), std::string::npos) << st.message();
  EXPECT_TRUE(dec.Apply({{"type", "from_the_future"}, {"t", 3}}).ok()) << "unknown types are skipped";
}

}  // namespace
}  // namespace dsd::tui
