#include "collectors/flight_recorder.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/file.h"
#include "diagnosis/engine.h"
#include "diagnosis/report.h"

namespace dsd::collectors {
namespace {

// Real dumps of torch 2.15 (gloo, 3 ranks): rank 0 in broadcast#4, ranks 1-2 in all_reduce#4
// (tests/fixtures/flight_recorder/make_gloo_dumps.py made them).
const std::string kGlooMismatch = std::string(FIXTURES_DIR) + "/flight_recorder/torch2.15_gloo_mismatch";

TEST(FlightRecorderTest, RealDumpsBecomeTraceRecordsJoinedByGroupAndSequence) {
  auto d = ReadFlightRecorderDump(kGlooMismatch + "/rank_0");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->version, "2.10");
  auto r = RankStateFromDump(*d);
  ASSERT_EQ(r.recent.size(), 4u);
  EXPECT_EQ(r.recent[0].op, "all_reduce");
  EXPECT_EQ(r.recent[0].seq, 1u);
  EXPECT_EQ(r.recent[0].state, "completed");
  EXPECT_EQ(r.recent[0].dtype, "float32");
  EXPECT_EQ(r.recent[0].count, 4u);
  EXPECT_EQ(r.recent[0].comm, 0u) << "the default group is the world";
  ASSERT_TRUE(r.in_flight.has_value());
  EXPECT_EQ(r.in_flight->op, "broadcast");
  EXPECT_EQ(r.in_flight->seq, 4u);
  EXPECT_EQ(r.in_flight->callsite, "make_gloo_dumps.py:31") << "the program's frame, past torch's";
}

// Fields of unexpected types (a dump is the user's job's) are left out, never thrown on.
TEST(FlightRecorderTest, FieldsOfTheWrongTypeAreLeftOutNotThrownOn) {
  FlightRecorderDump d;
  d.rank = 1;
  d.doc = nlohmann::json::parse(R"({"entries": [
      {"profiling_name": 7, "is_p2p": "yes", "state": [], "collective_seq_id": "x", "input_sizes": [[2, "a"], 3],
       "input_dtypes": [1], "frames": [{"filename": 5, "name": null, "line": "9"}, 3], "process_group": {"a": 1}},
      {"profiling_name": "nccl:send 1->0", "is_p2p": true, "p2p_seq_id": 2, "state": "started"}]})");
  auto r = RankStateFromDump(d);
  ASSERT_EQ(r.recent.size(), 2u);
  EXPECT_EQ(r.recent[1].op, "send");
  EXPECT_EQ(r.recent[1].peer, 0);
  EXPECT_EQ(r.recent[1].seq, 2u);
  ASSERT_TRUE(r.in_flight.has_value());
  EXPECT_EQ(r.in_flight->op, "send");
}

TEST(FlightRecorderTest, ADirOfDumpsIsDiagnosedAsAJobAndNamesTheOddRank) {
  std::vector<std::string> warnings;
  auto job = LoadFlightRecorderDir(kGlooMismatch, &warnings);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(job->world_size, 3);
  EXPECT_TRUE(job->evidence_missing.empty());
  auto d = diagnosis::Diagnose(*job);
  ASSERT_FALSE(d.findings.empty()) << diagnosis::RenderRunText(*job, d);
  EXPECT_EQ(d.findings[0].code, "COLLECTIVE_MISMATCH") << diagnosis::RenderRunText(*job, d);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{0});
  EXPECT_NE(d.findings[0].summary.find("broadcast#4"), std::string::npos) << d.findings[0].summary;
  EXPECT_NE(d.findings[0].summary.find("all_reduce#4 float32 x8"), std::string::npos) << d.findings[0].summary;
}

TEST(FlightRecorderTest, ARankWithoutADumpIsSaidNeverTakenAsHealthy) {
  auto dir = std::filesystem::temp_directory_path() / ("dsd-fr-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* f : {"rank_0", "rank_1"}) std::filesystem::copy_file(kGlooMismatch + "/" + f, dir / f);
  std::vector<std::string> warnings;
  auto job = LoadFlightRecorderDir(dir.string(), &warnings);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->world_size, 3) << "from the default group's ranks";
  ASSERT_EQ(job->evidence_missing.size(), 1u);
  EXPECT_NE(job->evidence_missing[0].find("rank 2: no Flight Recorder dump"), std::string::npos);
  // A torn dump is a named error, and the rank is missing evidence.
  auto bytes = ReadFile(kGlooMismatch + "/rank_2");
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(WriteFileAtomic((dir / "rank_2").string(), bytes->substr(0, bytes->size() / 2)).ok());
  job = LoadFlightRecorderDir(dir.string(), &warnings);
  ASSERT_TRUE(job.ok());
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings.back().find("rank_2: pickle:"), std::string::npos) << warnings.back();
  EXPECT_EQ(job->evidence_missing.size(), 2u);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(LoadFlightRecorderDir(FIXTURES_DIR, &warnings).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace dsd::collectors
