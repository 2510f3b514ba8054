// The messages of a `dsdoctor run` stream (docs/agent-protocol.md "Run stream"), typed, each with its
// writer and its reader side by side. A reader is the check: it takes any JSON value and returns the
// message or an error naming the message and the field ("run.ranks[0]: field 'rank' must be …"),
// never an exception, so a bug or a version skew costs one refused message, never a process.
//
//   coordinator → agent   run or reattach (the request), stop, stacks, resync
//   agent → coordinator   started, sample (text, written per rank entry), log, file, stacks, heartbeat,
//                         done; and the generic error reply
//
// Pure functions and value types; the writers of sample frames keep a buffer. Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/run_files.h"
#include "common/status.h"
#include "diagnosis/state.h"

namespace dsd::agent {

// ---- coordinator → agent ------------------------------------------------------------------------

struct RunRankLaunch {
  int rank = 0;
  int local_rank = 0;
  std::map<std::string, std::string> env;  // the rank's own variables (RANK, LOCAL_RANK, …)
};

// The nodes' default (collectors::kStopEscalation; agent_run.cc checks they agree).
inline constexpr int kDefaultStopEscalationMs = 3000;
inline constexpr int kDefaultReattachWindowMs = 600 * 1000;

struct RunRequest {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // every rank's (the job environment)
  std::string cwd;
  std::string run_dir;  // the coordinator's run dir; the node writes its rank files under the same path
  std::string run_id;   // the content of the coordinator's run.id: finding it tells a shared run dir
  int sample_ms = 200;
  bool trace_python = true;  // Python ranks get the collective tracer
  bool python = false;       // the command runs Python: stacks are taken with py-spy
  bool share_group = false;  // the run dir is 0750/0640 instead of 0700/0600
  int stop_escalation_ms =
      kDefaultStopEscalationMs;  // a stop that is not SIGKILL becomes SIGKILL after this (the run's plan sets it)
  // After every rank exited while no coordinator was attached, how long the agent waits for one to
  // reattach and collect the ranks' ends before it lets the run go (docs/run.md "When the
  // coordinator goes"); 0: it does not wait.
  int reattach_window_ms = kDefaultReattachWindowMs;
  // Non-empty (MPI programs): the agent starts no rank; mpirun starts each through `dsdoctor
  // rank-exec`, which hands it over on this abstract Unix socket (collectors/rank_exec.h).
  std::string rank_exec_socket;
  std::vector<RunRankLaunch> ranks;
};
nlohmann::json WriteRunRequest(const RunRequest& request);
Result<RunRequest> ReadRunRequest(const nlohmann::json& j);

// A coordinator taking over a run an agent serves (`dsdoctor attach`, or the same coordinator after
// its link broke: a partition that healed). Its reply is the run's "started" (the ranks as they
// are now), then the run's stream as after a "run" request: every rank restated in full, and for a
// coordinator that does not share the node's run dir, each rank's output it lacks (from `have`, the
// bytes of rank-<r>.log it holds) and the files of ranks that exited.
struct ReattachRequest {
  std::string run_id;
  std::map<int, uint64_t> have;  // rank → bytes of its log the coordinator holds
};
nlohmann::json WriteReattachRequest(const ReattachRequest& request);
Result<ReattachRequest> ReadReattachRequest(const nlohmann::json& j);

struct StopMessage {
  int signal = 15;
};
struct StacksRequest {
  int64_t id = 0;  // repeated by the reply: the coordinator drops replies to older requests
  std::vector<int> ranks;
  // Non-zero: first make every torch rank of the node dump its Flight Recorder for this incident
  // (docs/flight-recorder.md "Dumps on a hang"); an agent that does not mirror keeps them on disk.
  int flight_recorder_incident = 0;
};
// The coordinator refused a delta of these ranks: their next entries are keyframes.
struct ResyncMessage {
  std::vector<int> ranks;
};
using RunControl = std::variant<StopMessage, StacksRequest, ResyncMessage>;
nlohmann::json WriteRunControl(const RunControl& message);
// An unknown type is kUnimplemented; a bad field kInvalidArgument naming it.
Result<RunControl> ReadRunControl(const nlohmann::json& j);

// ---- agent → coordinator ------------------------------------------------------------------------

struct StartedMessage {
  std::string node;
  struct Rank {
    int rank = 0;
    int pid = 0;
  };
  std::vector<Rank> ranks;
  // The node found the coordinator's run.id under run_dir: its rank files are the coordinator's
  // own, and nothing is mirrored. Otherwise the node's files reach the coordinator as "log" output
  // and "file" messages.
  bool shared_run_dir = false;
};

// A rank's output that did not fit its sample entry, in order, ahead of the sample.
struct LogMessage {
  int rank = 0;
  std::string bytes;  // raw: base64 on the wire
};

// A rank's file of the node's run dir, for a coordinator that does not share it: the exit status
// when the rank exits, the stack when taken, the trace ring when the rank exits (ahead of the
// sample that reports the exit). Sent in pieces; the last one has `end` and the file's size (the
// bytes after the last piece are zeros: a ring's unused slots are never sent).
struct FileMessage {
  int rank = 0;
  RankFile kind = RankFile::kExit;
  uint64_t offset = 0;
  std::string bytes;  // raw: base64 on the wire
  bool end = false;
  uint64_t size = 0;  // with end
  int incident = 0;   // kFlightRecorder: the incident the dump belongs to (RunDir::FlightRecorderDump)
};

struct StackEntry {
  int rank = 0;
  std::string tool;       // "py-spy", "eu-stack", "gdb"
  std::string signature;  // reduced frames (collectors/stack.h)
  std::string error;      // set instead when the capture failed
};
struct StacksReply {
  int64_t id = 0;
  std::vector<StackEntry> stacks;
};

struct HeartbeatMessage {  // between stack captures, which can take seconds each
  int64_t now_ns = 0;
};
struct DoneMessage {};  // after the last sample, when every rank exited
// {"type":"error","code","message"}: the request was refused or its ranks could not start.
struct ErrorMessage {
  std::string code;
  std::string message;
};

using AgentRunMessage =
    std::variant<StartedMessage, LogMessage, FileMessage, StacksReply, HeartbeatMessage, DoneMessage, ErrorMessage>;
nlohmann::json WriteAgentRunMessage(const AgentRunMessage& message);
// Every agent message but "sample" (read in place: ScanSampleFrame). An unknown type is
// kUnimplemented, a bad field kInvalidArgument naming it.
Result<AgentRunMessage> ReadAgentRunMessage(const nlohmann::json& j);

// Pieces of at most this many raw bytes per "log" or "file" message (well inside a frame's 16 MiB
// once in base64).
inline constexpr size_t kFilePieceBytes = 4u << 20;
// The largest file a node may send (a ring of 8 M records): a reader refuses more, so a bad message
// can never make the coordinator hold more than this for one rank's file.
inline constexpr uint64_t kMaxFileBytes = uint64_t{1} << 30;
// A rank's output rides in its sample entry up to this size; more goes ahead in "log" messages.
inline constexpr size_t kInlineLogBytes = 256u << 10;

// The pieces of one file as FileMessages (at least one, the last with `end`). Trailing zero bytes
// are not sent: `size` restores them.
std::vector<FileMessage> FileMessages(int rank, RankFile kind, std::string_view content, int incident = 0);

// ---- the sample frame ---------------------------------------------------------------------------
//
// {"type":"sample","now_ns":<agent clock>,"ranks":[<entry>, …],"log_dir"?:<LogDirStatus>}
// where each entry is a rank's sample delta (diagnosis/sample_delta.h) plus "log": the rank's new
// output (base64). Written as text: built as a JSON tree and dumped, it cost more than reading the
// ranks.

class SampleFrameWriter {
 public:
  // Starts a frame (the buffer's storage is kept from the last one).
  void Begin(int64_t now_ns);
  // The rank entry, written by `write_entry` (a SampleDeltaWriter's EncodeTo), with the rank's new
  // output when not empty.
  template <typename WriteEntry>
  void AddRank(WriteEntry&& write_entry, std::string_view fresh_output) {
    if (ranks_++) text_.push_back(',');
    write_entry(&text_);
    AppendLog(fresh_output);
  }
  void SetLogDir(const diagnosis::LogDirStatus& status);
  // The frame's text, complete.
  const std::string& Finish();

 private:
  void AppendLog(std::string_view fresh_output);
  std::string text_;
  size_t ranks_ = 0;
  std::string log_dir_;
};

// A sample frame as the coordinator reads it: the agent's clock, and each rank entry's text with its
// rank (for SampleDeltaReader::ApplyText).
struct SampleFrameText {
  std::optional<int64_t> now_ns;  // absent, or not an integer: unknown
  struct Entry {
    int rank = -1;
    std::string_view text;
  };
  std::vector<Entry> entries;      // objects with an integer "rank"; other entries are left out
  std::string_view log_dir;        // the "log_dir" value's text; empty when absent
  std::vector<std::string> owned;  // the text the views point into, when made from a JSON value
  void Clear() {                   // keeps the vectors' storage
    now_ns.reset();
    entries.clear();
    log_dir = {};
    owned.clear();
  }
};

// Finds a sample frame's parts in its payload text, without building a JSON tree. False when the
// payload is not a sample frame or not of the shape agents write (an entry without a rank, a key
// twice, anything that is not JSON): the caller parses it then, and SampleFrameFromJson reads it.
bool ScanSampleFrame(std::string_view payload, SampleFrameText* out);
// The same parts of a parsed frame; false when it is not a sample frame (entries that are not objects
// with an integer "rank" are left out).
bool SampleFrameFromJson(const nlohmann::json& frame, SampleFrameText* out);
// A rank entry's "log" (what SampleDeltaReader::ApplyText appended) decoded to the raw bytes; false
// when it is not base64.
bool DecodeLog(std::string_view wire_text, std::string* raw);
// The "log" of a rank entry whatever its state fields hold (an entry whose delta was refused still
// carries the rank's output): appended to *wire_log as on the wire; false when the entry is not a
// JSON object or its "log" is not a string.
bool EntryLog(std::string_view entry, std::string* wire_log);

}  // namespace dsd::agent
