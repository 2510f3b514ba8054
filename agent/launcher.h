// Launchers start one agent per node and say where each listens.
//   local:  N agents on this machine at 127.0.0.2, 127.0.0.3, … named node-0, node-1, … (the
//           embedded default: a simulated multi-node cluster)
//   attach: agents already running at given endpoints
// The token reaches a started agent through its stdin, never its command line; the agent keeps
// reading stdin and exits when it closes, so agents never outlive their coordinator (and
// PR_SET_PDEATHSIG covers a coordinator killed outright).
// A Launcher owns the processes it started and ends them (by pid) in Stop() or its destructor.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "agent/hostfile.h"
#include "common/net.h"

namespace dsd::agent {

struct AgentHandle {
  std::string name;
  net::Endpoint endpoint;
  pid_t pid = -1;          // local launcher only
  int stdin_fd = -1;       // our end of the agent's stdin (local launcher)
  std::string error;       // non-empty: this node's agent could not be started
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual std::vector<AgentHandle> Start(const std::vector<NodePlan>& nodes, const std::string& token) = 0;
  virtual void Stop() = 0;
};

struct LocalLauncherOptions {
  std::string dsdoctor_binary;        // the `dsdoctor` executable to run as agent
  std::string first_address = "127.0.0.2";
  int agent_port = 0;                 // 0: each agent picks a free port
  std::string log_level;              // passed on as --log-level when set
  Duration ready_timeout = std::chrono::seconds(15);
};

class LocalLauncher final : public Launcher {
 public:
  explicit LocalLauncher(LocalLauncherOptions options) : options_(std::move(options)) {}
  ~LocalLauncher() override { Stop(); }
  std::vector<AgentHandle> Start(const std::vector<NodePlan>& nodes, const std::string& token) override;
  void Stop() override;

  // 127.0.0.2 + i (errors past 127.255.255.254).
  static Result<std::string> NthLoopbackAddress(const std::string& first, int i);

 private:
  LocalLauncherOptions options_;
  std::vector<AgentHandle> started_;
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

}  // namespace dsd::agent
