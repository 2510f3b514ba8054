#include "diagnosis/finding.h"

#include <gtest/gtest.h>

namespace dsd::diagnosis {
namespace {

TEST(FindingTest, JsonRoundTrip) {
  Finding f{codes::kPortBlocked,
            Severity::kError,
            "node-1 cannot reach node-2:29500",
            {"node-1", "node-2"},
            {},
            {"connect timed out after 2000 ms"},
            "open TCP 29500 between the nodes"};
  auto j = ToJson(f);
  EXPECT_EQ(j["severity"], "error");
  auto back = FindingFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, f);
}

TEST(FindingTest, BadJsonNamesTheField) {
  auto j = ToJson(Finding{codes::kRankExited, Severity::kError, "s", {}, {3}, {}, "r"});
  j["severity"] = "fatal";
  EXPECT_NE(FindingFromJson(j).status().message().find("'fatal'"), std::string::npos);
  j.erase("summary");
  EXPECT_NE(FindingFromJson(j).status().message().find("'summary'"), std::string::npos);
}

TEST(FindingTest, ErrorsSortFirst) {
  std::vector<Finding> v = {{"A", Severity::kInfo, "", {}, {}, {}, ""},
                            {"B", Severity::kError, "", {}, {}, {}, ""},
                            {"C", Severity::kWarning, "", {}, {}, {}, ""},
                            {"D", Severity::kError, "", {}, {}, {}, ""}};
  SortBySeverity(v);
  EXPECT_EQ(v[0].code, "B");
  EXPECT_EQ(v[1].code, "D");
  EXPECT_EQ(v[2].code, "C");
  EXPECT_EQ(v[3].code, "A");
}

TEST(FindingTest, KnowsTheDesignCodes) {
  EXPECT_TRUE(IsKnownCode("NCCL_VERSION_MISMATCH"));
  EXPECT_TRUE(IsKnownCode("P2P_DEADLOCK"));
  EXPECT_FALSE(IsKnownCode("MADE_UP"));
}

}  // namespace
}  // namespace dsd::diagnosis
