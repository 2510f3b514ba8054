// TUI layout: pure functions from a terminal size to pane rectangles, so placement is tested
// without a terminal. The drawing layer (ncurses) only paints into these rectangles.
#pragma once

#include <string>
#include <vector>

namespace dsd::tui {

struct Rect {
  int x = 0, y = 0, width = 0, height = 0;
  bool empty() const { return width <= 0 || height <= 0; }
  bool Overlaps(const Rect& o) const;
  bool Inside(int cols, int rows) const;
};

struct Layout {
  bool too_small = false;  // below kMinCols x kMinRows: only a message is drawn
  Rect header, ranks, findings, log, help;
  std::vector<Rect> Panes() const { return {header, ranks, findings, log, help}; }
};

inline constexpr int kMinCols = 40;
inline constexpr int kMinRows = 12;

// Header on top (2 rows), help line at the bottom; ranks on the left (about 55% of the width on
// wide terminals, full width on narrow ones), findings and the log tail share the rest.
Layout ComputeLayout(int cols, int rows);

}  // namespace dsd::tui
