// Turns the lines of one rank's log into structured events (diagnosis::LogEvent) with a remedy:
// NCCL (INFO/WARN lines, error strings, socket and bootstrap failures), PyTorch (watchdog
// timeouts, "NCCL error in:", collective fingerprint mismatches, ChildFailedError tables), Gloo
// (connection closed/reset/refused, timeouts), OpenMPI (MPI_ERR_*, "mpirun noticed that process
// rank N … exited on signal"), Python tracebacks (exception, innermost program frame, the
// torch.distributed collective it was inside), C++ terminate/abort, and the bundled runtime's
// watchdog lines. The patterns are listed in docs/run.md.
// A LogClassifier keeps state across lines (tracebacks and tables span several); one per log
// stream, used by one thread. Pure: no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "diagnosis/state.h"

namespace dsd::collectors {

class LogClassifier {
 public:
  explicit LogClassifier(int rank) : rank_(rank) {}

  // Feeds one line (without its newline); returns the events it completed.
  std::vector<diagnosis::LogEvent> Feed(std::string_view line);
  // Ends the stream: a traceback still open is emitted.
  std::vector<diagnosis::LogEvent> Finish();

  int lines() const { return line_no_; }

 private:
  struct Frame {
    std::string file, function, code;
    int line = 0;
  };
  void EmitTraceback(std::vector<diagnosis::LogEvent>& out, std::string_view exception_line);
  diagnosis::LogEvent Make(const char* code, const char* kind, std::string summary, std::string_view text, std::string remedy,
                           diagnosis::Severity severity = diagnosis::Severity::kError) const;

  int rank_;
  int line_no_ = 0;
  // Python traceback in progress.
  bool in_traceback_ = false;
  int traceback_line_ = 0;
  std::vector<Frame> frames_;
  // torchrun ChildFailedError / mpirun tables: the rank a "rank :" or "exitcode :" line is about.
  int table_rank_ = -1;
  int table_line_ = 0;
  std::string what_pending_;  // "terminate called after throwing…" waits for its "what():" line
  int what_line_ = 0;
};

// Classifies a whole log (analyze): every line through one LogClassifier.
std::vector<diagnosis::LogEvent> ClassifyLog(int rank, std::string_view content);

}  // namespace dsd::collectors
