#include "tui/view.h"

#include <curses.h>
#include <unistd.h>

#include <cstdlib>

namespace dsd::tui {

static_assert(kKeyUp == KEY_UP && kKeyDown == KEY_DOWN && kKeyPageDown == KEY_NPAGE && kKeyPageUp == KEY_PPAGE &&
              kKeyEnter == KEY_ENTER && kKeyBackspace == KEY_BACKSPACE);

Result<std::unique_ptr<View>> View::Open() {
  if (!::isatty(0) || !::isatty(1)) return InvalidArgument("--tui needs a terminal on stdin and stdout");
  if (!initscr()) return Internal("cannot initialise the terminal (TERM?)");
  std::unique_ptr<View> v(new View());
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  set_escdelay(25);
  v->color_ = has_colors() && !std::getenv("NO_COLOR");
  if (v->color_) {
    start_color();
    use_default_colors();
    init_pair(1, COLOR_CYAN, -1);    // title
    init_pair(2, COLOR_GREEN, -1);   // ok
    init_pair(3, COLOR_YELLOW, -1);  // waiting
    init_pair(4, COLOR_RED, -1);     // error
    init_pair(5, COLOR_BLACK, COLOR_CYAN);  // selected
  }
  return v;
}

View::~View() { endwin(); }

int View::cols() const { return COLS; }
int View::rows() const { return LINES; }

void View::Draw(const Frame& frame) {
  erase();
  for (const auto& run : frame.runs) {
    attr_t a = A_NORMAL;
    switch (run.tone) {
      case Tone::kTitle: a = color_ ? COLOR_PAIR(1) | A_BOLD : A_BOLD; break;
      case Tone::kOk: a = color_ ? COLOR_PAIR(2) : A_NORMAL; break;
      case Tone::kWaiting: a = color_ ? COLOR_PAIR(3) : A_NORMAL; break;
      case Tone::kError: a = color_ ? COLOR_PAIR(4) | A_BOLD : A_BOLD | A_UNDERLINE; break;
      case Tone::kDim: a = A_DIM; break;
      case Tone::kSelected: a = color_ ? COLOR_PAIR(5) : A_REVERSE; break;
      case Tone::kNormal: break;
    }
    attrset(a);
    mvaddnstr(run.y, run.x, run.text.c_str(), static_cast<int>(run.text.size()));
  }
  attrset(A_NORMAL);
  refresh();
}

int View::ReadKey(int timeout_ms) {
  timeout(timeout_ms);
  int k = getch();
  return k == ERR ? -1 : k;
}

}  // namespace dsd::tui
