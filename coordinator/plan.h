// Which nodes a job runs on and which rank each of their slots becomes: the plan shared by `check`
// and `run`, and what `check --plan` / `run --dry-run` print (docs/run.md "Nodes and slots").
// Pure functions over plain values (the only effect: reading the hostfile); thread-safe.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/hostfile.h"
#include "coordinator/slurm.h"

namespace dsd::coordinator {

struct NodeSourceOptions {
  std::string hostfile;              // "": /job/hostfile when it exists, else attach's agents, else this node
  int local = 0;                     // --local N: N simulated nodes node-0, node-1, … on this machine
  int local_slots = 1;               // slots of each simulated node
  size_t attach_agents = 0;          // --agents lists this many endpoints (nodes node-<i> without a hostfile)
  std::string this_node = "node-0";  // the node's name when no other source is given
  int this_node_slots = 1;
  // The Slurm allocation we run in (SLURM_JOB_ID): its nodes, when no hostfile, --local or --agents
  // names others; each node's slots are its SLURM_TASKS_PER_NODE, else this_node_slots (--slots).
  std::optional<SlurmAllocation> slurm;
  PlanOptions filters;
};

struct JobNodes {
  std::string source;      // the hostfile's path, "--local N", "--agents" or "(this node)"
  bool simulated = false;  // every node on this machine (--local, or this node alone)
  std::vector<NodePlan> nodes;
  std::vector<std::string> notes;  // where deepspeed would do something surprising (hostfile.h)
  bool slurm = false;              // the nodes of the Slurm allocation we run in
  int world_size() const;
};

// Errors name the hostfile's path:line or the flag; --local with --hostfile is an error.
Result<JobNodes> PlanJobNodes(const NodeSourceOptions& options);

// One rank: where it runs. Its environment is RankPlan::RankEnv's (DeepSpeed's launch.py and
// DESIGN.md: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_SIZE, CROSS_RANK, CROSS_SIZE, MASTER_ADDR,
// MASTER_PORT, CUDA_VISIBLE_DEVICES = the node's slot ids, DSDOCTOR_NODE).
struct RankLaunch {
  int rank = 0;
  int local_rank = 0;
  int node_index = 0;
  std::string node;
};

// The plan keeps what is the same for a node's ranks once per node, so its size is linear in the
// slots planned (a rank's copy of CUDA_VISIBLE_DEVICES, as long as the node's slot list, made it
// nodes x slots^2: 24 GB for 1,000 hosts of 4,096 slots).
struct RankPlan {
  std::string master_addr;
  int master_port = 0;            // 0: a free port picked when the job starts (simulated nodes)
  std::vector<RankLaunch> ranks;  // by global rank, node after node
  std::vector<std::map<std::string, std::string>> node_env;  // by node index: its ranks' shared variables

  // The variables of a rank that differ from its node's: RANK and LOCAL_RANK.
  static std::map<std::string, std::string> OwnEnv(const RankLaunch& l);
  // Every variable the plan gives a rank: its node's and its own.
  std::map<std::string, std::string> RankEnv(const RankLaunch& l) const;
};

// node_names: what each node is called in reports (the agents' names); empty: the plan's hosts.
RankPlan PlanRanks(const JobNodes& nodes, const std::vector<std::string>& node_names, const std::string& master_addr,
                   int master_port);

// The plan as `check --plan` and `run --dry-run` print it (docs/run.md "Plan").
nlohmann::json PlanJson(const JobNodes& nodes, const RankPlan& ranks, const std::string& launcher);
std::string PlanText(const JobNodes& nodes, const RankPlan& ranks, const std::string& launcher);

}  // namespace dsd::coordinator
