#include "common/run_files.h"

#include <gtest/gtest.h>

namespace dsd {
namespace {

TEST(RunFilesTest, EveryRankFileNameParsesBackToItsRankAndKind) {
  for (RankFile kind : {RankFile::kLog, RankFile::kTrace, RankFile::kExit, RankFile::kStack})
    for (int rank : {0, 7, 4095, 9999999}) {
      const std::string name = RankFileName(rank, kind);
      auto parsed = ParseRunFileName(name);
      ASSERT_TRUE(parsed.has_value()) << name;
      EXPECT_EQ(parsed->rank, rank);
      EXPECT_EQ(parsed->kind, kind);
    }
  EXPECT_EQ(RankFileName(3, RankFile::kTrace), "rank-3.trace");
  EXPECT_EQ(RankFileName(12, RankFile::kStack), "rank-12.stack");
}

TEST(RunFilesTest, OtherNamesAreNotRankFiles) {
  for (const char* name : {"run.json", "events.jsonl", "rank-.log", "rank-3", "rank-3.", "rank-3.txt", "rank-3.log.tmp",
                           "rank-12345678.log", "Rank-3.log", "rank--3.log", "rank-3x.log", "xrank-3.log", ""})
    EXPECT_FALSE(ParseRunFileName(name).has_value()) << name;
  EXPECT_FALSE(ParseRunFileName("rank-007.log").has_value()) << "RankFileName never writes leading zeros";
  EXPECT_EQ(ParseRunFileName("rank-0.log")->rank, 0);
}

TEST(RunFilesTest, PathsAreTheDirsFiles) {
  RunDir d("/tmp/logs");
  EXPECT_EQ(d.RankLog(2), "/tmp/logs/rank-2.log");
  EXPECT_EQ(d.RankExit(2), "/tmp/logs/rank-2.exit");
  EXPECT_EQ(d.Manifest(), "/tmp/logs/run.json");
  EXPECT_EQ(d.Events(), "/tmp/logs/events.jsonl");
  EXPECT_EQ(d.ViewerAddr(), "/tmp/logs/viewer.addr");
  EXPECT_EQ(d.ViewerToken(), "/tmp/logs/viewer.token");
  EXPECT_EQ(d.RunId(), "/tmp/logs/run.id");
  EXPECT_EQ(RunDir("/tmp/logs/").RankTrace(0), "/tmp/logs/rank-0.trace");
  EXPECT_EQ(RunDir("").RankTrace(0), "rank-0.trace") << "no dir: the name alone";
  auto parsed = ParseRunFilePath(d.RankStack(5));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->rank, 5);
  EXPECT_EQ(parsed->kind, RankFile::kStack);
  EXPECT_FALSE(ParseRunFilePath("/tmp/rank-5.log/other").has_value());
}

}  // namespace
}  // namespace dsd
