// Launchers start one agent per node and say where each listens.
//   local:  N agents on this machine at 127.0.0.2, 127.0.0.3, … named node-0, node-1, … (the
//           embedded default: a simulated multi-node cluster)
//   ssh:    `ssh -o BatchMode=yes HOST -- dsdoctor agent …` per hostfile node
//   mpirun: one `mpirun` (OpenMPI) starts every agent, one per node; each agent finds its node
//           from OMPI_COMM_WORLD_RANK (`agent --mpi-nodes`)
//   attach: agents already running at given endpoints
// Started agents get the token on their stdin, never their command line; they keep reading stdin
// and exit when it closes (over ssh too: the session's stdin closes when the client goes), so
// agents never outlive their coordinator. Local agents also get PR_SET_PDEATHSIG.
// Local agents of `check` are forks of the coordinator that run dsdoctor's main with the agent's
// arguments instead of exec'ing the binary again (when the coordinator is single-threaded and the
// binary is this one): each simulated node then skips loading and linking 25 shared libraries
// and initialising OpenSSL, 5-7 ms of CPU that 250 nodes sharing two cores add up to over 1 s.
// A Launcher owns the processes it started and ends them (by pid) in Stop() or its destructor.
// Not thread-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/net.h"
#include "coordinator/hostfile.h"

namespace dsd::coordinator {

// dsdoctor's main, run in a forked child with the argv an exec would get (argv[0] the binary).
using InProcessMain = std::function<int(int argc, char** argv)>;
// False in sanitizer builds: their leak check runs when an exec'd agent exits, and a forked one
// ends with _exit, so there local agents are exec'd and checked as before.
bool AgentsAreForked();

struct AgentHandle {
  std::string name;
  net::Endpoint endpoint;
  pid_t pid = -1;     // the process we started (the agent, or its ssh client)
  int stdin_fd = -1;  // our end of its stdin
  std::string error;  // non-empty: this node's agent could not be started
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual std::vector<AgentHandle> Start(const std::vector<NodePlan>& nodes, const std::string& token) = 0;
  virtual void Stop() = 0;
  virtual bool simulated() const { return false; }  // all nodes on this machine
  // Where a tool that starts every agent (srun, pdsh, mpirun) keeps its stderr for the whole run
  // (the run dir's launcher.log); "" (check): an anonymous file, read for failed starts only.
  void set_output_file(std::string path) { output_file_ = std::move(path); }
  // Open files the coordinator holds per node while the agents run: the link to each agent, and
  // for agents started one by one (SpawnLauncher) their stdin, ready pipe and captured stderr too.
  virtual int fds_per_node() const { return 1; }

 protected:
  std::string output_file_;
};

// Starts one process per node whose stdout carries the agent's ready line; all nodes at once.
class SpawnLauncher : public Launcher {
 public:
  ~SpawnLauncher() override { Stop(); }
  int fds_per_node() const override { return 4; }
  std::vector<AgentHandle> Start(const std::vector<NodePlan>& nodes, const std::string& token) override;
  void Stop() override;

 protected:
  struct Spawn {
    std::vector<std::string> argv;
    net::Endpoint endpoint;       // where the agent will listen (port 0: learnt from the ready line)
    bool capture_stderr = false;  // to a file whose tail explains a failed start (ssh's messages)
    // Set: argv[0] is this executable, and a single-threaded coordinator runs this in the forked
    // child instead of exec'ing it (see the top of this file).
    InProcessMain in_process;
  };
  virtual Result<Spawn> SpawnFor(const NodePlan& node, size_t index) = 0;
  Duration ready_timeout_ = std::chrono::seconds(30);

 private:
  std::vector<AgentHandle> started_;
};

// The arguments after `dsdoctor` that start an agent reading its token from stdin.
std::vector<std::string> AgentArgs(const net::Endpoint& listen, const std::string& name, const std::string& log_level);

struct LocalLauncherOptions {
  std::string dsdoctor_binary;  // the `dsdoctor` executable to run as agent
  std::string first_address = "127.0.0.2";
  int agent_port = 0;     // 0: each agent picks a free port
  std::string log_level;  // passed on as --log-level when set
  // Set (and dsdoctor_binary is this executable): agents are forks that run it, not execs.
  InProcessMain in_process;
};

class LocalLauncher final : public SpawnLauncher {
 public:
  explicit LocalLauncher(LocalLauncherOptions options) : options_(std::move(options)) {}
  bool simulated() const override { return true; }

  // 127.0.0.2 + i (errors past 127.255.255.254).
  static Result<std::string> NthLoopbackAddress(const std::string& first, int i);

 protected:
  Result<Spawn> SpawnFor(const NodePlan& node, size_t index) override;

 private:
  LocalLauncherOptions options_;
};

struct SshLauncherOptions {
  std::string remote_dsdoctor;        // path of dsdoctor on the nodes
  std::vector<std::string> ssh_args;  // extra ssh arguments (-p 2222, -i key, -o …)
  int agent_port = 0;
  std::string log_level;
  Duration connect_timeout = std::chrono::seconds(10);
};

// Each agent binds to its node's hostfile name (so the coordinator and the other nodes reach it
// by that name, and connect probes leave from that address).
class SshLauncher final : public SpawnLauncher {
 public:
  explicit SshLauncher(SshLauncherOptions options) : options_(std::move(options)) {}
  // The ssh command line for one node (exposed for tests).
  std::vector<std::string> SshCommand(const std::string& host, const std::vector<std::string>& remote_args) const;

 protected:
  Result<Spawn> SpawnFor(const NodePlan& node, size_t index) override;

 private:
  SshLauncherOptions options_;
};

// One command starts every agent (mpirun, pdsh) and carries their ready lines on its stdout.
// Such a command cannot hand each agent our stdin, so agents read the token from a file (mode
// 0600) in a fresh directory under token_dir: on a real cluster it must be on storage every node
// sees. The file is removed as soon as every agent is ready (or the wait gave up).
class FanoutLauncher : public Launcher {
 public:
  ~FanoutLauncher() override { FanoutLauncher::Stop(); }
  std::vector<AgentHandle> Start(const std::vector<NodePlan>& nodes, const std::string& token) override;
  void Stop() override;

 protected:
  struct Command {
    std::vector<std::string> argv;
    std::vector<std::pair<std::string, std::string>> env;  // added to ours for the command
  };
  // name_addr: each node's name and the address its agent listens on.
  virtual Command FanoutCommand(const std::vector<std::pair<std::string, std::string>>& name_addr,
                                const std::string& token_file) const = 0;
  virtual std::string AddressOf(const NodePlan& node, size_t index) const { return node.host; }
  virtual std::string tool() const = 0;  // "mpirun", "pdsh": for messages
  // Nodes the tool's stderr so far says will never start an agent.
  virtual std::set<std::string> FailedNodes(const std::string& stderr_text) const { return {}; }
  // The tool hands its stdin to every agent (srun): the token goes there, no file is written, and
  // the pipe stays open: its end tells the agents the coordinator is gone ("stop" first when not).
  virtual bool token_on_stdin() const { return false; }
  std::string token_dir_parent_ = "/tmp";
  Duration ready_timeout_ = std::chrono::seconds(60);

 private:
  void RemoveTokenDir();
  pid_t pid_ = -1;
  int stdin_fd_ = -1;  // token_on_stdin: our end of the tool's stdin
  std::string token_dir_;
};

struct MpirunLauncherOptions {
  std::string mpirun = "mpirun";
  std::string dsdoctor_binary;          // dsdoctor's path on every node
  std::vector<std::string> extra_args;  // more mpirun arguments (--mca …)
  int agent_port = 0;
  std::string log_level;
  // --local N: every agent on this machine (mpirun --host localhost:N), at 127.0.0.2, 127.0.0.3, …
  bool simulated = false;
  std::string token_dir = "/tmp";  // see FanoutLauncher
  Duration ready_timeout = std::chrono::seconds(60);
};

// Agents started by mpirun exit with it (`--exit-with-parent`), and mpirun ends its job when it is
// terminated or its parent (the coordinator) dies.
class MpirunLauncher final : public FanoutLauncher {
 public:
  explicit MpirunLauncher(MpirunLauncherOptions options);
  bool simulated() const override { return options_.simulated; }
  // The mpirun command line (exposed for tests).
  std::vector<std::string> MpirunCommand(const std::vector<std::pair<std::string, std::string>>& name_addr,
                                         const std::string& token_file) const;

 protected:
  Command FanoutCommand(const std::vector<std::pair<std::string, std::string>>& name_addr,
                        const std::string& token_file) const override {
    return {MpirunCommand(name_addr, token_file), {}};
  }
  std::string AddressOf(const NodePlan& node, size_t index) const override;
  std::string tool() const override { return "mpirun"; }

 private:
  MpirunLauncherOptions options_;
};

struct PdshLauncherOptions {
  std::string pdsh = "pdsh";
  std::string remote_dsdoctor;          // dsdoctor's path on every node
  std::vector<std::string> ssh_args;    // passed to pdsh's ssh through PDSH_SSH_ARGS_APPEND
  std::vector<std::string> extra_args;  // more pdsh arguments
  int agent_port = 0;
  std::string log_level;
  std::string token_dir = "/tmp";  // see FanoutLauncher
  Duration ready_timeout = std::chrono::seconds(60);
  Duration connect_timeout = std::chrono::seconds(10);
};

// DeepSpeed's default multi-node launcher: `pdsh -S -f 1024 -R ssh -w HOSTS <command>`, where pdsh
// puts each target's name for %h. Each agent binds to its hostfile name, like ssh's. pdsh gives
// every remote command a stdin that reaches EOF when pdsh ends, so agents still exit with their
// coordinator (--exit-with-coordinator) although the token comes from a file.
class PdshLauncher final : public FanoutLauncher {
 public:
  explicit PdshLauncher(PdshLauncherOptions options);
  // The pdsh command line and its environment (exposed for tests).
  Command PdshCommand(const std::vector<std::string>& hosts, const std::string& token_file) const;
  // Hosts pdsh's stderr reports as failed ("pdsh@launcher: worker-1: ssh exited with exit code 255").
  std::set<std::string> FailedNodes(const std::string& stderr_text) const override;

 protected:
  Command FanoutCommand(const std::vector<std::pair<std::string, std::string>>& name_addr,
                        const std::string& token_file) const override;
  std::string tool() const override { return "pdsh"; }

 private:
  PdshLauncherOptions options_;
};

struct SlurmLauncherOptions {
  std::string srun = "srun";
  std::string dsdoctor_binary;          // dsdoctor's path on every node
  std::vector<std::string> extra_args;  // more srun arguments (--slurm-opts: -p gpu, --account …)
  int agent_port = 0;                   // 0: each agent picks a free port (its ready line says which)
  std::string log_level;
  Duration ready_timeout = std::chrono::seconds(120);  // srun may wait for the allocation
};

// One `srun --nodes=N --ntasks-per-node=1` step starts every agent (inside an allocation it runs on
// its nodes; outside one, srun asks for one). srun hands its stdin to every task, so the token
// travels there, never in argv or a file; each agent finds its own entry of --mpi-nodes by
// SLURMD_NODENAME and listens on its node's name. The agents end with the step: when the
// coordinator stops srun, or `scancel` ends the job.
class SlurmLauncher final : public FanoutLauncher {
 public:
  explicit SlurmLauncher(SlurmLauncherOptions options);
  // The srun command line (exposed for tests).
  std::vector<std::string> SrunCommand(const std::vector<std::pair<std::string, std::string>>& name_addr) const;
  // Nodes srun's stderr names as failed ("srun: error: node-1: task 1: Exited with exit code 2").
  std::set<std::string> FailedNodes(const std::string& stderr_text) const override;

 protected:
  Command FanoutCommand(const std::vector<std::pair<std::string, std::string>>& name_addr,
                        const std::string&) const override {
    return {SrunCommand(name_addr), {}};
  }
  std::string tool() const override { return "srun"; }
  bool token_on_stdin() const override { return true; }

 private:
  SlurmLauncherOptions options_;
};

class AttachLauncher final : public Launcher {
 public:
  // `agents` as given to --agents: "host:port,…"; names come from the nodes' hostfile order, or
  // are node-<i> when no hostfile was given.
  explicit AttachLauncher(std::vector<net::Endpoint> agents) : agents_(std::move(agents)) {}
  std::vector<AgentHandle> Start(const std::vector<NodePlan>& nodes, const std::string& token) override;
  void Stop() override {}

 private:
  std::vector<net::Endpoint> agents_;
};

// The one place `check` and `run` turn a launcher name into a Launcher and the job token.
struct LauncherChoice {
  std::string kind;                   // local | ssh | pdsh | mpirun | attach | slurm
  std::string self_binary;            // this dsdoctor (local agents)
  std::string remote_dsdoctor;        // dsdoctor's path on the nodes; "": self_binary
  std::vector<std::string> ssh_args;  // ssh and pdsh (through its ssh)
  std::vector<std::string> mpirun_args;
  std::vector<std::string> pdsh_args;
  std::vector<std::string> slurm_args;  // more srun arguments
  std::string output_file;              // Launcher::set_output_file
  std::vector<net::Endpoint> agents;    // attach
  std::string token_file;               // attach: the running agents' token
  int agent_port = 0;
  std::string log_level;
  bool simulated = false;    // --local: every node on this machine
  InProcessMain agent_main;  // local: how a forked agent runs (LocalLauncherOptions::in_process)
};

struct LaunchSetup {
  std::unique_ptr<Launcher> launcher;
  std::string token;  // fresh for agents we start; the token file's for attach
};

// The launcher when --launcher is not given, one rule for `check` and `run`: --agents → attach;
// the nodes of the Slurm allocation we run in (SLURM_JOB_ID, no hostfile) → slurm;
// simulated nodes (--local N, or this machine alone when there is no hostfile) → local; a
// hostfile's nodes → ssh, which hands each agent its token on stdin. pdsh, DeepSpeed's default,
// needs the token on storage every node sees, so it runs only when asked for (--launcher pdsh).
// Never local for a hostfile: a check of hosts it never contacted must not come out green.
std::string DefaultLauncher(bool agents_given, bool simulated_nodes, bool slurm_nodes = false);

// "host:port,host:port" (--agents) → endpoints; "" → none; "@FILE" → the file's entries (one or more
// a line, by commas or blanks; '#' starts a comment). Errors name the bad entry (file:line).
Result<std::vector<net::Endpoint>> ParseAgentList(const std::string& list);

// Errors (usage): ssh/pdsh with --local, attach without --agents or a token file, --agents not
// one per node, an unknown kind. Generating a token can fail with an internal error.
Result<LaunchSetup> MakeLauncher(const LauncherChoice& choice, size_t node_count);

struct ReadyInfo {
  std::string name, addr;
  int port = 0;
};
// Parses "DSDOCTOR_AGENT_READY name=… addr=… port=… pid=…" anywhere in `line`.
std::optional<ReadyInfo> ParseReadyLine(const std::string& line);

// Quotes one word for a POSIX shell ('…' with embedded quotes escaped).
std::string ShellQuote(const std::string& word);

}  // namespace dsd::coordinator
