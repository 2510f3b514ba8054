#include "probe/bandwidth.h"

#include <gtest/gtest.h>

namespace dsd::probe {
namespace {

TEST(BandwidthTest, BusBwFactorsMatchNcclTests) {
  EXPECT_DOUBLE_EQ(BusBwFactor(CollectiveOp::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollectiveOp::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollectiveOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollectiveOp::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollectiveOp::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollectiveOp::kBroadcast, 16), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(CollectiveOp::kSendRecv, 2), 1.0);
}

TEST(BandwidthTest, AlgAndBusBandwidthFromBytesAndTime) {
  SizeResult r;
  r.bytes = 1'000'000'000;
  r.time_us = 1e6;  // 1 GB in 1 s
  ComputeBandwidth(CollectiveOp::kAllReduce, 4, &r);
  EXPECT_DOUBLE_EQ(r.algbw, 1.0);
  EXPECT_DOUBLE_EQ(r.busbw, 1.5);
  EXPECT_DOUBLE_EQ(AvgBusBw({r, SizeResult{}}), 0.75);
}

TEST(BandwidthTest, ParsesSizeRangesAndLists) {
  EXPECT_EQ(*ParseSizes("8-64"), (std::vector<size_t>{8, 16, 32, 64}));
  EXPECT_EQ(ParseSizes("1K-64M")->back(), 64u << 20);
  EXPECT_EQ(ParseSizes("1K-64M")->size(), 17u);
  EXPECT_EQ(*ParseSizes("1K,1M,6"), (std::vector<size_t>{1024, 1 << 20, 4}));  // 6 rounds down to one float
  EXPECT_NE(ParseSizes("64M-1K").status().message().find("minimum above maximum"), std::string::npos);
  // More digits than any integer holds: an error, not an exception.
  EXPECT_NE(ParseSizes("99999999999999999999999").status().message().find("too large"), std::string::npos);
  EXPECT_NE(ParseSizes("2").status().message().find("smaller than one element"), std::string::npos);
  EXPECT_NE(ParseSizes("1X").status().message().find("'1X' is not a number"), std::string::npos);
  EXPECT_FALSE(ParseSizes("").ok());
  EXPECT_FALSE(ParseSizes("1-2-3").ok());
}

TEST(BandwidthTest, TableHasNcclTestsColumnsAndAverage) {
  SizeResult r{1048576, 262144, "float", "sum", 1000.0, 0, 0, 0};
  ComputeBandwidth(CollectiveOp::kAllReduce, 2, &r);
  std::string t = RenderBandwidthTable({r});
  EXPECT_NE(t.find("#wrong"), std::string::npos);
  EXPECT_NE(t.find("     1048576       262144    float    sum     1000.0     1.05     1.05        0"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("# Avg bus bandwidth    : 1.049 GB/s"), std::string::npos) << t;
}

}  // namespace
}  // namespace dsd::probe
