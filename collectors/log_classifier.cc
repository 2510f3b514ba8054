#include "collectors/log_classifier.h"

#include <re2/re2.h>

#include <algorithm>
#include <utility>

#include "collectors/log_prefix.h"
#include "collectors/source_formats.h"
#include "common/strings.h"
#include "diagnosis/finding.h"

namespace dsd::collectors {
namespace {

using diagnosis::LogEvent;
using diagnosis::Severity;
namespace codes = diagnosis::codes;

// Longest text of one segment that is classified (longer lines are cut: matching stays bounded).
constexpr size_t kMaxSegment = 16 << 10;
// A traceback or table that never ends (the process died while printing) is closed after this
// many lines of its stream.
constexpr int kMaxTracebackLines = 2000;
constexpr int kMaxTableRows = 60;

bool Has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

bool IsLibraryFile(const std::string& file) {
  // dsdoctor_tracer.py is ours (injected by `dsdoctor run`), never the program's code.
  return Has(file, "/site-packages/") || Has(file, "/dist-packages/") || Has(file, "/lib/python3") ||
         StartsWith(file, "<") || Has(file, "/torch/") || Has(file, "/deepspeed/") || Has(file, "dsdoctor_tracer.py");
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

RE2::Options Quiet() {
  RE2::Options o;
  o.set_log_errors(false);
  return o;
}

// torch >= 2.2 prints an uncaught exception with "[rank<N>]: " before each of its lines (the
// excepthook init_process_group installs), in the rank's own output too: the traceback is what follows.
std::string_view WithoutTorchRankPrefix(std::string_view line) {
  if (!StartsWith(line, "[rank")) return line;
  size_t i = 5;
  while (i < line.size() && i < 16 && line[i] >= '0' && line[i] <= '9') ++i;
  if (i == 5 || line.substr(i, 2) != "]:") return line;
  i += 2;
  if (i < line.size() && line[i] == ' ') ++i;
  return line.substr(i);
}

// A field holds at most 300 characters (log_catalogue.h): a message looked up among the sources'
// formats is the line's rest from where the field starts.
std::string_view RestOf(std::string_view text, std::string_view field) {
  size_t at = field.empty() ? std::string_view::npos : text.find(field);
  if (at == std::string_view::npos) return {};
  std::string_view rest = text.substr(at);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  return rest;
}

}  // namespace

std::vector<std::string> LogClassifier::Triggers() {
  return {R"(Traceback \(most recent call last\))",
          R"(terminate called after throwing)",
          R"(ChildFailedError)",
          R"(Root Cause \(first observed failure\))",
          R"(-{70})",
          R"(BAD TERMINATION OF ONE OF YOUR APPLICATION)"};
}

LogEvent LogClassifier::Make(const char* code, const char* kind, std::string summary, std::string_view text,
                             std::string remedy, Severity severity) const {
  LogEvent e;
  e.rank = rank_;
  e.code = code;
  e.kind = kind;
  e.severity = severity;
  e.summary = std::move(summary);
  e.text = std::string(text.substr(0, 1000));
  e.line = line_no_;
  e.offset = offset_;
  e.remedy = std::move(remedy);
  return e;
}

LogEvent LogClassifier::FromMatch(const PatternMatch& m, std::string_view text, bool look_inside) const {
  const LogPattern& p = *m.pattern;
  // Remedies may name fields too ("{host}").
  LogEvent e = Make(p.code, p.kind, m.Summary().substr(0, 400), Trim(text), m.Remedy(), p.severity);
  e.consequence = p.role == LogRole::kConsequence;
  e.fields = m.fields;
  e.fields.erase("meaning");  // the remedy's words, not a fact of the line
  if (auto s = m.Field("subject"); !s.empty()) e.subject_rank = SafeInt(s);
  if (auto c = m.Field("exit_code"); !c.empty()) {
    int code = SafeInt(c);
    if (code < 0)
      e.signal = -code;  // torchrun and DeepSpeed report a signal as a negative code
    else
      e.exit_code = code;
  }
  if (auto s = m.Field("signal"); !s.empty()) e.signal = SafeInt(s);
  // A wrapper ("… raised the following async exception: <inner>"): the inner message decides the
  // cause and the remedy.
  if (auto inner = m.Field("inner"); look_inside && !inner.empty()) {
    LogEvent cause;
    if (KnownCause(inner, &cause, /*look_inside=*/false) && cause.kind != p.kind && cause.Field("inner").empty()) {
      e.code = cause.code;
      e.remedy = cause.remedy;
      e.consequence = cause.consequence;
      e.fields["cause_kind"] = cause.kind;
    }
  }
  if (auto h = m.Field("host"); !h.empty() && p.role == LogRole::kExit) e.host = h;
  if (auto pid = m.Field("pid"); !pid.empty() && p.role == LogRole::kExit) e.pid = SafeInt(pid);
  // The node and pid that printed the line, where its own words carry them (UCX's "[host:pid:…]").
  if (auto h = m.Field("self_host"); !h.empty()) e.host = h;
  if (auto pid = m.Field("self_pid"); !pid.empty()) e.pid = SafeInt(pid);
  // An NCCL WARN no entry knows: the format NCCL printed it with names its subsystem. A CUDA error
  // only read generically: the runtime's error string names its kind.
  const std::string_view kind = p.kind;
  if (kind == "nccl_warn" || kind == "cuda_error" || kind == "nccl_cuda_failure") {
    LogEvent refined;
    if (kind == "nccl_warn"
            ? FromFormat(FormatSource::kNccl, RestOf(text, m.Field("message")), text, &refined)
            : FromFormat(FormatSource::kCuda, m.Field(kind == "cuda_error" ? "message" : "error"), text, &refined))
      return refined;
  }
  return e;
}

bool LogClassifier::FromFormat(FormatSource source, std::string_view message, std::string_view text,
                               LogEvent* out) const {
  FormatMatch fm;
  if (message.empty() || !FormatMatcher::Default(source).Match(message.substr(0, kMaxSegment), &fm)) return false;
  return FromFormatMatch(source, fm, message, text, out);
}

bool LogClassifier::FromFormatMatch(FormatSource source, const FormatMatch& fm, std::string_view message,
                                    std::string_view text, LogEvent* out) const {
  if (fm.family->generic || fm.severity == Severity::kInfo) return false;
  const FormatFamily& f = *fm.family;
  std::string shown, evidence(Trim(text).substr(0, 1000));
  if (IsHelpTextSource(source)) {
    // A help text as one line, blanks folded: its first paragraph as the summary ("Open MPI: An MPI
    // communication peer process has unexpectedly disconnected. …"), all of it as the evidence.
    auto fold = [](std::string_view in, size_t limit, bool paragraph) {
      std::string o;
      for (size_t i = 0; i < in.size() && o.size() < limit; ++i) {
        if (paragraph && in[i] == '\n' && i + 1 < in.size() && in[i + 1] == '\n' && !o.empty()) break;
        const bool blank = in[i] == ' ' || in[i] == '\n' || in[i] == '\t';
        if (!blank || (!o.empty() && o.back() != ' ')) o += blank ? ' ' : in[i];
      }
      return o;
    };
    shown = (source == FormatSource::kPrrte ? "PRRTE: " : "Open MPI: ") + fold(Trim(message), 240, true);
    evidence = fold(Trim(text), 1000, false);
  } else {
    shown = std::string(Trim(message).substr(0, 300));
  }
  *out = Make(f.code, f.kind, (source == FormatSource::kNccl ? "NCCL WARN " : "") + shown, evidence,
              std::string(f.cause) + ". " + f.remedy, fm.severity);
  out->fields["source"] = BuiltinFormats(source).Name() + " " + fm.Source();
  if (IsHelpTextSource(source)) out->fields["topic"] = fm.format->how;
  // srun's own notices ("Job step aborted: Waiting up to 32 seconds …") follow a task's failure.
  out->consequence = f.consequence || (source == FormatSource::kSlurm && fm.format->how == "info");
  NameCulprit(message, out);
  return true;
}

void LogClassifier::NameCulprit(std::string_view message, LogEvent* e) {
  // What a message says of whom: Open MPI's help texts put it on "  Key: value" rows, Slurm and others
  // in the sentence ("failed on node gpu-3", "task 5").
  static const RE2 kRow(R"(^\s*([A-Za-z][A-Za-z ()_/-]{1,40}?)\s*:\s+(\S[^\n]{0,200}?)\s*$)", Quiet());
  // Open MPI 4's "[[jobid,1],N]", PRRTE's "[prterun-gpu0-4242@1,N]": rank N.
  static const RE2 kProcessName(R"(\[(?:\[\d+,\d+\]|[\w.-]+@\d+),(\d+)\])", Quiet());
  static const RE2 kOnNode(R"(\b(?:(?:on|from|to) node|[Nn]ode failure on) ([A-Za-z0-9][\w.-]{0,252})(?:[^\w.\[-]|$))",
                           Quiet());
  size_t lines = 0;
  for (size_t pos = 0; pos < message.size() && lines < 120; ++lines) {
    size_t nl = message.find('\n', pos);
    std::string_view line = message.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? message.size() : nl + 1;
    std::string key, value;
    if (!RE2::FullMatch(re2::StringPiece(line.data(), line.size()), kRow, &key, &value)) continue;
    std::string k = ToLower(key);
    if (k == "remote host" || k == "peer host" || k == "peer hostname" || k == "remote hostname" ||
        k == "peer host (if known)") {
      e->fields.emplace("remote", value.substr(0, value.find_first_of(" \t(")));
    } else if (k == "local host" || k == "hostname" || k == "host" || k == "node" || k == "local hostname") {
      e->fields.emplace("local_host", value.substr(0, value.find_first_of(" \t(")));
    } else if (k == "process name" || k == "process") {
      std::string rank;
      if (RE2::PartialMatch(value, kProcessName, &rank)) e->subject_rank = SafeInt(rank);
    } else if ((k == "mpi_comm_world rank" || k == "rank" || k == "process rank" || k == "mpi rank") &&
               value.find_first_not_of("0123456789") == std::string::npos && value.size() < 8) {
      e->subject_rank = SafeInt(value);
    }
  }
  // JAX's coordination service names the task that is gone: "Task 3 heartbeat timeout",
  // "/job:jax_worker/replica:0/task:3" (task = the process id).
  static const RE2 kJaxTask(R"((?:/job:\w+/replica:\d+/task:(\d+)|\bTask (\d+) heartbeat))", Quiet());
  std::string task, task2;
  if (e->subject_rank < 0 && RE2::PartialMatch(re2::StringPiece(message.data(), std::min<size_t>(message.size(), 4000)),
                                               kJaxTask, &task, &task2))
    e->subject_rank = SafeInt(task.empty() ? task2 : task);
  std::string node;
  if (e->Field("remote").empty() &&
      RE2::PartialMatch(re2::StringPiece(message.data(), std::min<size_t>(message.size(), 2000)), kOnNode, &node))
    e->fields["remote"] = node;
}

bool LogClassifier::KnownCause(std::string_view text, LogEvent* cause, bool look_inside) const {
  PatternMatch m;
  if (!patterns_->Match(text, &m) || m.pattern->role == LogRole::kContext)
    // A PyTorch or DeepSpeed message no entry knows: the format it was raised with names its subsystem.
    return FromFormat(FormatSource::kTorch, text, text, cause) ||
           FromFormat(FormatSource::kDeepSpeed, text, text, cause) ||
           // JAX's and XLA's formats only for what XLA or JAX's own files raised (any exception would
           // otherwise be read as JAX's).
           ((jax_frames_ || Has(text, "XlaRuntimeError") || Has(text, "jaxlib")) &&
            FromFormat(FormatSource::kJax, text, text, cause));
  *cause = FromMatch(m, text, look_inside);
  return true;
}

// The catalogue on one message: true when an entry matched (its event, if any, appended).
bool LogClassifier::Catalogue(std::string_view text, std::vector<LogEvent>& out) {
  PatternMatch m;
  if (!patterns_->Match(text, &m)) return false;
  const LogPattern& p = *m.pattern;
  if (p.role == LogRole::kContext) {
    std::string kind = p.kind;
    auto whole_message = [&] { return RestOf(text, m.Field("message")); };
    if (kind == "nccl_comm_init") {
      int nranks = SafeInt(m.Field("nranks"));
      if (nranks >= facts_.nranks) {
        facts_.nranks = nranks;
        facts_.self_rank = SafeInt(m.Field("self_rank"));
        if (!m.Field("device").empty()) facts_.device = SafeInt(m.Field("device"));
      }
    } else if (kind == "mpirun_exit_code") {
      // "Process name: [[job,1],rank]" and "Exit code: N" follow.
      in_table_ = true, table_rows_ = 0, table_rank_ = -1, table_host_.clear();
    } else if (kind == "nccl_version" || kind == "nccl_version_banner") {
      if (facts_.nccl_version.empty()) facts_.nccl_version = m.Field("version"), facts_.nccl_version_line = line_no_;
    } else if (kind == "nccl_interface") {
      std::string addr = m.Field("addr");
      if (facts_.addresses.size() < 8 &&
          std::find(facts_.addresses.begin(), facts_.addresses.end(), addr) == facts_.addresses.end())
        facts_.addresses.push_back(std::move(addr));
    } else if (kind == "torch_log_error" || kind == "xla_fatal_line") {
      // PyTorch's own error lines (glog from C++, its logging from Python): an event when the format
      // they were printed with is known, never a guess from the bare "E" level. XLA's C++ logs (JAX's
      // coordination service) are glog lines too: its formats when PyTorch has none.
      const std::string_view msg = whole_message();
      FormatMatch fm;
      const FormatSource source = FormatMatcher::Default(FormatSource::kTorch).Match(msg.substr(0, kMaxSegment), &fm)
                                      ? FormatSource::kTorch
                                      : FormatSource::kJax;
      if (LogEvent e; source == FormatSource::kTorch ? FromFormatMatch(source, fm, msg, text, &e)
                                                     : FromFormat(source, msg, text, &e)) {
        // The line's own level: a warning ("W…", "[W…", "WARNING:torch…") is never an error, whatever
        // format it prints (the entries admit only E, W and, for XLA, F lines).
        std::string_view t = Trim(text);
        if (StartsWith(t, "[")) t.remove_prefix(1);
        if (StartsWith(t, "W") && e.severity == Severity::kError) e.severity = Severity::kWarning;
        out.push_back(std::move(e));
      }
    } else if (kind == "slurm_log_line") {
      if (LogEvent e; FromFormat(FormatSource::kSlurm, whole_message(), text, &e)) out.push_back(std::move(e));
    } else if (kind == "k8s_event" || kind == "k8s_get_events" || kind == "k8s_reason") {
      if (LogEvent e; FromFormat(FormatSource::kKubernetes, whole_message(), text, &e)) out.push_back(std::move(e));
    } else if (kind == "ds_log_line") {
      if (LogEvent e; FromFormat(FormatSource::kDeepSpeed, whole_message(), text, &e)) out.push_back(std::move(e));
    }
    return true;
  }
  LogEvent e = FromMatch(m, text);
  out.push_back(std::move(e));
  return true;
}

void LogClassifier::EmitTraceback(std::vector<LogEvent>& out, std::string_view exception_line) {
  // Raised in JAX's own files (or jaxlib's): its formats may name the cause (KnownCause).
  jax_frames_ = false;
  for (const Frame& f : frames_) jax_frames_ |= Has(f.file, "/jax/") || Has(f.file, "/jaxlib/");
  in_traceback_ = false;
  std::string exc(Trim(exception_line));
  // A long message (a tensor's repr, an over-long line's digest) is shown by its start and its end:
  // the type is at the start, the cause often at the end.
  std::string shown = exc.size() <= 300 ? exc : exc.substr(0, 150) + " ... " + exc.substr(exc.size() - 150);
  LogEvent e = Make(codes::kLogError, "python_traceback", "Python exception: " + shown, exc,
                    "The program raised an exception on this rank; the traceback in its log says where.");
  e.line = traceback_line_;
  e.offset = traceback_offset_;
  // Innermost frame of the program itself (not a library), and the collective it was inside.
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if (e.collective.empty() && diagnosis::IsTorchCollective(it->function) && Has(it->file, "torch/distributed"))
      e.collective = it->function;
    if (!IsLibraryFile(it->file)) {
      e.location = Basename(it->file) + ":" + std::to_string(it->line);
      break;
    }
  }
  std::string at =
      e.location.empty() ? "" : " (at " + e.location + (e.collective.empty() ? "" : " in " + e.collective + "()") + ")";
  e.summary += at;
  // The exception message through the catalogue: a specific cause and remedy when it is a known one.
  LogEvent known;
  bool known_cause =
      KnownCause(std::string_view(exc).substr(0, kMaxSegment), &known) ||
      (exc.size() > kMaxSegment && KnownCause(std::string_view(exc).substr(exc.size() - kMaxSegment), &known));
  bool timeout = Has(exc, "Timed out waiting") || Has(exc, "timed out") || Has(exc, "Timeout");
  if (known_cause) {
    e.fields = known.fields;
    e.fields["cause_kind"] = known.kind;
    e.subject_rank = known.subject_rank;
    e.consequence = known.consequence;
  }
  // Inside a collective, waiting until the timeout says more than the transport's words for it.
  if (known_cause && !(timeout && !e.collective.empty())) {
    e.code = known.code;
    e.severity = known.severity;
    e.remedy = known.remedy;
  } else if (timeout) {
    e.remedy = "The rank waited in " + (e.collective.empty() ? std::string("a collective") : e.collective + "()") +
               " until the process group's timeout: another rank never made the matching call (compare where each rank "
               "failed) or the network between them is blocked.";
    e.code = e.collective.empty() ? codes::kCommError : codes::kLogError;
  } else if (StartsWith(exc, "(traceback cut off")) {
    // No exception line: the process died while printing, most often killed by its launcher after
    // another rank failed. It names no cause of its own, so it never leads the report.
    e.severity = Severity::kWarning;
    e.consequence = true;
    e.remedy =
        "The process died before it finished printing this traceback (usually its launcher killed it after "
        "another rank failed): the other findings say why.";
  } else if (Has(exc, "out of memory")) {
    e.code = codes::kOutOfMemory;
    e.remedy = "The device ran out of memory: lower the micro batch size, enable ZeRO or activation checkpointing.";
  }
  // In a collective, a timeout keeps LOG_ERROR: the engine compares where each rank waited.
  if (!e.collective.empty() && (e.code == codes::kCommError) && !e.consequence) e.code = codes::kLogError;
  out.push_back(std::move(e));
  frames_.clear();
  jax_frames_ = false;
}

std::vector<LogEvent> LogClassifier::Feed(std::string_view line) { return FeedAt(line, line_no_ + 1); }

std::vector<LogEvent> LogClassifier::FeedAt(std::string_view message, int line_no, int64_t offset) {
  line_no_ = line_no;
  offset_ = offset;
  std::vector<LogEvent> out;
  if (!message.empty() && message.back() == '\r') message.remove_suffix(1);
  message = WithoutTorchRankPrefix(message);
  // Progress bars rewrite their line with '\r': each segment is a line of its own.
  size_t start = 0;
  while (start <= message.size()) {
    size_t cr = message.find('\r', start);
    std::string_view seg = message.substr(start, cr == std::string_view::npos ? std::string_view::npos : cr - start);
    seg = StripProgressBar(seg);
    if (seg.size() > kMaxSegment) {
      // Its start and its end: an exception's type is at the start, its cause often at the end.
      std::string digest(seg.substr(0, kMaxSegment / 2));
      digest += " [...] ";
      digest += seg.substr(seg.size() - kMaxSegment / 2);
      Segment(digest, out);
    } else if (!seg.empty() || cr == std::string_view::npos) {
      Segment(seg, out);
    }
    if (cr == std::string_view::npos) break;
    start = cr + 1;
  }
  return out;
}

namespace {
// Open MPI's and PRRTE's show_help frames a help text with lines of 74 dashes.
bool IsHelpRule(std::string_view line) {
  line = Trim(line);
  return line.size() >= 70 && line.size() <= 78 && line.find_first_not_of('-') == std::string_view::npos;
}
constexpr int kMaxHelpLines = 120;
}  // namespace

bool LogClassifier::EmitHelpText(std::vector<LogEvent>& out) {
  // Open MPI 4's and PRRTE's texts overlap (PRRTE grew out of ORTE): the one that covers more wins.
  FormatMatch ompi, prrte;
  bool by_ompi = FormatMatcher::Default(FormatSource::kOpenMpi).Match(help_text_, &ompi);
  bool by_prrte = FormatMatcher::Default(FormatSource::kPrrte).Match(help_text_, &prrte);
  if (by_ompi && by_prrte) (ompi.score >= prrte.score ? by_prrte : by_ompi) = false;
  const bool found = by_ompi || by_prrte;
  LogEvent e;
  if (found && !help_known_ &&
      FromFormatMatch(by_ompi ? FormatSource::kOpenMpi : FormatSource::kPrrte, by_ompi ? ompi : prrte, help_text_,
                      help_text_, &e)) {
    e.line = help_line_;
    e.offset = help_offset_;
    out.push_back(std::move(e));
  }
  in_help_ = false;
  help_text_.clear();
  return found;
}

void LogClassifier::OpenHelpText() {
  in_help_ = true;
  help_known_ = false;
  help_lines_ = 0;
  help_text_.clear();
  help_line_ = 0;
  help_offset_ = -1;
}

void LogClassifier::Segment(std::string_view line, std::vector<LogEvent>& out) {
  const size_t before = out.size();
  if (IsHelpRule(line)) {
    // A closing rule: the text between is looked up among the help topics, unless a line of it already
    // made an event of a hand-written entry (which knows the message's fields). A "text" that is no help
    // text (empty: the end of one and the start of the next; or a program's own box, or a log that began
    // inside a text) was between a closing and an opening rule: this rule opens the next.
    if (in_help_ && !Trim(help_text_).empty() && EmitHelpText(out)) return;
    OpenHelpText();
    return;
  }
  if (in_help_) {
    if (++help_lines_ > kMaxHelpLines) {
      // No closing rule (the text was cut off, or this was no help text): what was collected is read.
      EmitHelpText(out);
    } else {
      if (help_lines_ == 1) help_line_ = line_no_, help_offset_ = offset_;
      help_text_.append(line.substr(0, 1024));
      help_text_ += '\n';
    }
  }
  Classify(line, out);
  if (in_help_ && out.size() > before) help_known_ = true;
}

void LogClassifier::Classify(std::string_view line, std::vector<LogEvent>& out) {
  // Python tracebacks span lines: "Traceback (most recent call last):", frames, the exception.
  if (in_traceback_) {
    static const RE2 kFrame(R"re(^\s*File "([^"]+)", line (\d+), in (\S+))re", Quiet());
    std::string file, number, function;
    if (RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), kFrame, &file, &number, &function)) {
      if (frames_.size() < 256) frames_.push_back({file.substr(0, 1024), function.substr(0, 256), SafeInt(number)});
      held_exception_.clear();  // what was held was a frame's source text, cut from its indent
      return;
    }
    if (++traceback_lines_ > kMaxTracebackLines) {
      EmitTraceback(out, "(traceback cut off)");
    } else {
      // Python prints the exception at column 0; source lines and carets are indented (by how much
      // depends on the launcher prefix that was stripped).
      if (StartsWith(line, " ") || StartsWith(line, "\t") || Trim(line).empty() || Has(line, "^^^") ||
          Has(line, "~~~") || Trim(line).find_first_not_of("^~ ") == std::string_view::npos)
        return;
      if (StartsWith(line, "During handling") || StartsWith(line, "The above exception")) {
        frames_.clear();
        held_exception_.clear();
        return;
      }
      // An unbuffered Python writes a source line's indent and its text apart, and mpirun
      // --tag-output tags each read (another rank's output can land between them): the text can
      // arrive at column 0 on a line of its own. A column-0 line that is not "Type" or
      // "Type: message" is held: a frame or an exception after it shows it was source text; any
      // other line shows it was the exception after all (an odd one), and is read on its own.
      static const RE2 kExceptionLine(R"re(^[A-Za-z_][A-Za-z0-9_.]*(:|$))re", Quiet());
      if (!RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), kExceptionLine)) {
        if (held_exception_.empty()) {
          held_exception_ = std::string(line.substr(0, kMaxSegment));
          return;
        }
        EmitTraceback(out, std::exchange(held_exception_, std::string()));
        // `line` is not part of the traceback: on to the ordinary checks below.
      } else {
        held_exception_.clear();
        EmitTraceback(out, line);
        // The exception can open torchrun's failure table.
        if (Has(line, "ChildFailedError")) in_table_ = true, table_rows_ = 0, table_rank_ = -1, table_host_.clear();
        return;
      }
    }
  }
  if (in_hydra_ && HydraLine(line, out)) return;
  if (Has(line, "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES")) {
    in_hydra_ = true;
    hydra_line_ = line_no_;
    hydra_offset_ = offset_;
    hydra_rank_ = -1, hydra_pid_ = 0, hydra_code_ = 0, hydra_signal_ = 0, hydra_rows_ = 0, hydra_has_code_ = false;
    hydra_host_.clear();
    return;
  }
  if (Has(line, "Traceback (most recent call last):")) {
    in_traceback_ = true;
    traceback_line_ = line_no_;
    traceback_offset_ = offset_;
    traceback_lines_ = 0;
    held_exception_.clear();
    frames_.clear();
    return;
  }

  // C++: terminate called after throwing an instance of 'X' / what():  msg
  if (!what_pending_.empty()) {
    std::string pending = std::move(what_pending_);
    what_pending_.clear();
    if (Has(line, "what():")) {
      std::string what(Trim(line.substr(line.find("what():") + 7)));
      auto e = Make(codes::kLogError, "cxx_terminate", pending + ": " + what.substr(0, 300), line,
                    "An uncaught C++ exception ended the rank (abort): the message says which check failed.");
      if (LogEvent known; KnownCause(what, &known)) {
        e.code = known.code;
        e.remedy = known.remedy;
        e.consequence = known.consequence;
        e.fields = known.fields;
      }
      e.line = what_line_;
      e.offset = what_offset_;
      out.push_back(std::move(e));
      return;
    }
    auto e =
        Make(codes::kLogError, "cxx_terminate", pending, pending, "An uncaught C++ exception ended the rank (abort).");
    e.line = what_line_;
    e.offset = what_offset_;
    out.push_back(std::move(e));
  }
  if (Has(line, "terminate called after throwing an instance of")) {
    what_pending_ = std::string(Trim(line)).substr(0, 300);
    what_line_ = line_no_;
    what_offset_ = offset_;
    return;
  }

  // torchrun's ChildFailedError table: "rank      : 1 (local_rank: 1)" then "exitcode  : -9 (pid: …)".
  if (Has(line, "ChildFailedError") || Has(line, "Root Cause (first observed failure)")) {
    if (!in_table_) table_rank_ = -1, table_host_.clear();
    in_table_ = true;
    table_rows_ = 0;
    return;
  }
  if (in_table_) {
    std::string_view t = Trim(line);
    if (++table_rows_ > kMaxTableRows) {
      in_table_ = false;
    } else if (StartsWith(t, "host") && Has(t, ":")) {
      table_host_ = std::string(Trim(t.substr(t.find(':') + 1))).substr(0, 253);
      return;
    } else if (StartsWith(t, "rank") && Has(t, ":") && Has(t, "(local_rank")) {
      std::string_view v = Trim(t.substr(t.find(':') + 1));
      table_rank_ = SafeInt(v.substr(0, v.find(' ')));
      return;
    } else if (StartsWith(t, "Process name:")) {
      // mpirun: "Process name: [[2269,1],2]"
      size_t close = t.rfind(']');
      size_t comma = close == std::string_view::npos ? std::string_view::npos : t.rfind(',', close);
      table_rank_ = comma == std::string_view::npos ? -1 : SafeInt(t.substr(comma + 1, t.find(']', comma) - comma - 1));
      return;
    } else if (StartsWith(t, "Exit code:") && table_rank_ >= 0) {
      int code = SafeInt(Trim(t.substr(t.find(':') + 1)));
      auto e =
          Make(codes::kRankExited, "mpirun_first_failure",
               "mpirun: rank " + std::to_string(table_rank_) + " was the first process to exit non-zero (exit code " +
                   std::to_string(code) + ")",
               line,
               "mpirun ended the job because this rank failed first; its own output says why. " + ExitMeaning(code, 0));
      e.subject_rank = table_rank_;
      e.exit_code = code;
      out.push_back(std::move(e));
      table_rank_ = -1;
      in_table_ = false;
      return;
    } else if (StartsWith(t, "exitcode") && Has(t, ":") && table_rank_ >= 0) {
      std::string_view v = Trim(t.substr(t.find(':') + 1));
      int code = SafeInt(v.substr(0, v.find(' ')));
      auto e = Make(
          codes::kRankExited, "torchrun_failure",
          "torchrun reports rank " + std::to_string(table_rank_) +
              (code < 0 ? " killed by signal " + std::to_string(-code) : " exited with code " + std::to_string(code)),
          line,
          "torchrun saw this rank fail and stopped the others; the rank's own log says why. " + ExitMeaning(code, 0));
      e.subject_rank = table_rank_;
      e.host = table_host_;
      if (code < 0)
        e.signal = -code;
      else
        e.exit_code = code;
      out.push_back(std::move(e));
      table_rank_ = -1;
      return;
    } else if (StartsWith(t, "time") || StartsWith(t, "error_file") || StartsWith(t, "traceback") ||
               StartsWith(t, "[") || StartsWith(t, "Root Cause") || StartsWith(t, "Failures") ||
               StartsWith(t, "<NO_OTHER") || StartsWith(t, "---") || StartsWith(t, "the job to be terminated") ||
               t.empty()) {
      return;  // rows that add nothing
    } else if (StartsWith(t, "====")) {
      // Closing rule after the rows ends the table.
      if (table_rows_ > 3) in_table_ = false;
      return;
    } else {
      in_table_ = false;
    }
  }

  Catalogue(line, out);
}

bool LogClassifier::HydraLine(std::string_view line, std::vector<LogEvent>& out) {
  std::string_view t = Trim(line);
  if (Has(t, "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES")) {
    EmitHydra(out);  // the next box, right after this one: it opens afresh
    return false;
  }
  if (Has(t, "TERMINATED WITH THE EXIT STRING:")) {
    // "Killed (signal 9)", "Segmentation fault (signal 11)": the signal behind the box's exit code.
    static const RE2 kSignal(R"(\(signal (\d+)\))", Quiet());
    std::string sig;
    if (RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), kSignal, &sig)) hydra_signal_ = SafeInt(sig);
    EmitHydra(out);
    return true;
  }
  // The box's rows are few, and a program's own lines end it. Hydra's cleanup lines ("[proxy:0:0@node]
  // …", "[mpiexec@node] …") may come between the box and its exit string.
  const bool cleanup = StartsWith(t, "[proxy:") || StartsWith(t, "[mpiexec@");
  if ((!StartsWith(t, "=") && !cleanup) || ++hydra_rows_ > 12) {
    EmitHydra(out);
    return false;
  }
  if (cleanup) return true;
  t = Trim(t.substr(std::min(t.find_first_not_of('='), t.size())));
  static const RE2 kWho(R"(^(?:RANK (\d+) )?PID (\d+) RUNNING AT (\S+))", Quiet());
  std::string rank, pid, host;
  if (RE2::PartialMatch(re2::StringPiece(t.data(), t.size()), kWho, &rank, &pid, &host)) {
    hydra_rank_ = rank.empty() ? -1 : SafeInt(rank);
    hydra_pid_ = SafeInt(pid);
    hydra_host_ = host.substr(0, 253);
  } else if (StartsWith(t, "EXIT CODE:")) {
    hydra_code_ = SafeInt(Trim(t.substr(10)));
    hydra_has_code_ = true;
  } else if (StartsWith(t, "KILLED BY SIGNAL:")) {
    std::string_view v = Trim(t.substr(17));
    hydra_signal_ = SafeInt(v.substr(0, v.find(' ')));
  }
  return true;  // the box's rules and its other rows ("CLEANING UP REMAINING PROCESSES")
}

void LogClassifier::EmitHydra(std::vector<LogEvent>& out) {
  in_hydra_ = false;
  if (hydra_pid_ == 0 && hydra_signal_ == 0 && !hydra_has_code_) return;  // a box cut off before its rows
  std::string who = hydra_rank_ >= 0 ? "rank " + std::to_string(hydra_rank_) : std::string("a process");
  if (hydra_pid_ > 0) who += " (pid " + std::to_string(hydra_pid_) + ")";
  if (!hydra_host_.empty()) who += " on " + hydra_host_;
  std::string how = hydra_signal_ > 0 ? "was killed by signal " + std::to_string(hydra_signal_)
                                      : "ended with exit code " + std::to_string(hydra_code_);
  std::string meaning = ExitMeaning(hydra_signal_ > 0 ? 0 : hydra_code_, hydra_signal_);
  // MPICH prints a killed process's signal number as its exit code ("EXIT CODE: 9", then "Killed
  // (signal 9)"): without that string, a small code may be either.
  if (hydra_signal_ == 0 && hydra_code_ > 0 && hydra_code_ < 32)
    meaning +=
        " MPICH's mpiexec prints a killed process's signal number here: if it was one, " + ExitMeaning(0, hydra_code_);
  auto e = Make(codes::kRankExited, "hydra_bad_termination", "mpiexec (Hydra): " + who + " " + how,
                "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES: " + who,
                "MPICH's (or Intel MPI's) mpiexec saw this process end badly and ended the others; its own output "
                "says why. " +
                    meaning);
  e.line = hydra_line_;
  e.offset = hydra_offset_;
  e.subject_rank = hydra_rank_;
  e.host = hydra_host_;
  e.pid = hydra_pid_;
  if (hydra_signal_ > 0)
    e.signal = hydra_signal_;
  else
    e.exit_code = hydra_code_;
  out.push_back(std::move(e));
}

std::vector<LogEvent> LogClassifier::Finish() {
  std::vector<LogEvent> out;
  if (in_hydra_) EmitHydra(out);
  if (!what_pending_.empty()) {
    auto e = Make(codes::kLogError, "cxx_terminate", what_pending_, what_pending_,
                  "An uncaught C++ exception ended the rank (abort).");
    e.line = what_line_;
    e.offset = what_offset_;
    out.push_back(std::move(e));
    what_pending_.clear();
  }
  if (in_traceback_)
    EmitTraceback(out, held_exception_.empty() ? "(traceback cut off: the process died while printing it)"
                                               : std::exchange(held_exception_, std::string()));
  in_table_ = false;
  // A help text the log ends in (cut off before its closing rule) is read as it is.
  if (in_help_ && !Trim(help_text_).empty()) EmitHelpText(out);
  in_help_ = false;
  help_text_.clear();
  return out;
}

std::vector<LogEvent> ClassifyLog(int rank, std::string_view content) {
  LogClassifier c(rank);
  std::vector<LogEvent> all;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t nl = content.find('\n', pos);
    std::string_view line = content.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    for (auto& e : c.Feed(line)) all.push_back(std::move(e));
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  for (auto& e : c.Finish()) all.push_back(std::move(e));
  return all;
}

}  // namespace dsd::collectors
