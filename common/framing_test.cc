#include "common/framing.h"

#include <gtest/gtest.h>

#include <random>

namespace dsd::wire {
namespace {

using nlohmann::json;

std::string Header(uint32_t n, uint8_t version = kProtocolVersion) {
  std::string h = "DSD";
  h += static_cast<char>(version);
  h += static_cast<char>(n >> 24);
  h += static_cast<char>(n >> 16);
  h += static_cast<char>(n >> 8);
  h += static_cast<char>(n);
  return h;
}

TEST(FramingTest, RoundTripsByteByByte) {
  json a = {{"type", "hello"}, {"token", "x"}, {"n", 3}};
  json b = {{"type", "ping"}, {"payload", std::string(1000, 'z')}};
  std::string stream = *EncodeFrame(a) + *EncodeFrame(b);
  FrameDecoder d;
  std::vector<json> got;
  for (char c : stream) {
    d.Feed(std::string_view(&c, 1));
    while (true) {
      auto m = d.Next();
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      if (!m->has_value()) break;
      got.push_back(**m);
    }
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], a);
  EXPECT_EQ(got[1], b);
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(FramingTest, HeaderLayoutIsBigEndianLength) {
  std::string f = *EncodeFrame(json{{"a", 1}});
  EXPECT_EQ(f.substr(0, 3), "DSD");
  EXPECT_EQ(static_cast<uint8_t>(f[3]), kProtocolVersion);
  EXPECT_EQ(f.substr(0, 8), Header(7));  // {"a":1}
}

TEST(FramingTest, EncodeRejectsNonObjectsAndOversize) {
  EXPECT_FALSE(EncodeFrame(json::array()).ok());
  EXPECT_FALSE(EncodeFrame(json{{"big", std::string(100, 'x')}}, 50).ok());
}

// A callsite the trace writer cut in the middle of a character must not cost the frame (an agent
// that cannot send its sample would stop the job).
TEST(FramingTest, InvalidUtf8IsReplacedNotRefused) {
  auto f = EncodeFrame(json{{"callsite", std::string("train.py:\xe2\x82")}});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  FrameDecoder d;
  d.Feed(*f);
  auto m = d.Next();
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ((**m)["callsite"], "train.py:\xef\xbf\xbd");  // U+FFFD
}

TEST(FramingTest, BadMagicBreaksTheStreamForGood) {
  FrameDecoder d;
  d.Feed("GET / HTTP/1.1\r\n\r\n");
  auto m = d.Next();
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("magic"), std::string::npos);
  d.Feed(*EncodeFrame(json{{"a", 1}}));
  EXPECT_FALSE(d.Next().ok());
  EXPECT_TRUE(d.broken());
}

TEST(FramingTest, WrongVersionIsNamed) {
  FrameDecoder d;
  d.Feed(Header(2, 9) + "{}");
  auto m = d.Next();
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("version 9"), std::string::npos);
}

TEST(FramingTest, OversizedLengthFailsBeforePayloadArrives) {
  FrameDecoder d(1024);
  d.Feed(Header(4096));
  auto m = d.Next();
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("4096 bytes exceeds the maximum of 1024"), std::string::npos);
}

TEST(FramingTest, BadPayloadFailsThatFrameOnly) {
  FrameDecoder d;
  d.Feed(Header(5) + "{nope" + Header(2) + "[]" + *EncodeFrame(json{{"ok", true}}));
  EXPECT_FALSE(d.Next().ok());  // not JSON
  auto arr = d.Next();          // JSON, but not an object
  ASSERT_FALSE(arr.ok());
  EXPECT_NE(arr.status().message().find("not a JSON object"), std::string::npos);
  auto good = d.Next();
  ASSERT_TRUE(good.ok());
  ASSERT_TRUE(good->has_value());
  EXPECT_EQ((**good)["ok"], true);
}

TEST(FramingTest, DeepNestingIsRejectedWithoutRecursing) {
  std::string deep(100000, '[');
  auto r = ParseJsonBounded(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nested deeper than 64"), std::string::npos);
  // Brackets inside strings do not count.
  auto s = ParseJsonBounded("{\"a\":\"" + std::string(1000, '[') + "\"}");
  EXPECT_TRUE(s.ok());
}

// Found by the fuzzer: nlohmann throws out_of_range, not parse_error, for number overflow.
TEST(FramingTest, NumberOverflowIsAnErrorNotACrash) {
  auto r = ParseJsonBounded("{\"a\":777e7777777771}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("number overflow"), std::string::npos);
}

TEST(FramingTest, InvalidUtf8IsAnErrorNotACrash) {
  FrameDecoder d;
  std::string payload = "{\"a\":\"\xff\xfe\"}";
  d.Feed(Header(static_cast<uint32_t>(payload.size())) + payload);
  EXPECT_FALSE(d.Next().ok());
}

// Random mutations of valid streams never crash or throw (the libFuzzer target goes further).
TEST(FramingTest, RandomMutationsAreHandled) {
  std::mt19937 rng(12345);
  std::string base = *EncodeFrame(json{{"type", "x"}, {"v", {1, 2, 3}}}) + *EncodeFrame(json{{"k", "v"}});
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s = base;
    int flips = 1 + rng() % 4;
    for (int i = 0; i < flips; ++i) s[rng() % s.size()] = static_cast<char>(rng());
    if (rng() % 3 == 0) s.resize(rng() % s.size());
    FrameDecoder d(256);
    d.Feed(s);
    for (int i = 0; i < 8; ++i) {
      auto m = d.Next();
      if (m.ok() && !m->has_value()) break;
      if (d.broken()) break;
    }
  }
  SUCCEED();
}

}  // namespace
}  // namespace dsd::wire
