// The `dsdoctor` subcommands. Each returns the process exit code:
// 0 healthy, 1 problems found, 2 bad usage or input, 3 internal failure.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "diagnosis/finding.h"

namespace dsd::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitProblems = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInternal = 3;

struct ReportOptions {
  bool json = false;
  bool color = false;  // colour marks (only when stdout is a terminal and NO_COLOR is unset)
};
int RunReport(const ReportOptions& options);

struct AgentCommandOptions {
  std::string listen = "127.0.0.1:0";
  std::string token_file;  // "-" = first line of stdin
  std::string name;
  bool exit_with_coordinator = false;
  bool exit_with_parent = false;  // PR_SET_PDEATHSIG: started by mpirun/orted
  std::string mpi_nodes;          // "name=addr,…": this rank's entry (OMPI_COMM_WORLD_RANK) sets name and address
};
int RunAgent(const AgentCommandOptions& options);

// `dsdoctor rank-exec`: mpirun's command for each rank of an MPI run (collectors/rank_exec.h).
struct RankExecCmdOptions {
  std::string nodes;  // SLOTS:SOCKET,… in rank order
  std::vector<std::string> command;
};
// Ends the process as the program ended (its code or its signal); kExitUsage for bad flags.
int RunRankExecCommand(const RankExecCmdOptions& options);

struct CheckOptions {
  std::string hostfile;
  int local = 0;  // --local N: N simulated nodes on this machine
  std::string include, exclude;
  int num_nodes = -1, num_gpus = -1;
  std::string launcher;                // local | ssh | pdsh | mpirun | slurm | attach
  std::string mpirun_opts;             // extra mpirun arguments
  std::string pdsh_opts;               // extra pdsh arguments
  std::string slurm_opts;              // extra srun arguments
  std::string slurm_args;              // outside an allocation: salloc's arguments (ask Slurm for one)
  int slurm_wait_s = 300;              // no allocation within this long is a finding
  std::vector<std::string> self_args;  // our own argv after the program name (salloc runs it again)
  bool plan = false;                   // print the plan (nodes, slots, ranks) and start nothing
  std::string ssh_opts;                // extra ssh arguments, split on whitespace
  std::string remote_dsdoctor;         // dsdoctor's path on the nodes (default: this binary's path)
  std::string agents;                  // --agents host:port,…
  std::string token_file;              // attach: the agents' token
  int master_port = 29500;
  int agent_port = 0;
  int connect_timeout_ms = 2000;
  bool no_bandwidth = false;
  std::string sizes = "8-64M";  // all-reduce sweep (docs/check.md)
  double min_busbw = 0;         // GB/s; 0: no absolute floor
  double min_p2p_gbit = 0;      // Gbit/s; 0: no absolute floor
  double p2p_seconds = 0.3;     // per transfer
  std::string json_out;         // file or "-"
  std::string junit_out;
  bool color = false;
  std::string log_level;
};
int RunCheck(const CheckOptions& options);

struct RunOptions {
  std::string hostfile;
  int local = 0;  // --local N: N simulated nodes on this machine
  int slots = 1;  // ranks per simulated node
  std::string log_dir = "dsdoctor-logs";
  double timeout_s = 60;    // a consistent collective in flight this long is a stall; DSDOCTOR_TIMEOUT for ranks
  double hang_after_s = 5;  // a rank away from a collective the others wait in this long is missing
  std::string
      on_hang;  // stop: report, capture stacks, end the job · wait: keep watching (default: stop, wait with --tui)
  bool tui = false;               // live ncurses view; q stops the job
  std::string json_out;           // final report as JSON to FILE (- for stdout)
  bool quiet = false;             // do not stream rank output
  bool direct = false;            // start the ranks as our own children instead of through agents
  bool no_trace = false;          // do not inject the Python collective tracer (python/dsdoctor_tracer.py)
  bool no_nccl_profiler = false;  // do not set NCCL_PROFILER_PLUGIN (tracers/nccl_profiler.cc)
  bool trace_mpi = false;         // an MPI program: mpirun starts the ranks, traced through PMPI
  bool no_mpi = false;            // not an MPI program, whatever it links
  std::string include, exclude;   // DeepSpeed's resource filters (coordinator/hostfile.h)
  int num_nodes = -1, num_gpus = -1;
  std::string
      launcher;  // local | ssh | pdsh | mpirun | attach (default: local for simulated nodes, ssh for a hostfile)
  std::string ssh_opts, mpirun_opts, pdsh_opts, slurm_opts;
  std::string slurm_args;              // outside an allocation: salloc's arguments (ask Slurm for one)
  int slurm_wait_s = 300;              // no allocation within this long is a finding
  std::vector<std::string> self_args;  // our own argv after the program name (salloc runs it again)
  std::string remote_dsdoctor;         // dsdoctor's path on the nodes (default: this binary's path)
  std::string agents;                  // attach: running agents host:port,…
  std::string token_file;              // attach: their token
  int agent_port = 0;
  std::string master_addr;   // MASTER_ADDR (default: the first node's agent address)
  int master_port = 0;       // 0: a free port (simulated nodes) or 29500
  bool dry_run = false;      // print the plan and start nothing
  bool share_group = false;  // log dir 0750 and files 0640 instead of 0700/0600
  std::string log_level;
  std::string serve = "127.0.0.1:0";  // where `dsdoctor tui --attach` connects ("off": nowhere)
  double reattach_window_s = 600;     // agents whose coordinator is gone wait this long after their ranks
  bool color = false;
  std::vector<std::string> command;
};
int RunJob(const RunOptions& options);

// `dsdoctor attach RUN_DIR`: take over a run whose coordinator is gone (docs/run.md).
struct AttachCmdOptions {
  std::string run_dir;
  std::string json_out;
  bool quiet = false;
  std::string on_hang;
  double timeout_s = 0;
  double hang_after_s = 0;
  bool color = false;
};
int RunAttach(const AttachCmdOptions& options);

struct TuiOptions {
  std::string attach;           // HOST:PORT of a running `dsdoctor run`, or its log dir
  std::string token_file;       // the run's viewer.token (default: beside viewer.addr when --attach is a dir)
  std::string replay;           // an events.jsonl, or the log dir holding one
  bool dump = false;            // print one frame as text instead of opening the terminal
  double at = -1;               // replay: the moment to show (seconds since the start; <0: the end)
  double speed = 1;             // replay: playback speed
  std::string size = "100x30";  // --dump: COLSxROWS
};
int RunTui(const TuiOptions& options);

struct AnalyzeOptions {
  std::vector<std::string> paths;  // a run dir, or log files ("-" = standard input)
  bool list_patterns = false;      // print the log pattern catalogue (docs/log-patterns.md) instead
  bool coverage = false;           // print the catalogue's coverage of the sources (docs/log-coverage.md) instead
  std::string explain;             // print the patterns of this finding code or kind, with examples, instead
  bool json = false;
  double timeout_s = 60;
  double hang_after_s = 5;
  std::string slurm_job;  // add what Slurm recorded of this job (sacct) and read its output file
};
int RunAnalyze(const AnalyzeOptions& options);

// This binary's path (/proc/self/exe), for launchers that start it again as an agent.
std::string SelfExe();

// `args` (our argv after the program name) without --slurm-args/--slurm-wait and their values,
// before any "--" (the job's own command is never touched): what runs inside the allocation.
std::vector<std::string> WithoutSallocFlags(const std::vector<std::string>& args);

// --slurm-args outside an allocation (docs/slurm.md): asks Slurm for one and runs this command
// again inside it. nullopt: not asked for, go on here. Otherwise the exit code: the inner
// command's, kExitUsage for flags that contradict it, or what `report_no_allocation` returns
// with the finding that says why Slurm granted nothing.
std::optional<int> RunInNewSlurmAllocation(const char* who, const std::string& slurm_args, int wait_s,
                                           const std::vector<std::string>& self_args, bool nodes_named,
                                           const std::function<int(const diagnosis::Finding&)>& report_no_allocation);

// Parses argv and dispatches; catches everything so no exception escapes main.
int Main(int argc, char** argv);

}  // namespace dsd::cli
