// The ncurses view: paints a Frame (tui/model.h) and reads keys. Colours when the terminal has
// them, bold/reverse/dim otherwise (or with NO_COLOR). One per process (ncurses is global); used by
// one thread. Closing restores the terminal.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "tui/model.h"

namespace dsd::tui {

class View {
 public:
  // Errors: stdin/stdout is not a terminal, or the terminal cannot be initialised.
  static Result<std::unique_ptr<View>> Open();
  ~View();
  View(const View&) = delete;
  View& operator=(const View&) = delete;

  void Draw(const Frame& frame);
  // A key, or -1 after `timeout_ms` without one. KEY_RESIZE updates the size.
  int ReadKey(int timeout_ms);
  int cols() const;
  int rows() const;
  // Gives the terminal back (a pager runs) and takes it again.
  void Suspend();
  void Resume();

 private:
  View() = default;
  bool color_ = false;
};

// Draws `s` and applies keys until `until`; returns true when a key asked to quit. `extra` sees
// each key first (not while a filter or search is typed) and returns true when it used it (a
// replay's seek keys). `o` opens <log_dir>/rank-<r>.log of the selected rank in $PAGER (default
// `less +G`) when that file is here, else the full-log view.
bool Interact(View& view, const Snapshot& s, const LogTails* logs, ViewState& vs, const Chrome& chrome,
              std::chrono::steady_clock::time_point until, const std::string& log_dir, const std::function<bool(int)>& extra = {});

}  // namespace dsd::tui
