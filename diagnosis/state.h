// The diagnosis engine's input: what is known about every rank of a job at one moment (its
// process, its newest trace records, its process state and stack, the events classified from its
// log). Filled by the coordinator from agent samples (`dsdoctor run`) or from a log dir
// (`dsdoctor analyze`); built by hand in tests and benchmarks. Plain values, no I/O; the JSON
// forms are the ones stored in a run's `run.json` (docs/run.md). Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "diagnosis/finding.h"

namespace dsd::diagnosis {

// One traced call of a rank (docs/trace.md), with names rather than the trace's numbers so the
// engine does not depend on the runtime.
struct OpRecord {
  std::string op;    // "all_reduce", "barrier", "broadcast", "all_gather", "send", "recv", "rendezvous"
  uint64_t seq = 0;  // collectives: per communicator; send/recv: per peer
  uint32_t comm = 0;
  std::string dtype;   // "float32", … ("" when none)
  std::string reduce;  // "sum", … ("" when none)
  uint64_t count = 0, bytes = 0;
  int peer = -1;  // root (broadcast) or peer (send/recv)
  std::string callsite;
  std::string state;   // "started" | "completed" | "failed" | "enqueued"
  bool async = false;  // returned to the program at once: in flight says unfinished, not that the rank waits
  int64_t started_ns = 0, ended_ns = 0;

  bool collective() const { return op != "send" && op != "recv"; }
  bool in_flight() const { return state == "started" || state == "enqueued"; }
  // In flight in a call that blocks the rank (a synchronous one).
  bool blocking() const { return in_flight() && !async; }
  // Collectives with a root (broadcast, reduce, gather, scatter and their object forms): `peer`.
  bool rooted() const;
  // Same call on every rank: op, dtype, count, reduce op, root.
  bool SameCall(const OpRecord& o) const {
    return op == o.op && dtype == o.dtype && count == o.count && reduce == o.reduce && (!rooted() || peer == o.peer);
  }
  // "all_reduce#5 float32 x1024 (4 KiB) sum @engine.step"
  std::string Describe() const;
  bool operator==(const OpRecord&) const = default;
};

enum class RankStatus { kNotStarted, kRunning, kExited };
const char* RankStatusName(RankStatus s);  // "not_started" | "running" | "exited"

// /proc view of the rank's process over the last sampling interval.
struct ProcSample {
  bool valid = false;
  char state = '?';  // R, S, D, T, t, Z
  std::string wchan;
  double cpu_fraction = 0;  // CPU seconds per wall second over the last interval (all threads)
  double flat_for_s = 0;    // how long CPU time has not grown (0 while it grows)
  // CPU seconds used so far by the rank's whole process tree (DataLoader workers, compiler
  // children): flatness above is measured on it, and the coordinator compares it before stopping.
  double tree_cpu_s = 0;
  bool operator==(const ProcSample&) const = default;
};

// One line (or block) of a rank's log that means something (collectors/log_classifier).
struct LogEvent {
  int rank = -1;          // the rank whose log it is
  int subject_rank = -1;  // the rank the line is about, when it names another (mpirun, torchrun tables)
  std::string
      code;  // a finding code: NCCL_ERROR, COMM_ERROR, LOG_ERROR, WATCHDOG_TIMEOUT, RANK_EXITED, COLLECTIVE_MISMATCH
  Severity severity = Severity::kError;
  std::string kind;     // "nccl_warn", "python_traceback", "gloo_connection", … (docs/run.md)
  std::string summary;  // one line
  std::string text;     // the log line(s)
  int line = 0;         // 1-based line in the rank's log
  std::string remedy;
  // Python tracebacks: the collective the program was inside, and where it called it.
  std::string collective;  // "barrier", "all_reduce", … ("" when none)
  std::string location;    // "train.py:14"
  // Exit facts taken from a launcher's table (subject_rank): exit code or signal.
  int exit_code = 0, signal = 0;
  // Where the line is (analyze): the file as given, the node and pid its prefixes named, its byte
  // offset (orders lines of one file: in a combined log, file order is time order) and its time
  // when the line carried a timestamp (0 otherwise).
  std::string file;
  std::string host;
  int pid = 0;
  int64_t offset = -1;
  int64_t time_ns = 0;
  // The message usually follows another rank's failure (connection reset, remote error): demoted
  // to a consequence when an earlier failure explains it.
  bool consequence = false;
  // Named fields of the catalogue entry (log_catalogue.h): "seq", "op", "pg", "peer", …
  std::map<std::string, std::string> fields;
  std::string Field(const char* name) const {
    auto it = fields.find(name);
    return it == fields.end() ? "" : it->second;
  }
  // The ranks a field lists ("1, 3" or "1,3": Horovod's and torchfrtrace's missing ranks, the peers
  // a line names), sorted, each once.
  std::vector<int> RankList(const char* name) const;
  // "job.log:123" (or "rank 3 log line 123" when the file is not known).
  std::string Where() const;
};

struct RankState {
  int rank = 0;
  std::string node;
  int local_rank = 0;
  int pid = 0;
  RankStatus status = RankStatus::kNotStarted;
  int exit_code = 0;    // status == kExited and signal == 0
  int signal = 0;       // killed by this signal
  int64_t exit_ns = 0;  // when the exit was seen
  // Trace (absent for programs that do not use the bundled runtime).
  bool has_trace = false;
  std::optional<OpRecord> in_flight;
  std::optional<OpRecord> last;  // newest record of any state
  std::vector<OpRecord> recent;  // newest records (oldest first), including in_flight
  uint64_t step = 0;
  std::string phase;
  int64_t phase_ns = 0;
  int64_t heartbeat_ns = 0;
  bool watchdog_fired = false;
  bool flight_recorder = false;  // its tracer dumps torch's Flight Recorder on request (trace flag)
  bool finished = false;         // the runtime shut down cleanly
  std::string last_error;
  ProcSample proc;
  std::string stack;           // a captured stack, already reduced to its frames (collectors/stack)
  int64_t last_output_ns = 0;  // when the rank last wrote to its log (0: it never wrote)
  // When this state was read (the reader's clock: the agent's for a remote node); 0 means
  // JobState::now_ns. Ages of this rank's calls are measured to this moment, so a late sample
  // never makes a rank look stuck longer than it was seen to be.
  int64_t sample_ns = 0;
  // Its agent is lost (run): the state above is the last one seen, and nothing is assumed about
  // what happened since (docs/run.md "Agent liveness").
  bool unobserved = false;
};

// An agent `run` lost sight of: its connection dropped, or it sent nothing for a while.
struct AgentLoss {
  std::string node;
  std::vector<int> ranks;  // its ranks that were running when it was last heard from
  std::string why;         // "connection lost: …", "no frame from the agent for 3.2 s"
  double silent_s = 0;
  bool recovered = false;  // it came back (a partition healed): a warning, not an error
};

// The file system that holds a node's log dir (run), and writes into it that failed.
// A rank's output that its node could not write to the log yet (held in memory), or at all (lost).
struct OutputLoss {
  int rank = -1;
  uint64_t held_bytes = 0;
  uint64_t lost_bytes = 0;
};

struct LogDirStatus {
  std::string node;
  std::string path;         // the log dir
  std::string mount;        // its file system's mount point ("/", "/scratch")
  std::string fs_type;      // "ext4", "tmpfs", "nfs4", …
  uint64_t free_bytes = 0;  // what the writing user may still use (f_bavail; f_bfree for root)
  uint64_t total_bytes = 0;
  std::vector<std::string> write_errors;  // "rank-3.exit: No space left on device"
  std::vector<OutputLoss> output;         // ranks whose output waits for the disk or was lost
};

struct JobState {
  int world_size = 0;
  int64_t now_ns = 0;
  double stall_after_s = 60;  // --timeout: consistent collectives in flight longer than this stall
  double hang_after_s = 5;    // a rank away from a collective the others wait in for longer than this is missing
  bool job_ended = false;     // every rank has exited
  // analyze: no rank has an exit status and every rank's trace stopped beating well before the
  // analysis (its process ended or froze with the job: a run cut short, an mpirun that tore the job
  // down). A collective still in flight then was cut off by that end, not finished, however short
  // its wait: Missing() names the rank that stopped before joining it.
  bool traces_stopped = false;
  // Built from logs alone (`analyze` of log files): the ranks' fate is known only where a log says
  // it (a launcher's exit line); the others are shown as "state unknown", not as running.
  bool logs_only = false;
  // From logs alone: the ranks a line came from or named. The world size is the largest rank or count a
  // line gives, so ranks no line shows may be among the world.
  std::vector<int> ranks_in_logs;
  // The ranks were started by a launcher that ends the others once one fails (mpirun: `run` of an MPI
  // program): those ends are its teardown, not causes (EndedByTeardown, diagnosis/engine.h).
  bool launcher_teardown = false;
  std::vector<RankState> ranks;  // indexed by rank
  std::vector<LogEvent> events;
  std::vector<Finding> network;        // findings of a `check` run, to correlate with stalls
  std::vector<AgentLoss> agents_lost;  // run: agents lost now, and those that came back
  std::vector<LogDirStatus> log_dirs;  // run: one per node that reported its log dir
  // Findings `run` showed live that later cleared while the job went on (a stall it recovered from, a
  // straggler that caught up, a missing rank that came back): kept as warnings, with how long they
  // lasted, in every later diagnosis, the final report and run.json ("past_findings"), so nothing
  // the user lived through vanishes from the record (Diagnose adds each one not found again).
  std::vector<Finding> past;
  // Evidence the report should have had and does not ("rank-3.trace: not found …"): the report says
  // so, so that no finding's absence reads as a clean bill of health.
  std::vector<std::string> evidence_missing;
};

// Ranks whose state is the same (status, op, callsite, process state, stack): 1,000 ranks read as
// a few lines.
struct RankClass {
  std::string description;  // "all_reduce#5 float32 x1024 sum @engine.step; sleeping (futex_wait_queue)"
  std::vector<int> ranks;
};

struct Diagnosis {
  std::vector<Finding> findings;   // most important first
  std::vector<RankClass> classes;  // largest first
  bool hang = false;               // a proven finding says the job cannot make progress
  bool suspect = false;            // only heuristics say so (warnings; worth a look at the stacks)
  // No finding yet, but stacks now may prove one sooner: ranks have waited in a traced collective
  // for kLookS while a member rank, in no traced call, has been blocked as long (a rank in DDP's
  // C++ all-reduce, say).
  bool look = false;
};

// How long a wait must last before it is worth taking stacks, and how long a rank must be blocked
// for its stack in DDP's backward to count as waiting there.
inline constexpr double kLookS = 1.0;

// torch.distributed functions that are collectives (barrier, all_reduce, …): in a traceback or a
// Python stack they say which collective a rank is inside.
bool IsTorchCollective(std::string_view function);

// From a reduced Python stack ("barrier (distributed_c10d.py:3152) < main (train.py:16) < …"):
// the torch.distributed collective it is inside and its caller's file:line; false when none.
bool StackCollective(const std::string& stack, std::string* collective, std::string* location);

// Whether a reduced stack is in loss.backward() with DDP waiting for its gradient all-reduce to
// finish, or in DDP's forward (its bucket rebuild and buffer broadcast), where a DDP rank blocks
// when a peer never joins; `location` is the program's line when the stack has Python frames.
// Only meaningful for a rank that is blocked.
bool StackInDdpBackward(const std::string& stack, std::string* location);

// "0-3,5,7-8"
std::string FormatRanks(std::vector<int> ranks);

nlohmann::json ToJson(const OpRecord& r);
// The same record as a 13-element array, its fields by position (docs/agent-protocol.md): a sample
// delta's records, about half the bytes and a third of the parsing of the object form.
nlohmann::json ToCompactJson(const OpRecord& r);
// Reads either form.
Result<OpRecord> OpRecordFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const LogEvent& e);
Result<LogEvent> LogEventFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const ProcSample& p);  // "proc" of a rank (valid is implied)
// Without `recent` when with_recent is false (the fields a sample delta compares).
nlohmann::json ToJson(const RankState& r, bool with_recent = true);
Result<RankState> RankStateFromJson(const nlohmann::json& j);
// Sets the fields of `into` that `j` holds (ToJson's names; "recent" is not read); the others stay.
// On an error some fields may be set: patch a copy when the original must survive.
Status PatchRankState(const nlohmann::json& j, RankState* into);
// Resets one of the fields ToJson leaves out when absent ("in_flight", "proc", "exit_code", …).
void ClearRankStateField(std::string_view key, RankState* r);
nlohmann::json ToJson(const LogDirStatus& s);
Result<LogDirStatus> LogDirStatusFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const RankClass& c);

}  // namespace dsd::diagnosis
