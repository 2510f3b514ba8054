// Turns the lines of one log stream (one rank's log, or one rank's lines of a combined log) into
// structured events (diagnosis::LogEvent) with a cause and a remedy. Single lines are classified
// by the pattern catalogue (log_catalogue.h: NCCL, CUDA, PyTorch, DeepSpeed, OpenMPI, Gloo, the
// kernel); what spans lines is classified here: Python tracebacks (exception, innermost program
// frame, the torch.distributed collective it was inside; the exception line itself goes through
// the catalogue), C++ terminate/what(), and torchrun's ChildFailedError table.
// Lines are split at '\r' too (progress bars), and text glued after a tqdm bar is classified.
// A LogClassifier keeps state across lines; one per stream, used by one thread. Pure: no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "collectors/log_catalogue.h"
#include "collectors/source_formats.h"
#include "diagnosis/state.h"

namespace dsd::collectors {

// Facts a stream's context lines gave (no finding by themselves).
struct StreamFacts {
  int self_rank =
      -1;           // the rank that printed the stream (NCCL comm init of the largest communicator, watchdog of PG 0)
  int nranks = 0;   // the largest communicator it joined (a lower bound of the world size)
  int device = -1;  // its CUDA device in that communicator (the local rank, by the usual convention)
  std::string nccl_version;  // "2.21.5"
  int nccl_version_line = 0;
  // Addresses NCCL said this process uses ("Bootstrap : Using eth0:10.0.0.5<0>"): a peer address
  // another rank's line names maps back to this stream's rank and node.
  std::vector<std::string> addresses;
};

class LogClassifier {
 public:
  explicit LogClassifier(int rank, const LogPatternSet* patterns = &LogPatternSet::Default())
      : rank_(rank), patterns_(patterns) {}

  // Feeds the next line (without its newline); returns the events it completed.
  std::vector<diagnosis::LogEvent> Feed(std::string_view line);
  // Feeds the message of line `line_no` (prefixes already stripped); lines may be skipped when
  // !pending() (the pre-scanner found nothing in them).
  // `offset` (the line's byte offset, -1 when unknown) goes into the events; a traceback's event
  // carries its first line's.
  std::vector<diagnosis::LogEvent> FeedAt(std::string_view message, int line_no, int64_t offset = -1);
  // Ends the stream: a traceback still open is emitted.
  std::vector<diagnosis::LogEvent> Finish();

  // A multi-line construct is open: the next lines of the stream must all be fed.
  bool pending() const { return in_traceback_ || in_table_ || in_help_ || in_hydra_ || !what_pending_.empty(); }
  int lines() const { return line_no_; }
  const StreamFacts& facts() const { return facts_; }

  // Regular expressions of the lines that open or continue a multi-line construct, for the
  // pre-scanner (with the catalogue's triggers they cover every line Feed can react to).
  static std::vector<std::string> Triggers();

 private:
  struct Frame {
    std::string file, function;
    int line = 0;
  };
  void Segment(std::string_view segment, std::vector<diagnosis::LogEvent>& out);
  void Classify(std::string_view segment, std::vector<diagnosis::LogEvent>& out);
  // An Open MPI/PRRTE help text: a rule of dashes opens one; at the closing rule (or the stream's end)
  // its lines are looked up among the topics. EmitHelpText returns whether they were a topic.
  void OpenHelpText();
  bool EmitHelpText(std::vector<diagnosis::LogEvent>& out);
  void EmitTraceback(std::vector<diagnosis::LogEvent>& out, std::string_view exception_line);
  // MPICH's and Intel MPI's mpiexec (Hydra) box: "BAD TERMINATION OF ONE OF YOUR APPLICATION
  // PROCESSES", then "=   [RANK r ]PID p RUNNING AT host", "=   EXIT CODE: n" or "=   KILLED BY SIGNAL:
  // n", and after the box "… EXIT STRING: Killed (signal 9)". HydraLine takes a line of it (true) or
  // ends the box at one that is not (false: the line is read as usual).
  bool HydraLine(std::string_view line, std::vector<diagnosis::LogEvent>& out);
  void EmitHydra(std::vector<diagnosis::LogEvent>& out);
  bool Catalogue(std::string_view text, std::vector<diagnosis::LogEvent>& out);
  diagnosis::LogEvent Make(const char* code, const char* kind, std::string summary, std::string_view text,
                           std::string remedy, diagnosis::Severity severity = diagnosis::Severity::kError) const;
  // `look_inside`: a wrapper's inner message is classified too (one level only).
  diagnosis::LogEvent FromMatch(const PatternMatch& m, std::string_view text, bool look_inside = true) const;
  // The event of the catalogue entry (not a context one) that matches `text`: the cause a
  // traceback's exception, a what() or a wrapper's inner message names.
  bool KnownCause(std::string_view text, diagnosis::LogEvent* cause, bool look_inside = true) const;
  // The event of the source format (source_formats.h) that prints `message`: its family's cause and
  // remedy; false for none, a warning the source prints as such, or the catch-all family.
  bool FromFormat(FormatSource source, std::string_view message, std::string_view text, diagnosis::LogEvent* out) const;
  bool FromFormatMatch(FormatSource source, const FormatMatch& fm, std::string_view message, std::string_view text,
                       diagnosis::LogEvent* out) const;
  // The rank, node or peer a message names (help text rows "Remote host: …", "Process name: [[j,1],N]";
  // "… on node X"), into `e`'s fields and subject for the scanner's culprit mapping.
  static void NameCulprit(std::string_view message, diagnosis::LogEvent* e);

  int rank_;
  const LogPatternSet* patterns_;
  int line_no_ = 0;
  int64_t offset_ = -1;
  StreamFacts facts_;
  // Python traceback in progress.
  bool in_traceback_ = false;
  int traceback_line_ = 0;
  int64_t traceback_offset_ = -1;
  int traceback_lines_ = 0;
  // A column-0 line that may be the exception or a frame's source text cut from its indent: the
  // next line tells (log_classifier.cc, Segment).
  std::string held_exception_;
  std::vector<Frame> frames_;
  bool jax_frames_ = false;  // the traceback being emitted went through JAX's files
  // torchrun ChildFailedError table: the rank a "rank :" row is about, and the node of "host :".
  bool in_table_ = false;
  int table_rows_ = 0;
  int table_rank_ = -1;
  std::string table_host_;
  // An Open MPI/PRRTE help text between two rules of dashes: its lines so far.
  bool in_help_ = false;
  bool help_known_ = false;  // a line of it made an event already
  int help_lines_ = 0;
  int help_line_ = 0;
  int64_t help_offset_ = -1;
  std::string help_text_;
  // Hydra's box in progress.
  bool in_hydra_ = false;
  int hydra_line_ = 0;
  int64_t hydra_offset_ = -1;
  int hydra_rank_ = -1, hydra_pid_ = 0, hydra_code_ = 0, hydra_signal_ = 0, hydra_rows_ = 0;
  bool hydra_has_code_ = false;
  std::string hydra_host_;
  std::string what_pending_;  // "terminate called after throwing…" waits for its "what():" line
  int what_line_ = 0;
  int64_t what_offset_ = -1;
};

// Classifies a whole log held in memory (tests, small inputs): every line through one LogClassifier.
std::vector<diagnosis::LogEvent> ClassifyLog(int rank, std::string_view content);

}  // namespace dsd::collectors
