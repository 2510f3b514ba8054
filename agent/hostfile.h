// Hostfiles (DeepSpeed/OpenMPI format) and the resource filters of DeepSpeed's launcher.
//
//   # comment
//   worker-1 slots=4
//   worker-2 slots=4   # trailing comment
//
// Pure parsing over text; plain values; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace dsd::agent {

struct HostEntry {
  std::string host;
  int slots = 1;
  int line = 0;
};

struct Hostfile {
  std::string path;
  std::vector<HostEntry> hosts;
  std::vector<std::string> warnings;  // "hostfile:3: ..." for things DeepSpeed silently ignores
};

// Errors name path:line: malformed lines, bad slot counts, duplicate hosts (with the first line).
Result<Hostfile> ParseHostfile(const std::string& path, const std::string& content);
Result<Hostfile> LoadHostfile(const std::string& path);

// One node of the job: the slots (local ranks / GPUs) it runs, in order.
struct NodePlan {
  std::string host;
  std::vector<int> slots;
};

struct PlanOptions {
  std::string include;  // "host[:slot,slot][@host…]"; mutually exclusive with exclude
  std::string exclude;
  int num_nodes = -1;   // first N nodes; -1 = all
  int num_gpus = -1;    // first N slots of each node; -1 = all
};

// Applies filters in DeepSpeed's order (include/exclude, then num_nodes, then num_gpus).
// Unknown hosts or slots, both filters at once, and counts out of range are errors.
Result<std::vector<NodePlan>> PlanNodes(const Hostfile& hostfile, const PlanOptions& options);

// Which hostfile to use when none is given: /job/hostfile if it exists, else none (this node
// alone), as DeepSpeed does.
std::optional<std::string> DefaultHostfilePath(const std::string& job_hostfile = "/job/hostfile");

}  // namespace dsd::agent
