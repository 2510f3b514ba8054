// Launcher prefixes of a combined log line: which rank, node or process printed it, and when.
// Recognised, nested in any order at the start of a line:
//   timestamps  2024-05-01T12:00:00.123Z / 2024-05-01 12:00:00,123 / [2024-05-01 12:00:00]
//   CRI         <timestamp> stderr F                (containerd / CRI-O container logs) → stream
//   Kubernetes  [pod/<pod>/<container>]            (kubectl logs --prefix) → host
//   OpenMPI     [<job>,<rank>]<stdout|stderr>:     (mpirun --tag-output; PRRTE's [ns@job,rank],
//               SageMaker's [job,mpirank:rank,host]) → rank
//   Ray         (<Actor> pid=<pid>, ip=<ip>)      → pid, host
//   torchrun    [rank<N>]: → rank;  [<role><N>]: / [<role><N>|<attempt>]: → local rank
//   NCCL        <host>:<pid>:<tid> [<dev>]         → host, pid (the message keeps "NCCL …")
//   srun -l     <N>:                               → rank   (only when the dialect has it)
//   pdsh        <host>:                            → host   (only when the dialect has it)
// A bare "<word>: " is ambiguous ("RuntimeError: …"), so pdsh and srun labels are accepted only
// when the start of the file shows them (LearnDialect). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

namespace dsd::collectors {

struct LinePrefix {
  std::string host;     // node (pdsh, NCCL, Kubernetes pod)
  int rank = -1;        // global rank
  int local_rank = -1;  // rank on its node (torchrun [default0]:)
  int pid = 0;          // NCCL host:pid:tid
  int64_t time_ns = 0;  // a leading timestamp (UTC when no zone is given)
  // mpirun tags every write, not every line: "RuntimeError[1,0]<stderr>:: boom". The tag as it
  // appeared, so the caller can remove its repeats inside the message.
  std::string mpi_tag;
  // The output stream a tag names ("stdout", "stderr"): a rank's two pipes reach the launcher
  // separately, so a print can land inside a traceback; they are kept apart.
  std::string channel;
};

struct PrefixDialect {
  bool pdsh = false;            // "<host>: " lines
  bool srun = false;            // "<N>: " lines
  std::set<std::string> hosts;  // hosts seen in pdsh position at the start of the file
};

// Learns the dialect from the first lines of a file (call it on up to a few thousand lines).
class DialectLearner {
 public:
  void Add(std::string_view line);
  PrefixDialect Dialect() const;

 private:
  int lines_ = 0, host_lines_ = 0, label_lines_ = 0;
  std::set<std::string> hosts_;
};

// Strips every recognised prefix from the start of `line` into `out` (fields it does not find are
// left as they were) and returns the message that follows.
std::string_view StripPrefixes(std::string_view line, const PrefixDialect& dialect, LinePrefix* out);

// The next mpirun tag in `s` at or after `from`: mpirun tags each write, not each line, so a rank's
// write without a newline ends where another's tag begins ("[1,0]<stdout>:step 1[1,2]<stderr>:Traceback").
// Returns its position (npos when none), sets *len to its length and the tag's fields in *out
// (rank, host when it names one, mpi_tag, channel); other fields of *out are left as they were.
size_t FindMpiTag(std::string_view s, size_t from, LinePrefix* out, size_t* len);

// A container runtime's or log shipper's JSON line: Docker's json-file ({"log":"…\n","stream":
// "stderr","time":"…"}), Fluent Bit / Fluentd records (with "kubernetes":{"pod_name":…}), journald's
// JSON (MESSAGE, _HOSTNAME), Cloud Logging's textPayload. The text it carries (its final newline
// removed) and what it says of it.
struct JsonLogLine {
  std::string text;
  std::string stream;   // "stdout" | "stderr" | ""
  int64_t time_ns = 0;  // 0: none
  std::string host;     // the pod or host it names, "" when none
};
// False when `line` is no such record: a JSON object with "log" beside "stream", "time" or
// "kubernetes", or with "textPayload" or "MESSAGE". A program's own structured log line is no record.
bool DecodeJsonLogLine(std::string_view line, JsonLogLine* out);

// The text after a tqdm progress bar glued in front of it ("45%|####  | 45/100 [00:10<00:12]Traceback…"),
// or "" when the segment is only a progress bar; other text is returned as it is.
std::string_view StripProgressBar(std::string_view segment);

}  // namespace dsd::collectors
