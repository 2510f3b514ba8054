#include "tui/live.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/file.h"

namespace dsd::tui {
namespace {

namespace fs = std::filesystem;

Snapshot TwoRanks(double t, const std::string& state) {
  Snapshot s;
  s.job = "train";
  s.nodes = 1;
  s.ranks = 2;
  s.running = 2;
  s.elapsed_s = t;
  s.overall = "running";
  for (int r = 0; r < 2; ++r) s.rows.push_back({r, "node-0", Tone::kOk, state, "phase forward", 0.5, false});
  return s;
}

class LiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dsd_live_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LiveTest, RecordsEveryEventAndAViewerGetsAKeyframeThenTheStream) {
  Publisher::Options o{(dir_ / "events.jsonl").string(), "127.0.0.1:0", "secret-token"};
  auto pub = Publisher::Start(o);
  ASSERT_TRUE(pub.ok()) << pub.status().message();
  ASSERT_GT((*pub)->endpoint().port, 0);
  StreamEncoder enc;
  (*pub)->Publish({HeaderEvent("train", 2, 1), enc.Tick(TwoRanks(1, "compute")), LogEvent(1, 1, {"hello from 1"})});

  // A wrong token is refused, with the coordinator's reason.
  auto wrong = LiveClient::Connect((*pub)->endpoint(), "guess", std::chrono::seconds(5));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(wrong.status().message().find("authentication failed"), std::string::npos) << wrong.status().message();

  auto viewer = LiveClient::Connect((*pub)->endpoint(), "secret-token", std::chrono::seconds(5));
  ASSERT_TRUE(viewer.ok()) << viewer.status().message();
  StreamDecoder dec;
  // Keyframe: header, tick, the log of rank 1.
  for (int i = 0; i < 3; ++i) {
    auto e = viewer->Next(std::chrono::seconds(5));
    ASSERT_TRUE(e.ok()) << e.status().message();
    ASSERT_TRUE(dec.Apply(*e).ok());
  }
  EXPECT_EQ(dec.snapshot().rows.size(), 2u);
  ASSERT_NE(dec.logs().Find(1), nullptr);
  EXPECT_EQ(dec.logs().Find(1)->back(), "hello from 1");
  // Then what is published after.
  (*pub)->Publish({enc.Tick(TwoRanks(2, "wait")), EndEvent(2, 0)});
  for (int i = 0; i < 2; ++i) {
    auto e = viewer->Next(std::chrono::seconds(5));
    ASSERT_TRUE(e.ok()) << e.status().message();
    ASSERT_TRUE(dec.Apply(*e).ok());
  }
  EXPECT_EQ(dec.snapshot().rows[0].state, "wait");
  EXPECT_TRUE(dec.ended());
  EXPECT_EQ((*pub)->viewers(), 1u);
  pub->reset();
  auto after = viewer->Next(std::chrono::seconds(5));
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable) << "the stream ends with the run";

  // The recording holds all five events, in order.
  std::vector<std::string> warnings;
  auto events = ReadEventFile((dir_ / "events.jsonl").string(), &warnings);
  ASSERT_TRUE(events.ok()) << events.status().message();
  ASSERT_EQ(events->size(), 5u);
  EXPECT_EQ((*events)[0].event["type"], "header");
  EXPECT_EQ((*events)[4].event["type"], "end");
  EXPECT_EQ((*events)[4].line, 5);
  EXPECT_TRUE(warnings.empty());
}

TEST_F(LiveTest, ARecordingCutShortLosesOnlyItsLastLineAndABadLineIsNamed) {
  std::string path = (dir_ / "events.jsonl").string();
  std::string good = HeaderEvent("train", 2, 1).dump() + "\n" + EndEvent(1, 0).dump() + "\n";
  ASSERT_TRUE(WriteFileAtomic(path, good + "{\"type\":\"tick\",\"t\":1.2,\"ove").ok());
  std::vector<std::string> warnings;
  auto events = ReadEventFile(path, &warnings);
  ASSERT_TRUE(events.ok()) << events.status().message();
  EXPECT_EQ(events->size(), 2u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("events.jsonl:3"), std::string::npos) << warnings[0];

  ASSERT_TRUE(
      WriteFileAtomic(path, HeaderEvent("train", 2, 1).dump() + "\nnot json\n" + EndEvent(1, 0).dump() + "\n").ok());
  events = ReadEventFile(path, &warnings);
  ASSERT_FALSE(events.ok());
  EXPECT_NE(events.status().message().find("events.jsonl:2: not a JSON object"), std::string::npos)
      << events.status().message();

  // A recording whose writer met a full disk ends with its own stop line, which says why.
  warnings.clear();
  ASSERT_TRUE(
      WriteFileAtomic(path, HeaderEvent("train", 2, 1).dump() +
                                "\n{\"type\":\"recording_stopped\",\"t\":3.5,\"reason\":\"No space left on device\"}\n")
          .ok());
  events = ReadEventFile(path, &warnings);
  ASSERT_TRUE(events.ok()) << events.status().message();
  EXPECT_EQ(events->size(), 1u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("events.jsonl:2: the recording stops here: No space left on device"), std::string::npos)
      << warnings[0];

  // Odd shapes are never an exception: a type or a reason that is not a string.
  warnings.clear();
  ASSERT_TRUE(WriteFileAtomic(path, HeaderEvent("train", 2, 1).dump() +
                                        "\n{\"type\":5}\n{\"type\":\"recording_stopped\",\"reason\":7}\n")
                  .ok());
  events = ReadEventFile(path, &warnings);
  ASSERT_TRUE(events.ok()) << events.status().message();
  EXPECT_EQ(events->size(), 2u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("a write failed"), std::string::npos) << warnings[0];

  events = ReadEventFile((dir_ / "missing.jsonl").string(), &warnings);
  ASSERT_FALSE(events.ok());
  EXPECT_NE(events.status().message().find("missing.jsonl"), std::string::npos);
}

TEST_F(LiveTest, AViewerThatStopsReadingDoesNotBlockPublishing) {
  auto pub = Publisher::Start({"", "127.0.0.1:0", "t"});
  ASSERT_TRUE(pub.ok());
  auto viewer = LiveClient::Connect((*pub)->endpoint(), "t", std::chrono::seconds(5));
  ASSERT_TRUE(viewer.ok());
  // 80 MiB of log for a viewer that reads nothing: Publish returns, the viewer is dropped.
  std::vector<std::string> lines(100, std::string(4000, 'x'));
  StreamEncoder enc;
  (*pub)->Publish({HeaderEvent("train", 2, 1), enc.Tick(TwoRanks(1, "compute"))});
  for (int i = 0; i < 200; ++i) (*pub)->Publish({LogEvent(1, 0, lines)});
  for (int i = 0; i < 50 && (*pub)->viewers() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ((*pub)->viewers(), 0u);
}

}  // namespace
}  // namespace dsd::tui
