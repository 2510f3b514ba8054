#include "collectors/pickle.h"

#include <gtest/gtest.h>

#include <string>

namespace dsd::collectors {
namespace {

// Fixtures are Python 3.11's own pickle.dumps output (the bytes as it wrote them).
std::string Bytes(const char* s, size_t n) { return std::string(s, n); }
#define PICKLE(lit) Bytes(lit, sizeof(lit) - 1)

// {"a": [1, -2, 3.5, True, None, "é"], "b": (1, 2), "big": 2**40, "neg": -300, "k": 70000}, protocol 2.
const std::string kProtocol2 = PICKLE(
    "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x4a\xfe\xff\xff\xff\x47\x40\x0c"
    "\x00\x00\x00\x00\x00\x00\x88\x4e\x58\x02\x00\x00\x00\xc3\xa9\x71\x03\x65\x58\x01\x00\x00\x00\x62\x71\x04\x4b\x01"
    "\x4b\x02\x86\x71\x05\x58\x03\x00\x00\x00\x62\x69\x67\x71\x06\x8a\x06\x00\x00\x00\x00\x00\x01\x58\x03\x00\x00\x00"
    "\x6e\x65\x67\x71\x07\x4a\xd4\xfe\xff\xff\x58\x01\x00\x00\x00\x6b\x71\x08\x4a\x70\x11\x01\x00\x75\x2e");

TEST(PickleTest, ReadsProtocolTwoDictsListsTuplesAndNumbers) {
  auto j = ParsePickle(kProtocol2);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(
      *j,
      nlohmann::json::parse(
          R"({"a": [1, -2, 3.5, true, null, "\u00e9"], "b": [1, 2], "big": 1099511627776, "neg": -300, "k": 70000})"));
}

TEST(PickleTest, ReadsProtocolFiveFramesMemoizeAndBytes) {
  // The same with "c": b"x", protocol 5 (FRAME, MEMOIZE, SHORT_BINUNICODE, SHORT_BINBYTES).
  auto j = ParsePickle(PICKLE(
      "\x80\x05\x95\x58\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28\x4b\x01\x4a\xfe\xff\xff"
      "\xff\x47\x40\x0c\x00\x00\x00\x00\x00\x00\x88\x4e\x8c\x02\xc3\xa9\x94\x65\x8c\x01\x62\x94\x4b\x01\x4b\x02\x86"
      "\x94\x8c\x01\x63\x94\x43\x01\x78\x94\x8c\x03\x62\x69\x67\x94\x8a\x06\x00\x00\x00\x00\x00\x01\x8c\x03\x6e\x65"
      "\x67\x94\x4a\xd4\xfe\xff\xff\x8c\x01\x6b\x94\x4a\x70\x11\x01\x00\x75\x2e"));
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["c"], "x");
  EXPECT_EQ((*j)["a"][5], "\u00e9");
  EXPECT_EQ((*j)["big"], 1099511627776LL);
}

TEST(PickleTest, AMemoReferenceSeesTheContainerAsFilledLater) {
  // x = []; {"p": x, "q": x}; x.append(1): pickle writes x once, then refers to it.
  auto j =
      ParsePickle(PICKLE("\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x70\x71\x01\x5d\x71\x02\x4b\x01\x61\x58\x01"
                         "\x00\x00\x00\x71\x71\x03\x68\x02\x75\x2e"));
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(*j, nlohmann::json::parse(R"({"p": [1], "q": [1]})"));
}

// A Flight Recorder dump's ring: only the newest entries are wanted, and only they become JSON.
TEST(PickleTest, AListUnderTheTailKeyKeepsItsLastItemsOnly) {
  PickleLimits tail;
  tail.tail_key = "a";
  tail.tail_items = 2;
  auto j = ParsePickle(kProtocol2, tail);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["a"], nlohmann::json::parse(R"([null, "\u00e9"])"));
  EXPECT_EQ((*j)["b"], nlohmann::json::parse("[1, 2]")) << "other lists stay whole";
  tail.tail_items = 100;
  EXPECT_EQ((*ParsePickle(kProtocol2, tail))["a"].size(), 6u) << "a shorter list is whole";
}

TEST(PickleTest, ObjectsThatWouldRunCodeAreRefusedNeverExecuted) {
  // datetime.date(2020, 1, 1): GLOBAL datetime.date, then REDUCE.
  auto j =
      ParsePickle(PICKLE("\x80\x02\x63\x64\x61\x74\x65\x74\x69\x6d\x65\x0a\x64\x61\x74\x65\x0a\x71\x00\x63\x5f\x63"
                         "\x6f\x64\x65\x63\x73\x0a\x65\x6e\x63\x6f\x64\x65\x0a\x71\x01\x58\x05\x00\x00\x00\x07\xc3"
                         "\xa4\x01\x01\x71\x02\x58\x06\x00\x00\x00\x6c\x61\x74\x69\x6e\x31\x71\x03\x86\x71\x04\x52"
                         "\x71\x05\x85\x71\x06\x52\x71\x07\x2e"));
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("opcode 0x63 at byte 2"), std::string::npos) << j.status().ToString();
  EXPECT_NE(j.status().message().find("never executed"), std::string::npos);
}

TEST(PickleTest, TornSelfContainingAndExplodingPicklesAreNamedErrors) {
  auto torn = ParsePickle(kProtocol2.substr(0, kProtocol2.size() / 2));
  ASSERT_FALSE(torn.ok());
  EXPECT_NE(torn.status().message().find("torn"), std::string::npos) << torn.status().ToString();
  // l = []; l.append(l)
  auto self = ParsePickle(PICKLE("\x80\x02\x5d\x71\x00\x68\x00\x61\x2e"));
  ASSERT_FALSE(self.ok());
  EXPECT_NE(self.status().message().find("nested deeper than"), std::string::npos) << self.status().ToString();
  // A list of 4 references to a list of 4 references… 13 deep: 4^13 values once expanded.
  // (each level: the list's first copy is the one built inline, then three references and APPENDS)
  std::string real;
  {
    real = PICKLE("\x80\x02\x5d\x71\x00\x28");
    for (int i = 1; i <= 12; ++i) real += std::string("\x5d\x71") + static_cast<char>(i) + "\x28";
    real += "\x4b\x01\x4b\x01\x4b\x01\x4b\x01\x65";
    for (int i = 12; i >= 1; --i) {
      for (int k = 0; k < 3; ++k) real += std::string("\x68") + static_cast<char>(i);
      real += "\x65";
    }
    real += "\x2e";
  }
  PickleLimits small;
  small.max_values = 100000;
  auto boom = ParsePickle(real, small);
  ASSERT_FALSE(boom.ok());
  EXPECT_NE(boom.status().message().find("more than 100000 values"), std::string::npos) << boom.status().ToString();
  // A tuple key holding a str that is not UTF-8 (found by pickle_fuzz): a value, never an exception.
  auto odd =
      ParsePickle(PICKLE("\x80\x02\x7d\x28\x58\x07\x00\x00\x00\x76\x6e\x71\x85\x85\x85\x85\x85\x85\x85"
                         "\x4b\x04\x73\x75\x2e"));
  ASSERT_TRUE(odd.ok()) << odd.status().ToString();
  EXPECT_EQ(odd->size(), 1u);
  EXPECT_FALSE(ParsePickle("").ok());
  EXPECT_FALSE(ParsePickle(std::string("\x80\x09", 2)).ok()) << "protocol 9";
}

}  // namespace
}  // namespace dsd::collectors
