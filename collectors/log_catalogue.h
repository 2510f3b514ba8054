// The log pattern catalogue: what a line of a training job's log means, as data. One entry per
// known message family (NCCL, CUDA, PyTorch c10d/elastic, DeepSpeed's launcher, OpenMPI, Gloo, the
// kernel): a regular expression over the message (the line without launcher prefixes), the
// finding code it becomes, a cause and a specific remedy, and where the message is documented.
// docs/log-patterns.md is the readable form; collectors/log_catalogue_examples.cc holds one real-format
// line per entry, with the public report it was modelled on.
//
// Matching (LogPatternSet) is linear time (RE2): no input line can make it recurse or backtrack.
// The table is immutable; everything here is thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "diagnosis/finding.h"

namespace re2 {
class RE2;
class StringPiece;
}  // namespace re2

namespace dsd::collectors {

// What a matching line contributes.
enum class LogRole {
  kCause,        // an error that can be the root cause
  kConsequence,  // an error that usually follows another rank's failure (connection reset, remote error)
  kExit,         // a launcher reports how a rank ended (subject_rank/local_rank, exit_code/signal)
  kContext,      // no finding: facts for attribution (pid → rank, world size, NCCL version)
};

struct LogPattern {
  const char* kind;   // stable id ("nccl_ib_retry_exceeded"), in events and docs
  const char* regex;  // RE2 over the message; named groups are the fields (see below)
  const char* code;   // finding code (diagnosis::codes)
  diagnosis::Severity severity;
  LogRole role;
  const char* summary;  // one line; {field} is replaced by that field's value
  const char* remedy;   // what to do, specific to the cause
  const char* refs;     // documentation for the message, space-separated URLs ("" when none)
};
// Field names with a meaning beyond the summary:
//   self_rank  the rank printing the line (attributes the line when no prefix did)
//   self_host, self_pid  the node and pid printing the line, where its words name them
//   subject    the rank the line is about (a launcher or mpirun naming another rank)
//   local_rank the local rank a launcher line is about; host: the node
//   exit_code, signal   how that rank ended;  pid
//   seq, op, pg         a watchdog's collective (SeqNum, OpType, process group)
//   nranks, version     context: world size of a communicator, NCCL version

// A line an entry is written for, in the format of the public report it cites.
struct CatalogueExample {
  const char* kind;
  const char* line;    // as it appears in a log (prefixes included)
  const char* fields;  // "name=value;…" among the fields the entry extracts ("" = none checked)
  const char* source;  // the public report (or source file) whose format the line follows
};
// At least one per entry (log_catalogue_examples.cc).
const std::vector<CatalogueExample>& CatalogueExamples();

// The whole catalogue in priority order: the first entry that matches a message wins, so specific
// entries come before the generic ones of their family.
const std::vector<LogPattern>& Catalogue();

struct PatternMatch {
  const LogPattern* pattern = nullptr;
  std::map<std::string, std::string> fields;
  std::string Field(const char* name) const {
    auto it = fields.find(name);
    return it == fields.end() ? "" : it->second;
  }
  // A template ("could not reach {host}:{port}") with this match's fields filled in.
  std::string Fill(std::string_view text) const;
  std::string Summary() const { return Fill(pattern ? pattern->summary : ""); }
  std::string Remedy() const { return Fill(pattern ? pattern->remedy : ""); }
};

// The catalogue compiled for one-pass matching of a message against every entry (RE2::Set), then
// field extraction from the winning entry. Immutable after construction; thread-safe.
class LogPatternSet {
 public:
  // Compiles `Catalogue()` (or `patterns`); aborts on an invalid entry (a bug caught by the tests).
  LogPatternSet();
  explicit LogPatternSet(const std::vector<LogPattern>& patterns);
  ~LogPatternSet();
  LogPatternSet(const LogPatternSet&) = delete;
  LogPatternSet& operator=(const LogPatternSet&) = delete;

  // The first entry (in catalogue order) that matches, with its fields; nullopt when none.
  bool Match(std::string_view message, PatternMatch* out) const;
  // Every entry that matches, in catalogue order (tests: is an example matched by a more general
  // entry too?).
  std::vector<const LogPattern*> MatchAll(std::string_view message) const;

  // The process-wide compiled catalogue.
  static const LogPatternSet& Default();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What a process's end says, for a remedy: `signal` > 0 is the signal that ended it; otherwise
// `exit_code` as a launcher printed it (negative: torchrun's and DeepSpeed's signal; 129..159: a shell's
// or a container's 128 + signal; others: the program's own code). A matched entry's "exit_code" or
// "signal" field fills the field "meaning" with this text, so a remedy can say "{meaning}".
std::string ExitMeaning(int exit_code, int signal);

// The catalogue as Markdown: docs/log-patterns.md is this text (a test keeps them equal), and
// `dsdoctor analyze --list-patterns` prints it.
std::string CatalogueMarkdown();

// The regular expression a fast pre-scanner (log_matcher.h) may use to find candidate lines for an
// entry in raw text with prefixes: named groups made plain and line anchors dropped, so it matches
// a superset of the lines whose message the entry matches.
std::string TriggerOf(const char* regex);

}  // namespace dsd::collectors
