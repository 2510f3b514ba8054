// The second tier of the log catalogue: the error formats the sources themselves print, read from
// their code (collectors/sources/*.tsv, made by scripts/sources/extract_*.py from a git snapshot or an
// installed copy of each source: NCCL, PyTorch, DeepSpeed, CUDA, Slurm, Open MPI, PRRTE, JAX/XLA,
// Kubernetes and the Kubeflow training operator), each one turned into a pattern and given the cause
// and remedy of its family (the subsystem that prints it: NCCL's InfiniBand transport, its socket
// layer; PyTorch's TCPStore; Slurm's PMIx plugin; Open MPI's TCP transport …), or of a phrase that
// says more than the subsystem ("another task died", "OOMKilled").
//
// The hand-written catalogue (log_catalogue.h) stays first: its entries know a message's fields and
// culprit. A line it gives only a generic reading (NCCL WARN with no code of its own, a Python
// exception it does not know), or one only these tables read (srun's error lines, XLA's glog lines,
// `kubectl describe` rows, an Open MPI help text between its rules of dashes), is looked up here, so
// that every message the sources can print gets a specific cause. docs/log-coverage.md counts, per
// source, how many formats get one (CoverageMarkdown; a test keeps the file equal to it).
//
// Everything is immutable after construction and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "diagnosis/finding.h"

namespace dsd::collectors {

// The sources whose formats are tabled. Open MPI's and PRRTE's are help texts: a whole multi-line
// message between two lines of dashes, matched line by line (FormatMatcher).
enum class FormatSource { kNccl, kTorch, kDeepSpeed, kCuda, kSlurm, kOpenMpi, kPrrte, kJax, kKubernetes };

// Every source, in the coverage table's order.
const std::vector<FormatSource>& AllFormatSources();
// "NCCL WARN", "Slurm srun and slurmstepd" …: the source as the coverage table names it.
const char* SourceTitle(FormatSource source);
// Whether a source's formats are whole multi-line messages (Open MPI/PRRTE help topics).
bool IsHelpTextSource(FormatSource source);

// One format string of a source: where it is printed and how (NCCL's WARN; PyTorch's TORCH_CHECK,
// `raise ValueError`, `logger.warning` …).
struct SourceFormat {
  std::string path;  // in the source tree: "src/transport/net_ib/connect.cc"
  int line = 0;
  std::string how;     // the macro or statement: "WARN", "TORCH_CHECK", "raise ValueError"
  std::string format;  // printf (NCCL) or {} (PyTorch) placeholders
};

// The cause and remedy of the formats one subsystem prints.
struct FormatFamily {
  const char* kind;          // stable id, the events' kind: "nccl_src_ib"
  const char* path;          // path prefix of the subsystem's files ("src/transport/net_ib/"), or for the
                             // families of a phrase (NCCL's internal checks) that phrase of the format, or
                             // for CUDA's errors their names ("|cudaErrorIllegalAddress|…|")
  const char* code;          // finding code (diagnosis::codes)
  const char* cause;         // what the family's messages mean
  const char* remedy;        // what to do
  bool generic = false;      // true: no specific cause (counted as such in the coverage table)
  bool consequence = false;  // its messages usually follow another failure (a process tearing down)
  bool transient = false;    // its messages can describe a passing state (a pod still waiting for a node, a
                             // readiness probe that failed once): a warning, not an error
};

// A table of one source's formats: the version line of its file ("NCCL 2.30.7 <commit>") and rows.
struct FormatTable {
  FormatSource source = FormatSource::kNccl;
  std::string version;  // the file's first comment line, without "# "
  std::vector<SourceFormat> formats;
  // The source and its version, the version line's first two words: "NCCL 2.30.7".
  std::string Name() const { return version.substr(0, version.find(' ', version.find(' ') + 1)); }
};

// Reads a table (docs/log-coverage.md, "The format tables"); errors name `name` and the line.
Result<FormatTable> ParseFormatTable(std::string_view tsv, std::string_view name, FormatSource source);

// The tables compiled into dsdoctor (collectors/sources/).
const FormatTable& BuiltinFormats(FormatSource source);

// The families of a source, most specific path first; the last one of each source is its catch-all.
const std::vector<FormatFamily>& Families(FormatSource source);
const FormatFamily& FamilyOf(FormatSource source, const SourceFormat& f);

// A format as an RE2 expression over the printed message (placeholders become lazy wildcards or
// numbers), and one line it prints (placeholders filled with plausible values). A help text's
// expression and example hold all of its lines.
std::string FormatRegex(FormatSource source, std::string_view format);
std::string FormatExample(FormatSource source, std::string_view format);

// Whether a format can stand as a pattern: enough literal text that it names one message (a bare
// "%s" or "Wait timeout" would match unrelated lines).
bool Distinctive(FormatSource source, std::string_view format);

// Warnings the sources print as such (PyTorch's warnings.warn, logger.warning, TORCH_WARN, LOG(WARNING);
// a help text that starts with "WARNING"; a Kubernetes Normal event): known, and never an error
// finding.
bool IsWarningFormat(const SourceFormat& f);

struct FormatMatch {
  const SourceFormat* format = nullptr;
  const FormatFamily* family = nullptr;
  diagnosis::Severity severity = diagnosis::Severity::kError;
  size_t score = 0;            // letters of the format's literal text found in the message
  std::string Source() const;  // "src/transport/net_ib/connect.cc:123"
};

// The compiled formats of one source: the message → the format that prints it. Of several that
// match, the one with the most literal text wins.
class FormatMatcher {
 public:
  explicit FormatMatcher(const FormatTable& table);
  ~FormatMatcher();
  FormatMatcher(const FormatMatcher&) = delete;
  FormatMatcher& operator=(const FormatMatcher&) = delete;

  // NCCL: `message` is the text after "NCCL WARN "; PyTorch: an exception's or log line's message;
  // a help text source: the lines between the dashes, '\n'-separated. A help text is matched line
  // by line: the topic whose distinctive lines cover the most of the message's text wins, so a
  // message cut short or with a line of another process's output in it is still found.
  bool Match(std::string_view message, FormatMatch* out) const;
  size_t patterns() const;

  static const FormatMatcher& Default(FormatSource source);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The coverage table (docs/log-coverage.md): per source, how many error formats the catalogue gives a
// specific cause (hand-written entry or family), how many only a generic one, how many none, and the
// warnings it knows; then per family.
std::string CoverageMarkdown();

// `dsdoctor analyze --explain QUERY`: every hand-written entry and source family whose finding code
// or kind is QUERY ("all": every one), with its source, expression, example lines, cause and
// remedy; "" when none is.
std::string ExplainPatterns(std::string_view query);

}  // namespace dsd::collectors
