// `dsdoctor run` for MPI programs: MPI's world is made by mpirun's daemons, which start every rank
// themselves, so a rank that an agent forks would be an MPI singleton. Instead the coordinator
// starts one mpirun whose command is `dsdoctor rank-exec`, a shim that forks the program (which
// inherits mpirun's identity for the rank, as under strace) and hands it to its node's agent:
//
//   shim → agent   hello <version> <rank>\n
//   agent → shim   ok <n>\n + n bytes of the rank's environment (KEY=VALUE\0 …), with the write end
//                  of the rank's output pipe attached (SCM_RIGHTS);  or  no <reason>\n
//   shim → agent   started <pid>\n   then, when the program ends,   exit <code> <signal> <unix ns>\n
//
// over an abstract Unix socket named per run and node (docs/agent-protocol.md "Rank exec"). Each
// side checks the other's uid (SO_PEERCRED): abstract names have no file permissions. The agent
// adopts the rank as if it had started it (collectors/node_ranks.h): the same output pump, monitor,
// exit file and stop; the shim mirrors the program's exit so that mpirun sees what it would have
// seen without us.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/net.h"
#include "common/status.h"

namespace dsd::collectors {

inline constexpr int kRankExecVersion = 1;

// The abstract socket name of node `node_index`'s agent in run `run_id` (without the leading NUL).
std::string RankExecSocketName(const std::string& run_id, size_t node_index);
// One connection to the agent on that abstract name (the shim's, and tests playing one).
// Errors: kInvalidArgument for a bad name, else the connect's errno (no agent listens).
Result<net::Fd> ConnectRankExec(const std::string& name);

// Whether a variable is part of an MPI launcher's identity for its process (OMPI_*, PMIX_*, PMI_*):
// never passed from an agent that mpirun started to the ranks it forks, never overridden in a rank
// that mpirun started.
bool MpiLauncherVariable(std::string_view name);

// One node of the shim's list: its ranks (consecutive, in node order) and its agent's socket.
struct RankExecNode {
  int slots = 0;
  std::string socket;
};
// "2:name,2:name" (slots:socket per node, in rank order); an error names the bad entry.
Result<std::vector<RankExecNode>> ParseRankExecNodes(std::string_view spec);
std::string FormatRankExecNodes(const std::vector<RankExecNode>& nodes);
// The socket of the node that holds `rank`, or "" when the list has fewer ranks.
std::string RankExecSocketOf(const std::vector<RankExecNode>& nodes, int rank);

// The agent's side: accepts the shims of its node and answers them. Owned and polled by one thread
// (NodeRanks::Tick); nothing blocks but the grant's send (bounded by a send timeout).
class RankExecListener {
 public:
  struct Grant {
    std::map<std::string, std::string> env;  // over the shim's own (which holds mpirun's variables)
    net::Fd output;                          // the write end of the rank's output pipe
  };
  // The rank's grant, or why it is refused (not a rank of this node, already handed over).
  using GrantFn = std::function<Result<Grant>(int rank)>;

  struct Event {
    enum class Kind { kStarted, kExited, kLost };
    Kind kind = Kind::kStarted;
    int rank = -1;
    pid_t pid = 0;                  // kStarted
    pid_t shim_pid = 0;             // kStarted: the shim, the program's parent
    int exit_code = 0, signal = 0;  // kExited
    int64_t exit_ns = 0;            // kExited: when the shim reaped it (wall clock), which orders exits across nodes
    // kLost: it had said "started" (else the hand-over failed: its program runs unwatched, if at all)
    bool started = false;
  };

  // Binds the abstract name. Errors: taken (another run, or a process of another user squatting).
  static Result<std::unique_ptr<RankExecListener>> Listen(const std::string& name, size_t expected_ranks);
  ~RankExecListener();

  // Accepts waiting shims (64 at most per call), reads what each said, answers hellos through
  // `grant` (2 s at most for a slow reader). kLost: a granted shim's connection closed before it
  // told the program's exit: after "started", the shim was killed and its program died with it (its
  // parent-death signal); before, the hand-over failed.
  std::vector<Event> Poll(const GrantFn& grant);
  // No more shims are accepted (the run is stopping); connected ones are still read.
  void Close();
  const std::string& name() const { return name_; }

 private:
  struct Conn;
  RankExecListener(net::Fd fd, std::string name, size_t expected);
  void Accept();
  // Reads what `c` sent; false when it is to be dropped.
  bool Read(Conn& c, const GrantFn& grant, std::vector<Event>* events);

  net::Fd fd_;
  std::string name_;
  size_t max_conns_;
  std::vector<std::unique_ptr<Conn>> conns_;
  uint64_t refused_ = 0;  // connections of other users
};

// The shim's side (`dsdoctor rank-exec`).
struct RankExecOptions {
  std::vector<RankExecNode> nodes;
  std::vector<std::string> argv;
  int rank = -1;  // -1: from the launcher's variables (Open MPI, PMIx, PMI, Slurm)
  Duration connect_timeout = std::chrono::seconds(30);
};
// Runs the program as this rank under its node's agent and returns when it ended, with the status
// the shim is to end with (ExitLikeChild). Where no agent takes the rank (none listed for it, none
// listening, a refusal), the program runs all the same, unwatched, and a line on `err` says why: a
// job is never harmed by its watcher.
struct RankExecExit {
  int exit_code = 0;
  int signal = 0;
};
RankExecExit RunRankExec(const RankExecOptions& options, std::FILE* err);
// Ends this process as the program ended: the same code, or the same signal.
[[noreturn]] void ExitLikeChild(const RankExecExit& exit);

}  // namespace dsd::collectors
