#include "tui/layout.h"

#include <gtest/gtest.h>

namespace dsd::tui {
namespace {

class LayoutSizeTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(LayoutSizeTest, PanesFitAndNeverOverlapAndCoverTheScreen) {
  auto [cols, rows] = GetParam();
  Layout l = ComputeLayout(cols, rows);
  ASSERT_FALSE(l.too_small);
  auto panes = l.Panes();
  long area = 0;
  for (size_t i = 0; i < panes.size(); ++i) {
    EXPECT_FALSE(panes[i].empty()) << "pane " << i;
    EXPECT_TRUE(panes[i].Inside(cols, rows)) << "pane " << i;
    area += static_cast<long>(panes[i].width) * panes[i].height;
    for (size_t j = i + 1; j < panes.size(); ++j) EXPECT_FALSE(panes[i].Overlaps(panes[j])) << i << " vs " << j;
  }
  EXPECT_EQ(area, static_cast<long>(cols) * rows);
}

INSTANTIATE_TEST_SUITE_P(Sizes, LayoutSizeTest,
                         ::testing::Values(std::pair{80, 24}, std::pair{40, 12}, std::pair{99, 30},
                                           std::pair{100, 30}, std::pair{250, 70}, std::pair{81, 25}));

TEST(LayoutTest, TinyTerminalIsFlagged) {
  EXPECT_TRUE(ComputeLayout(30, 10).too_small);
  EXPECT_TRUE(ComputeLayout(0, 0).too_small);
  EXPECT_TRUE(ComputeLayout(0, 0).header.Inside(0, 0));
}

}  // namespace
}  // namespace dsd::tui
