#include "common/strings.h"

#include <gtest/gtest.h>

namespace dsd {
namespace {

TEST(StringsTest, TrimSplitJoin) {
  EXPECT_EQ(Trim("  a b \r\n"), "a b");
  EXPECT_EQ(Trim(" \t "), "");
  EXPECT_EQ(Split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(SplitWhitespace(" node-1\t slots=4  "), (std::vector<std::string>{"node-1", "slots=4"}));
  EXPECT_EQ(Join({"a", "b", "c"}, "@"), "a@b@c");
  EXPECT_TRUE(StartsWith("NCCL_DEBUG", "NCCL_"));
  EXPECT_FALSE(StartsWith("NC", "NCCL_"));
  EXPECT_TRUE(EndsWith("/x/dsdoctor_tracer.py", "/dsdoctor_tracer.py"));
  EXPECT_FALSE(EndsWith("py", "/dsdoctor_tracer.py"));
  EXPECT_EQ(ToLower("AllReduce_Base"), "allreduce_base");
  EXPECT_EQ(SafeInt("42"), 42);
  EXPECT_EQ(SafeInt("-3"), -3);
  EXPECT_EQ(SafeInt("1234567890"), 0);  // 10 digits: could overflow
  EXPECT_EQ(SafeInt("4x"), 0);
  EXPECT_EQ(SafeInt(""), 0);
}

TEST(StringsTest, HexRoundTrip) {
  std::string raw(
      "\x00\xff"
      "ab",
      4);
  EXPECT_EQ(HexEncode(raw), "00ff6162");
  std::string back;
  ASSERT_TRUE(HexDecode("00FF6162", &back));
  EXPECT_EQ(back, raw);
  EXPECT_FALSE(HexDecode("abc", &back));
  EXPECT_FALSE(HexDecode("zz", &back));
}

// RFC 4648's test vectors, every byte value, and the refusals.
TEST(StringsTest, Base64RoundTripAndRefusals) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [raw, text] : vectors) {
    EXPECT_EQ(Base64Encode(raw), text);
    std::string back;
    ASSERT_TRUE(Base64Decode(text, &back)) << text;
    EXPECT_EQ(back, raw);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (size_t n : {all.size(), all.size() - 1, all.size() - 2}) {
    std::string back;
    ASSERT_TRUE(Base64Decode(Base64Encode(all.substr(0, n)), &back));
    EXPECT_EQ(back, all.substr(0, n));
  }
  std::string out;
  for (const char* bad : {"Zg=", "Zg", "Z===", "Zm9v!A==", "Zg==Zg==", "Zm=v", "====", "Zm\n9v"})
    EXPECT_FALSE(Base64Decode(bad, &out)) << bad;
}

TEST(StringsTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(12), "12 B");
  EXPECT_EQ(FormatBytes(512.0 * 1024 * 1024), "512 MiB");
  EXPECT_EQ(FormatBytes(1.5 * 1024 * 1024 * 1024), "1.5 GiB");
}

}  // namespace
}  // namespace dsd
