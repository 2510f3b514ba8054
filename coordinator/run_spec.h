// A `dsdoctor run`, planned once from its options (PlanRun) and then only read: which nodes, which
// launcher, the command and where it runs, the job environment every rank gets, the tracing
// choices, the thresholds, the stop escalation, MASTER_ADDR/MASTER_PORT and each rank's launch.
// The run session (coordinator/run_session.h), the agents' requests and --dry-run all read the
// same RunSpec, so a run feature is added here once. Values only; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "collectors/node_ranks.h"
#include "common/clock.h"
#include "common/net.h"
#include "common/run_files.h"
#include "common/status.h"
#include "coordinator/job_env.h"
#include "coordinator/plan.h"

namespace dsd::coordinator {

// The options of `run` that shape the job (cli/commands.h turns flags into these).
struct RunPlanOptions {
  NodeSourceOptions nodes;            // --local/--slots, --hostfile, --agents and DeepSpeed's filters
  std::vector<net::Endpoint> agents;  // --agents
  std::string launcher;               // --launcher; "": attach with --agents, local when simulated, else ssh
  bool direct = false;                // --direct: the ranks are children of dsdoctor, no agents
  std::vector<std::string> command;
  std::string log_dir = "dsdoctor-logs";
  std::string master_addr;    // --master_addr; "": the first node (its agent's address when simulated)
  int master_port = 0;        // --master_port; 0: a free port (simulated), else 29500
  double timeout_s = 60;      // --timeout: the stall threshold, and the ranks' DSDOCTOR_TIMEOUT
  double hang_after_s = 5;    // --hang-after
  std::string on_hang;        // stop | wait; "": stop, wait under --tui
  bool tui = false;           // --tui
  bool trace = true;          // false: --no-trace
  bool nccl_profiler = true;  // false: --no-nccl-profiler (the ranks get DSDOCTOR_NCCL_PROFILER=off)
  std::string mpi;            // "on": --trace-mpi; "off": --no-mpi; "": an MPI program is found (IsMpiCommand)
  bool share_group = false;   // --share-group
  bool debug = false;         // the debug log level: the ranks get the debug diagnostic profile
  bool dry_run = false;       // --dry-run: nothing starts, so no free port is picked
  std::string serve = "127.0.0.1:0";
  bool quiet = false;
  double reattach_window_s = 600;  // --reattach-window
};

struct RunSpec {
  JobNodes nodes;
  std::string launcher;    // direct | local | ssh | pdsh | mpirun | attach
  bool simulated = false;  // every node on this machine
  std::vector<std::string> command;
  bool python = false;  // the command runs Python (IsPythonCommand): stacks through py-spy
  std::string cwd;      // where every rank starts (this process's working directory)
  RunDir run_dir;       // absolute
  std::string run_id;   // random, written to run.id first: a node that finds it there shares the run dir
  EnvMap env;           // every rank's: the job environment, the diagnostic profile, run's own variables
  bool trace_python = true;
  // MPI programs: mpirun starts the ranks, each through a `dsdoctor rank-exec` shim that hands it to
  // its node's agent (collectors/rank_exec.h, coordinator/mpi_ranks.h); traced through PMPI.
  bool mpi = false;
  bool share_group = false;
  std::string master_addr;
  int master_port = 0;  // 0 only in a dry run's plan: picked when the job starts
  RankPlan ranks;       // each rank's launch, node after node
  double timeout_s = 60;
  double hang_after_s = 5;
  bool stop_on_hang = true;
  bool tui = false;
  bool quiet = false;
  std::string serve;
  Duration sample_period = std::chrono::milliseconds(200);
  // A stop that is not SIGKILL becomes SIGKILL after this, on the coordinator and on every node.
  Duration stop_escalation = collectors::kStopEscalation;
  // How long agents whose ranks all ended with no coordinator attached wait for one to collect
  // their ends (`dsdoctor attach`) before they let the run go.
  Duration reattach_window = std::chrono::minutes(10);

  // The ranks of node `index` (its launches in rank order).
  std::vector<RankLaunch> NodeRanks(size_t index) const;
};

// Errors (kInvalidArgument, the message for the user): the plan's (hostfile:line, a filter, a flag),
// --direct with nodes that are not this machine.
Result<RunSpec> PlanRun(const RunPlanOptions& options);

// Whether argv runs a Python interpreter: its program is python*/pypy* by name, or a script whose
// `#!` line names one (found on PATH when argv[0] has no slash).
bool IsPythonCommand(const std::vector<std::string>& argv);

// Whether argv runs an MPI program: an ELF program that needs libmpi (DT_NEEDED libmpi*.so*) and no
// other collective library (one that also links Gloo, NCCL or PyTorch chooses at run time), or a
// Python script that imports mpi4py. Any other needs --trace-mpi.
bool IsMpiCommand(const std::vector<std::string>& argv);
// The DT_NEEDED names of an ELF64 file; empty for any other file.
std::vector<std::string> ElfNeeded(const std::string& path);

}  // namespace dsd::coordinator
