#include "collectors/torchelastic_error.h"

#include <gtest/gtest.h>

#include "common/file.h"

namespace dsd::collectors {
namespace {

// Real files, made by torch 2.15's torchrun (tests/fixtures/torchelastic/make_error_files.sh).
TEST(TorchElasticErrorTest, AWorkersRecordedErrorGivesItsTracebackAndTime) {
  auto text = ReadFile(FIXTURES_DIR "/torchelastic/worker_rank_1.json");
  ASSERT_TRUE(text.ok());
  auto e = ParseTorchElasticError(*text);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "ValueError: batch 2 has 7 samples, the model wants 8");
  EXPECT_NE(e->py_callstack.find("fail_rank1.py\", line 11, in step"), std::string::npos) << e->py_callstack;
  EXPECT_GT(e->timestamp_s, 1'700'000'000);
  EXPECT_EQ(e->error_code, 0);
  const std::string log = TorchElasticErrorAsLog(*e);
  EXPECT_EQ(log.rfind("Traceback (most recent call last):", 0), 0u) << log;
  EXPECT_NE(log.find("ValueError: batch 2 has 7 samples, the model wants 8\n"), std::string::npos) << log;
}

TEST(TorchElasticErrorTest, TorchrunsCopyCarriesTheWorkersExitCode) {
  auto text = ReadFile(FIXTURES_DIR "/torchelastic/torchrun_root_cause.json");
  ASSERT_TRUE(text.ok());
  auto e = ParseTorchElasticError(*text);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->error_code, -6) << "torch 2.15's gloo aborts at exit: SIGABRT";
  EXPECT_NE(TorchElasticErrorAsLog(*e).find("exitcode: -6 (killed by signal 6)"), std::string::npos);
}

TEST(TorchElasticErrorTest, TheOlderFormAndOtherJsonAreToldApart) {
  auto old = ParseTorchElasticError(R"({"message": "Signal 9 (SIGKILL) received by PID 42", "timestamp": 1700000001})");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->message, "Signal 9 (SIGKILL) received by PID 42");
  EXPECT_EQ(old->timestamp_s, 1700000001);
  const char* not_error_files[] = {
      "",
      "Traceback (most recent call last):",
      R"({"level": "info", "msg": "step 1"})",               // a JSON-lines log's line
      "{\"message\": \"a\"}\n{\"message\": \"b\"}\n",        // two documents: a JSON-lines log
      R"({"message": 42})",                                  // a message of another type
      R"({"message": {"extraInfo": {"py_callstack": 7}}})",  // nothing to say
      R"([{"message": "x"}])",
  };
  for (const char* text : not_error_files) EXPECT_FALSE(ParseTorchElasticError(text).has_value()) << text;
  auto odd = ParseTorchElasticError(
      R"({"message": {"message": "E", "extraInfo": {"timestamp": "soon", "py_callstack": null}, "errorCode": 99999}})");
  ASSERT_TRUE(odd.has_value()) << "fields of other types are left out, never thrown on";
  EXPECT_EQ(odd->timestamp_s, 0);
  EXPECT_EQ(odd->error_code, 0);
  EXPECT_EQ(TorchElasticErrorAsLog(*odd), "E\n");
}

TEST(TorchElasticErrorTest, OnlyAFileNamedForItsRankGivesTheRank) {
  EXPECT_EQ(TorchElasticErrorRank("/x/rank_3.json"), 3);
  EXPECT_EQ(TorchElasticErrorRank("rank-12.error.json"), 12);
  EXPECT_EQ(TorchElasticErrorRank("/logs/attempt_0/1/error.json"), -1) << "a local rank, not the job's";
  EXPECT_EQ(TorchElasticErrorRank("ranks.json"), -1);
  EXPECT_EQ(TorchElasticErrorRank("rank_99999999.json"), -1);
}

}  // namespace
}  // namespace dsd::collectors
