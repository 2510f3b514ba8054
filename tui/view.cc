#include "tui/view.h"

#include <curses.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "common/run_files.h"

namespace dsd::tui {

static_assert(kKeyUp == KEY_UP && kKeyDown == KEY_DOWN && kKeyPageDown == KEY_NPAGE && kKeyPageUp == KEY_PPAGE &&
              kKeyEnter == KEY_ENTER && kKeyBackspace == KEY_BACKSPACE && kKeyLeft == KEY_LEFT &&
              kKeyRight == KEY_RIGHT && kKeyHome == KEY_HOME && kKeyEnd == KEY_END);

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
    init_pair(1, COLOR_CYAN, -1);           // title
    init_pair(2, COLOR_GREEN, -1);          // ok
    init_pair(3, COLOR_YELLOW, -1);         // waiting
    init_pair(4, COLOR_RED, -1);            // error
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
      case Tone::kTitle:
        a = color_ ? COLOR_PAIR(1) | A_BOLD : A_BOLD;
        break;
      case Tone::kOk:
        a = color_ ? COLOR_PAIR(2) : A_NORMAL;
        break;
      case Tone::kWaiting:
        a = color_ ? COLOR_PAIR(3) : A_NORMAL;
        break;
      case Tone::kError:
        a = color_ ? COLOR_PAIR(4) | A_BOLD : A_BOLD | A_UNDERLINE;
        break;
      case Tone::kDim:
        a = A_DIM;
        break;
      case Tone::kSelected:
        a = color_ ? COLOR_PAIR(5) : A_REVERSE;
        break;
      case Tone::kNormal:
        break;
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

void View::Suspend() {
  def_prog_mode();
  endwin();
}

void View::Resume() {
  reset_prog_mode();
  clear();
  refresh();
}

namespace {

// Runs the pager on `path` with the terminal; waits for it.
void RunPager(const std::string& path) {
  pid_t pid = ::fork();
  if (pid == 0) {
    const char* pager = std::getenv("PAGER");
    std::string cmd = std::string(pager && *pager ? pager : "less +G") + " \"$1\"";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), "sh", path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  if (pid > 0) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace

bool Interact(View& view, const Snapshot& s, const LogTails* logs, ViewState& vs, const Chrome& chrome,
              std::chrono::steady_clock::time_point until, const std::string& log_dir,
              const std::function<bool(int)>& extra) {
  while (true) {
    Frame frame = BuildFrame(s, ComputeLayout(view.cols(), view.rows()), vs, logs, chrome);
    view.Draw(frame);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    int key = view.ReadKey(static_cast<int>(left));
    if (key < 0) return false;
    if (!vs.editing_filter && !vs.editing_search && extra && extra(key)) continue;
    int rows = static_cast<int>(VisibleRows(s, vs, frame.class_view).size());
    if (ApplyKey(vs, key, rows, std::max(view.rows() / 2, 1))) return true;
    if (vs.open_pager) {
      vs.open_pager = false;
      std::string path = RunDir(log_dir).RankLog(frame.selected_rank);
      std::error_code ec;
      if (frame.selected_rank >= 0 && !log_dir.empty() && std::filesystem::is_regular_file(path, ec)) {
        view.Suspend();
        RunPager(path);
        view.Resume();
      } else {
        vs.full_log = true;  // the log is on another node: the tail we have
      }
    }
  }
}

}  // namespace dsd::tui
