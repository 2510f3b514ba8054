#include "collectors/slurm_accounting.h"

#include <gtest/gtest.h>

namespace dsd::collectors {
namespace {

using diagnosis::Finding;
using diagnosis::Severity;

// sacct's own format (`sacct -j ID --parsable2 --format JobID,JobName,State,ExitCode,...`) of a
// job whose step 0 was OOM-killed on gpu-02, as slurmdbd records it.
constexpr const char* kOomJob =
    "JobID|JobName|State|ExitCode|DerivedExitCode|NodeList|Elapsed|Start|End\n"
    "4411|train|OUT_OF_MEMORY|0:125|0:0|gpu-[01-02]|00:10:01|2026-11-02T10:00:00|2026-11-02T10:10:01\n"
    "4411.batch|batch|COMPLETED|0:0||gpu-01|00:10:01|2026-11-02T10:00:00|2026-11-02T10:10:01\n"
    "4411.extern|extern|COMPLETED|0:0||gpu-[01-02]|00:10:01|2026-11-02T10:00:00|2026-11-02T10:10:01\n"
    "4411.0|python|OUT_OF_MEMORY|0:125||gpu-02|00:10:00|2026-11-02T10:00:01|2026-11-02T10:10:01\n";

std::vector<SacctRecord> Parsed(const char* text, const std::map<std::string, std::vector<std::string>>& nodes) {
  auto r = ParseSacct(text);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  for (auto& rec : *r) rec.nodes = nodes.count(rec.node_list) ? nodes.at(rec.node_list) : std::vector{rec.node_list};
  return *r;
}

diagnosis::JobState TwoNodes() {
  diagnosis::JobState job;
  job.world_size = 4;
  job.ranks.resize(4);
  for (int r = 0; r < 4; ++r) {
    job.ranks[r].rank = r;
    job.ranks[r].node = r < 2 ? "gpu-01" : "gpu-02";
  }
  return job;
}

const std::map<std::string, std::vector<std::string>> kNodes = {{"gpu-[01-02]", {"gpu-01", "gpu-02"}}};

TEST(ParseSacctTest, FieldsGoByTheHeaderAndALastFieldMayHoldPipes) {
  auto r = ParseSacct("State|JobID|Reason\nTIMEOUT|12|a|b\n12.0|12.0|x\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].job_id, "12");
  EXPECT_EQ((*r)[0].state, "TIMEOUT");
  EXPECT_EQ((*r)[0].reason, "a|b");
  EXPECT_EQ((*r)[1].line, 3);
}

TEST(ParseSacctTest, BadOutputNamesTheLine) {
  auto no_header = ParseSacct("4411|train|FAILED\n");
  ASSERT_FALSE(no_header.ok());
  EXPECT_NE(no_header.status().message().find("line 1"), std::string::npos) << no_header.status().message();
  auto short_line = ParseSacct("JobID|State|ExitCode\n1|FAILED\n");
  ASSERT_FALSE(short_line.ok());
  EXPECT_NE(short_line.status().message().find("line 2"), std::string::npos) << short_line.status().message();
  EXPECT_FALSE(ParseSacct("").ok());
}

TEST(SlurmJobFindingsTest, AnOomKilledStepNamesItsNodeAndRanksAndLeads) {
  auto job = TwoNodes();
  std::vector<Finding> findings(1);
  findings[0].code = diagnosis::codes::kRankExited;
  findings[0].summary = "rank 2 was killed by signal 9";
  findings[0].ranks = {2};
  AddSlurmJobFindings("4411", Parsed(kOomJob, kNodes), job, "sacct", &findings);
  ASSERT_EQ(findings.size(), 2u);
  const Finding& f = findings[0];
  EXPECT_EQ(f.code, diagnosis::codes::kOutOfMemory);
  EXPECT_EQ(f.severity, Severity::kError);
  EXPECT_EQ(f.nodes, std::vector<std::string>{"gpu-02"});
  EXPECT_EQ(f.ranks, (std::vector<int>{2, 3}));
  EXPECT_NE(f.summary.find("step 4411.0"), std::string::npos) << f.summary;
  EXPECT_NE(f.remedy.find("--mem"), std::string::npos);
  EXPECT_EQ(f.proof, diagnosis::proof::kScheduler);
  // The job's record and the step's are both evidence.
  EXPECT_EQ(f.evidence.size(), 2u);
  EXPECT_EQ(findings[1].code, diagnosis::codes::kRankExited);
}

TEST(SlurmJobFindingsTest, TheLogsOwnOomFindingOnThatNodeTakesTheRecordAsEvidence) {
  auto job = TwoNodes();
  std::vector<Finding> findings(1);
  findings[0].code = diagnosis::codes::kOutOfMemory;
  findings[0].summary = "Slurm killed step 4411.0";
  findings[0].nodes = {"gpu-02"};
  AddSlurmJobFindings("4411", Parsed(kOomJob, kNodes), job, "sacct", &findings);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(findings[0].evidence.size(), 2u);
}

// One entry per end state Slurm records that a training job meets.
struct StateCase {
  const char* state;
  const char* code;
  Severity severity;
  const char* says;
  const char* remedy;
};
class SlurmStateTest : public ::testing::TestWithParam<StateCase> {};

TEST_P(SlurmStateTest, TheJobsEndStateIsAFindingWithItsRemedy) {
  const StateCase& c = GetParam();
  const std::string text = std::string("JobID|JobName|State|ExitCode|NodeList\n77|train|") + c.state +
                           "|1:0|gpu-[01-02]\n77.batch|batch|CANCELLED|0:15|gpu-01\n";
  std::vector<Finding> findings;
  AddSlurmJobFindings("77", Parsed(text.c_str(), kNodes), TwoNodes(), "sacct", &findings);
  ASSERT_EQ(findings.size(), 1u) << c.state;
  EXPECT_EQ(findings[0].code, c.code);
  EXPECT_EQ(findings[0].severity, c.severity);
  EXPECT_NE(findings[0].summary.find(c.says), std::string::npos) << findings[0].summary;
  EXPECT_NE(findings[0].remedy.find(c.remedy), std::string::npos) << findings[0].remedy;
  EXPECT_EQ(findings[0].ranks, (std::vector<int>{0, 1, 2, 3}));
}

INSTANTIATE_TEST_SUITE_P(
    States, SlurmStateTest,
    ::testing::Values(
        StateCase{"NODE_FAIL", diagnosis::codes::kSlurmJobState, Severity::kError, "node failed", "--exclude"},
        StateCase{"TIMEOUT", diagnosis::codes::kSlurmJobState, Severity::kError, "time limit", "--time"},
        StateCase{"PREEMPTED", diagnosis::codes::kSlurmJobState, Severity::kWarning, "preempted", "--requeue"},
        StateCase{"BOOT_FAIL", diagnosis::codes::kSlurmJobState, Severity::kError, "boot", "--exclude"},
        StateCase{"DEADLINE", diagnosis::codes::kSlurmJobState, Severity::kError, "deadline", "deadline"},
        StateCase{"CANCELLED by 1000", diagnosis::codes::kSlurmJobState, Severity::kWarning,
                  "cancelled (scancel) by 1000", "uid"},
        StateCase{"FAILED", diagnosis::codes::kSlurmJobState, Severity::kError, "failed with exit code 1:0",
                  "exit code"}),
    [](const auto& info) {
      std::string name = info.param.state;
      return name.substr(0, name.find(' ')) == "CANCELLED" ? std::string("CANCELLED_by_uid")
                                                           : name.substr(0, name.find(' '));
    });

// What the scheduler did to the job explains the ranks' deaths: it comes before them, whatever words
// its summary uses ("a node failed", "failed to boot").
TEST(SlurmJobFindingsTest, TheSchedulersActLeadsTheRanksDeaths) {
  for (const char* state : {"NODE_FAIL", "BOOT_FAIL", "TIMEOUT", "OUT_OF_MEMORY"}) {
    std::vector<Finding> findings(1);
    findings[0].code = diagnosis::codes::kRankExited;
    findings[0].summary = "rank 2 was killed by signal 9";
    const std::string text = std::string("JobID|State|ExitCode|NodeList\n77|") + state + "|0:9|gpu-[01-02]\n";
    AddSlurmJobFindings("77", Parsed(text.c_str(), kNodes), TwoNodes(), "sacct", &findings);
    ASSERT_EQ(findings.size(), 2u) << state;
    EXPECT_NE(findings[0].code, diagnosis::codes::kRankExited) << state;
    EXPECT_NE(findings[0].summary.find(state), std::string::npos) << findings[0].summary;
  }
}

TEST(SlurmJobFindingsTest, AFailedJobAlreadyExplainedIsAWarning) {
  std::vector<Finding> findings(1);
  findings[0].code = diagnosis::codes::kCollectiveMismatch;
  AddSlurmJobFindings("77", Parsed("JobID|State|ExitCode|NodeList\n77|FAILED|1:0|gpu-01\n", kNodes), TwoNodes(),
                      "sacct", &findings);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].code, diagnosis::codes::kCollectiveMismatch);
  EXPECT_EQ(findings[1].severity, Severity::kWarning);
  EXPECT_EQ(findings[1].ranks, (std::vector<int>{0, 1}));
}

// Without slurmdbd, sacct --completion has the job's record only: a step killed by SIGKILL shows
// as the derived exit code of a COMPLETED job, and is still said.
TEST(SlurmJobFindingsTest, ACompletionRecordsDerivedSignalIsAWarning) {
  std::vector<Finding> findings;
  AddSlurmJobFindings(
      "5",
      Parsed("JobID|JobName|State|ExitCode|DerivedExitCode|NodeList\n5|job.sh|COMPLETED|0:0|0:9|gpu-[01-02]\n", kNodes),
      TwoNodes(), "sacct --completion", &findings);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_NE(findings[0].summary.find("signal 9"), std::string::npos) << findings[0].summary;
  EXPECT_NE(findings[0].evidence[0].find("sacct --completion"), std::string::npos);
}

TEST(SlurmJobFindingsTest, ACleanJobIsSaidAsInfo) {
  std::vector<Finding> findings;
  AddSlurmJobFindings("5",
                      Parsed("JobID|State|ExitCode|DerivedExitCode|NodeList\n5|COMPLETED|0:0|0:0|gpu-01\n", kNodes),
                      TwoNodes(), "sacct", &findings);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
  EXPECT_NE(findings[0].summary.find("COMPLETED"), std::string::npos);
}

}  // namespace
}  // namespace dsd::collectors
