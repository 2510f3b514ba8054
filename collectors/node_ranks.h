// One node's ranks of a `dsdoctor run`: starts them (the job environment, each rank's own variables,
// the Python tracer), looks at them each tick (exit, trace ring, /proc, new output; the node's log
// dir file system), signals them with escalation (a stop that is not SIGKILL becomes SIGKILL after
// the escalation delay), and takes their stacks. The agent serves it over a run stream
// (agent/agent_run.cc); `run --direct` calls it in the coordinator's process
// (coordinator/rank_source.h). Its files go to the node's run dir (common/run_files.h).
//
// Time comes from a Clock, and stacks from a StackTaker, so tests drive the escalation and the
// stack path with fakes; the ranks are real processes. Not thread-safe: one thread owns it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "collectors/log_dir_space.h"
#include "collectors/python_tracer.h"
#include "collectors/rank_exec.h"
#include "collectors/rank_monitor.h"
#include "collectors/stack.h"
#include "common/clock.h"
#include "common/run_files.h"
#include "diagnosis/state.h"

namespace dsd::collectors {

// Takes a running process's stack. The real one runs py-spy, eu-stack or gdb (collectors/stack.h).
class StackTaker {
 public:
  virtual ~StackTaker() = default;
  virtual Result<StackCapture> Take(pid_t pid, bool python) = 0;
};
// The process-wide real taker (stateless).
StackTaker& RealStackTaker();

// How long a stop other than SIGKILL waits before SIGKILL, unless the run's plan says otherwise
// (coordinator/run_spec.h: the same on the coordinator and on every node).
inline constexpr Duration kStopEscalation = std::chrono::seconds(3);
// How long a node's torch ranks get to write their Flight Recorder dumps of an incident.
inline constexpr Duration kFlightRecorderWait = std::chrono::seconds(5);

struct NodeRanksOptions {
  std::string node;  // the node's name in every rank's state
  RunDir run_dir;    // where this node writes rank-<r>.log, .trace, .exit, .stack
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // every rank's (the job environment)
  std::string cwd;
  bool trace_python = true;  // Python ranks get the collective tracer (collectors/python_tracer.h)
  bool python = false;       // the command runs Python: stacks through py-spy
  Duration stop_escalation = kStopEscalation;
  size_t recent = 64;  // trace records per rank state
  // Non-empty: the ranks are not started here but handed over by `dsdoctor rank-exec` shims that
  // mpirun started (MPI programs), on this abstract socket (collectors/rank_exec.h). They get the
  // MPI tracer (libdsdoctor-pmpi.so) when trace_python is on.
  std::string rank_exec_socket;
};

struct RankToStart {
  int rank = 0;
  int local_rank = 0;
  std::map<std::string, std::string> env;  // its own variables, over the job's
};

// What one tick saw.
struct NodeSample {
  int64_t now_ns = 0;                              // the clock's wall time, as each state's sample_ns
  std::vector<std::string> fresh;                  // by index: new output since the last tick (raw bytes)
  std::vector<size_t> exited;                      // indexes of the ranks whose exit this tick saw
  std::optional<diagnosis::LogDirStatus> log_dir;  // the run dir's file system, when a report is due
};

struct NodeStack {
  int rank = 0;
  std::string tool, signature, text;  // text: the tool's whole output, also in rank-<r>.stack
  std::string error;                  // instead, when the capture failed
};

class NodeRanks {
 public:
  // `clock` and `stacks` are borrowed and must outlive the object.
  NodeRanks(NodeRanksOptions options, Clock* clock, StackTaker* stacks = &RealStackTaker());
  ~NodeRanks();  // kills what still runs: ranks never outlive their watcher

  // Starts every rank; on an error the ranks already started are killed and the error names the rank.
  // With a rank_exec_socket, listens there instead: each rank runs once its shim handed it over.
  Status Start(const std::vector<RankToStart>& ranks);
  // One look at every rank (the returned sample is reused by the next tick). Also escalates a
  // pending stop to SIGKILL once its delay has passed.
  const NodeSample& Tick();
  // Signals every running rank. A signal other than SIGKILL escalates to SIGKILL after
  // stop_escalation unless every rank has exited by a later Tick. Ranks not handed over yet never
  // will be: no more shims are taken.
  void Signal(int sig);
  // Stacks of the given ranks that are running (others are skipped), each written to
  // rank-<r>.stack ("# tool" first). `between` runs between two captures (each can take seconds).
  std::vector<NodeStack> Stacks(const std::vector<int>& ranks, const std::function<void()>& between = {});

  // PyTorch's Flight Recorder (docs/flight-recorder.md "Dumps on a hang"): writes the node's request
  // file, which the tracer of every torch rank watches, so each dumps its recorder for `incident`
  // into RunDir::FlightRecorderDump(incident, rank). Errors: the file could not be written.
  Status RequestFlightRecorder(int incident);
  // The dumps of `incident` on disk: waits, calling `between` every ~200 ms, until each running rank
  // whose tracer watches for requests (RankState::flight_recorder: torch 2.x, torch.distributed set
  // up) wrote its dump or `wait` has passed (a rank stuck with the interpreter's lock held writes none).
  struct FlightRecorderFile {
    int rank = 0;
    std::string path;
  };
  std::vector<FlightRecorderFile> FlightRecorderDumps(int incident, Duration wait,
                                                      const std::function<void()>& between = {});
  // Stacks() with the Flight Recorder dumps of `incident` (0: none) taken at the same moment: the
  // request goes first, so every torch rank dumps while the stacks are taken, then the dumps get up
  // to kFlightRecorderWait; they go to *dumps when given (the agent sends them on).
  std::vector<NodeStack> StacksAndDumps(const std::vector<int>& ranks, int incident,
                                        const std::function<void()>& between,
                                        std::vector<FlightRecorderFile>* dumps = nullptr);

  // Every rank exited (after a stop, a rank never handed over counts as ended).
  bool AllExited() const;
  int64_t NowNs() const;  // the clock's wall time, as Tick stamps samples
  size_t size() const { return monitors_.size(); }
  const diagnosis::RankState& state(size_t i) const { return monitors_[i].state(); }
  const NodeRanksOptions& options() const { return options_; }

 private:
  NodeRanksOptions options_;
  Clock* clock_;
  StackTaker* stacks_;
  OutputPump pump_;  // before monitors_: they borrow it (destroyed after them)
  std::vector<RankMonitor> monitors_;
  LogDirMonitor log_dir_monitor_;
  NodeSample sample_;
  std::optional<MonoTime> kill_at_;  // a stop's escalation to SIGKILL
  // Ranks handed over by shims: the listener and each rank's environment for its grant.
  std::unique_ptr<RankExecListener> rank_exec_;
  std::vector<std::map<std::string, std::string>> rank_exec_env_;
  bool stopping_ = false;       // a stop was sent: ranks not handed over yet are not waited for
  int stop_signal_ = 0;         // the last stop's signal, for a rank handed over after it
  std::set<size_t> unwatched_;  // ranks whose hand-over failed half-way: never awaited
  void AdoptHandedOver();
  // The environment of ranks[i]: the job's, its own, the tracers'.
  std::map<std::string, std::string> RankEnv(const RankToStart& rank, const std::optional<PythonTracer>& tracer,
                                             const std::optional<std::string>& nccl_profiler) const;
};

}  // namespace dsd::collectors
