#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "agent/agent.h"
#include "agent/token.h"
#include "cli/commands.h"
#include "collectors/rank_exec.h"
#include "common/log.h"
#include "common/strings.h"
#include "probe/mpi_comm.h"

namespace dsd::cli {

namespace {

// One line from fd 0, read byte by byte so nothing after it is consumed: the rest of stdin is the
// coordinator-liveness channel.
Result<std::string> ReadTokenLineFromStdin() {
  std::string line;
  char c;
  while (line.size() < 4096) {
    ssize_t n = ::read(0, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') break;
    line += c;
  }
  std::string token(Trim(line));
  if (token.empty()) return InvalidArgument("--token-file -: no token on stdin");
  DSD_RETURN_IF_ERROR(agent::CheckTokenStrength(token, "--token-file -"));
  return token;
}

// This agent's (name, address) from "name=addr,…": under srun the entry named by SLURMD_NODENAME
// (tasks are numbered in Slurm's node order, not ours), under mpirun the entry at its rank.
Result<std::pair<std::string, std::string>> MpiNode(const std::string& list) {
  auto entries = Split(list, ',');
  if (const char* slurm_node = std::getenv("SLURMD_NODENAME"); slurm_node && std::getenv("SLURM_STEP_ID")) {
    for (const auto& e : entries) {
      const size_t eq = e.find('=');
      const std::string name = e.substr(0, eq);
      if (name == slurm_node) return std::make_pair(name, eq == std::string::npos ? name : e.substr(eq + 1));
    }
    return InvalidArgument("srun started this agent on " + std::string(slurm_node) + ", which the list does not name");
  }
  const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!rank_text) rank_text = std::getenv("PMIX_RANK");
  if (!rank_text) return InvalidArgument("not started by mpirun (no OMPI_COMM_WORLD_RANK)");
  size_t rank = std::strtoul(rank_text, nullptr, 10);
  if (rank >= entries.size()) {
    return InvalidArgument("rank " + std::string(rank_text) + " but only " + std::to_string(entries.size()) +
                           " nodes listed");
  }
  const std::string& e = entries[rank];
  size_t eq = e.find('=');
  if (eq == std::string::npos) return std::make_pair(e, e);
  return std::make_pair(e.substr(0, eq), e.substr(eq + 1));
}

}  // namespace

int RunAgent(const AgentCommandOptions& o) {
  auto log = log::Get("cli");
  if (o.exit_with_parent) {
    pid_t parent = ::getppid();
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) return kExitOk;  // the parent is already gone
  }
  auto endpoint = net::ParseEndpoint(o.listen);
  if (!endpoint.ok()) {
    log->error("--listen {}", endpoint.status().message());
    return kExitUsage;
  }
  std::string name = o.name;
  if (!o.mpi_nodes.empty()) {
    auto node = MpiNode(o.mpi_nodes);
    if (!node.ok()) {
      log->error("--mpi-nodes: {}", node.status().message());
      return kExitUsage;
    }
    name = node->first;
    endpoint->host = node->second;
  }
  auto token = o.token_file == "-" ? ReadTokenLineFromStdin() : agent::LoadTokenFile(o.token_file);
  if (!token.ok()) {
    log->error("{}", token.status().message());
    return kExitUsage;
  }
  probe::RealInventorySource inventory;
  agent::AgentOptions opts;
  opts.listen_addr = endpoint->host;
  opts.port = endpoint->port;
  opts.token = *token;
  opts.name = name;
  opts.exit_on_stdin_eof = o.exit_with_coordinator;
  // Under mpirun the agent also serves MPI_Allreduce probes over MPI_COMM_WORLD.
  if (!o.mpi_nodes.empty() && probe::LaunchedByMpirun()) {
    if (Status s = probe::InitMpi(); s.ok())
      opts.mpi = true;
    else
      log->warn("MPI probes unavailable: {}", s.message());
  }
  agent::Agent agent(opts, &inventory);
  if (Status s = agent.Bind(); !s.ok()) {
    log->error("agent: {}", s.message());
    return kExitProblems;
  }
  std::cout << agent::ReadyLine(name.empty() ? "-" : name, endpoint->host, agent.port()) << std::endl;
  Status s = agent.Run();
  if (opts.mpi) probe::FinalizeMpi();
  if (!s.ok()) {
    log->error("agent: {}", s.message());
    return kExitInternal;
  }
  return kExitOk;
}

int RunRankExecCommand(const RankExecCmdOptions& o) {
  auto nodes = collectors::ParseRankExecNodes(o.nodes);
  if (!nodes.ok()) {
    std::fprintf(stderr, "dsdoctor rank-exec: %s\n", nodes.status().message().c_str());
    return kExitUsage;
  }
  collectors::RankExecOptions options;
  options.nodes = std::move(*nodes);
  options.argv = o.command;
  collectors::ExitLikeChild(collectors::RunRankExec(options, stderr));
}

}  // namespace dsd::cli
