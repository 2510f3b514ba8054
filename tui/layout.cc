#include "tui/layout.h"

#include <algorithm>

#include "common/log.h"

namespace dsd::tui {

bool Rect::Overlaps(const Rect& o) const {
  if (empty() || o.empty()) return false;
  return x < o.x + o.width && o.x < x + width && y < o.y + o.height && o.y < y + height;
}

bool Rect::Inside(int cols, int rows) const {
  return x >= 0 && y >= 0 && x + width <= cols && y + height <= rows;
}

Layout ComputeLayout(int cols, int rows) {
  Layout l;
  if (cols < kMinCols || rows < kMinRows) {
    l.too_small = true;
    l.header = {0, 0, std::max(cols, 0), std::min(std::max(rows, 0), 1)};
    return l;
  }
  l.header = {0, 0, cols, 2};
  l.help = {0, rows - 1, cols, 1};
  int body_y = 2, body_h = rows - 3;
  if (cols >= 100) {
    int left = cols * 55 / 100;
    l.ranks = {0, body_y, left, body_h};
    int right = cols - left;
    int findings_h = body_h / 2;
    l.findings = {left, body_y, right, findings_h};
    l.log = {left, body_y + findings_h, right, body_h - findings_h};
  } else {
    int ranks_h = body_h * 45 / 100;
    int findings_h = (body_h - ranks_h) / 2;
    l.ranks = {0, body_y, cols, ranks_h};
    l.findings = {0, body_y + ranks_h, cols, findings_h};
    l.log = {0, body_y + ranks_h + findings_h, cols, body_h - ranks_h - findings_h};
  }
  log::Get("tui")->trace("layout {}x{}: ranks {}x{}", cols, rows, l.ranks.width, l.ranks.height);
  return l;
}

}  // namespace dsd::tui
