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
}

TEST(StringsTest, HexRoundTrip) {
  std::string raw("\x00\xff" "ab", 4);
  EXPECT_EQ(HexEncode(raw), "00ff6162");
  std::string back;
  ASSERT_TRUE(HexDecode("00FF6162", &back));
  EXPECT_EQ(back, raw);
  EXPECT_FALSE(HexDecode("abc", &back));
  EXPECT_FALSE(HexDecode("zz", &back));
}

TEST(StringsTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(12), "12 B");
  EXPECT_EQ(FormatBytes(512.0 * 1024 * 1024), "512 MiB");
  EXPECT_EQ(FormatBytes(1.5 * 1024 * 1024 * 1024), "1.5 GiB");
}

}  // namespace
}  // namespace dsd
