// The check session of `dsdoctor check` (docs/check.md): starts an agent per planned node, collects
// every node's inventory, probes the full mesh and the rendezvous port, runs the bandwidth probes
// and stops the agents. What went wrong on a node is in its NodeProbe's error, never a failure of
// the session; agent::EvaluateCluster turns the result into checks and findings.
// Blocking; uses threads of its own for the per-node calls.
#pragma once

#include <string>
#include <vector>

#include "agent/cluster_check.h"
#include "coordinator/launcher.h"
#include "coordinator/plan.h"
#include "probe/inventory.h"

namespace dsd::coordinator {

struct CheckSessionOptions {
  int master_port = 29500;
  int connect_timeout_ms = 2000;
  bool bandwidth = true;
  std::vector<size_t> sizes;    // all-reduce sweep
  double min_busbw = 0;         // GB/s; 0: no absolute floor
  double min_p2p_gbit = 0;      // Gbit/s; 0: no absolute floor
  double p2p_seconds = 0.3;     // per transfer
  bool use_mpi = false;         // mpirun started every agent: MPI_Allreduce instead of Gloo
  bool shutdown_agents = true;  // false for attached agents, which outlive the check
  probe::EnvMap job_env;        // what every rank would see (coordinator/job_env.h)
};

// Open files the coordinator of a check holds per node at most (Launcher::fds_per_node: the link to
// the agent, and for agents started one by one their stdin pipe, ready pipe and captured stderr);
// plus a reserve for logs, libraries and the bandwidth probes. Checked (and the soft limit raised to
// it when the hard limit allows) before anything starts: below it the check reports RESOURCE_LIMIT.
inline constexpr uint64_t kFdsReserve = 128;
uint64_t CheckFdsNeeded(size_t nodes, int fds_per_node);

agent::ClusterCheckInput RunCheckSession(const JobNodes& nodes, Launcher& launcher, const std::string& token,
                                         const CheckSessionOptions& options);

}  // namespace dsd::coordinator
