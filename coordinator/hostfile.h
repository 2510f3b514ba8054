// Hostfiles and the resource filters of DeepSpeed's launcher, with DeepSpeed's semantics
// (deepspeed/launcher/runner.py: _parse_hostfile, parse_inclusion_exclusion, main; checked against
// 0.19.8, docs/run.md "Nodes and slots"):
//
//   # comment (only as the first non-blank character of a line)
//   worker-1 slots=4
//   worker-2 slots=4   anything after the count is ignored
//
// A line DeepSpeed rejects is an error here too (OpenMPI would accept some of them: `HOST`
// alone, `slots = 4`, `HOST cpu slots=4`), so `check` fails where `deepspeed` would. Where
// DeepSpeed accepts something that is probably not what the user meant (trailing tokens it
// ignores, --num_gpus above a host's slots, a slot the hostfile does not declare) the plan follows
// DeepSpeed and says so in a note.
//
// Pure functions over text; plain values; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace dsd::coordinator {

// Above this a slot count is a typo (and would cost memory in every plan).
inline constexpr int kMaxSlotsPerHost = 4096;

struct HostEntry {
  std::string host;
  int slots = 1;
  int line = 0;  // 0: not from a file (--local, --agents, this node)
};

struct Hostfile {
  std::string path;
  std::vector<HostEntry> hosts;
  std::vector<std::string> notes;  // "hostfile:3: ..." where DeepSpeed silently ignores text
};

// Errors name path:line and quote DeepSpeed's own message: malformed lines, duplicate hosts (with
// the first line), slot counts of 0 or above kMaxSlotsPerHost, no host at all.
Result<Hostfile> ParseHostfile(const std::string& path, const std::string& content);
Result<Hostfile> LoadHostfile(const std::string& path);

// One node of the job: the slots (GPU ids, i.e. its CUDA_VISIBLE_DEVICES) it runs, in order.
struct NodePlan {
  std::string host;
  std::vector<int> slots;
};

struct PlanOptions {
  std::string include;  // "host[:slot,slot][@host…]"; mutually exclusive with exclude
  std::string exclude;
  int num_nodes = -1;  // the first N nodes; -1 (or 0, as in DeepSpeed) = all
  int num_gpus = -1;   // slots 0..N-1 on every node; -1 (or 0) = the hostfile's
};

struct NodeSelection {
  std::vector<NodePlan> nodes;
  std::vector<std::string> notes;  // where DeepSpeed accepts something surprising (see above)
};

// Slots 0 … n-1: a whole host, or --num_gpus n.
std::vector<int> FirstSlots(int n);
// "0,2,3": a node's slot ids as CUDA_VISIBLE_DEVICES lists them.
std::string SlotList(const std::vector<int>& slots);

// Applies the filters as DeepSpeed does (include/exclude, then num_nodes, then num_gpus).
// Errors: include with exclude, either with --num_nodes/--num_gpus (DeepSpeed refuses both), hosts
// not in the hostfile, excluded slots a host does not have, filters DeepSpeed cannot parse, and
// an empty result.
Result<NodeSelection> PlanNodes(const Hostfile& hostfile, const PlanOptions& options);

// Which hostfile to use when none is given: /job/hostfile if it exists, else none (this node
// alone), as DeepSpeed does.
std::optional<std::string> DefaultHostfilePath(const std::string& job_hostfile = "/job/hostfile");

}  // namespace dsd::coordinator
