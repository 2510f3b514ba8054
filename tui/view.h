// The ncurses view: paints a Frame (tui/model.h) and reads keys. Colours when the terminal has
// them, bold/reverse/dim otherwise (or with NO_COLOR). One per process (ncurses is global); used by
// one thread. Closing restores the terminal.
#pragma once

#include <memory>

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

 private:
  View() = default;
  bool color_ = false;
};

}  // namespace dsd::tui
