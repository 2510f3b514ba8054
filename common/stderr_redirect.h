// Sends this process's standard error (fd 2) to a file while the object lives, and gives it back
// when destroyed. `run --tui` holds one while the view has the terminal: a log line (of dsdoctor,
// or of an agent or launcher it started, which inherit fd 2) written to the terminal curses draws
// on would tear the screen, so every such line goes to the run dir's dsdoctor.log instead.
// Process-wide (fd 2 is): one at a time; construct and destroy it on one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace dsd {

class StderrToFile {
 public:
  // Opens `path` (created 0600, appended to) and moves fd 2 onto it; the old fd 2 is kept.
  static Result<std::unique_ptr<StderrToFile>> Open(const std::string& path);
  ~StderrToFile();  // fd 2 is the old one again
  StderrToFile(const StderrToFile&) = delete;
  StderrToFile& operator=(const StderrToFile&) = delete;

  const std::string& path() const { return path_; }
  // Bytes the file grew by since Open (what was written while fd 2 was the file).
  uint64_t BytesWritten() const;

 private:
  StderrToFile(std::string path, int saved, uint64_t start) : path_(std::move(path)), saved_(saved), start_(start) {}
  std::string path_;
  int saved_ = -1;  // the old fd 2
  uint64_t start_ = 0;
};

}  // namespace dsd
