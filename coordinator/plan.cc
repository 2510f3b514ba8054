#include "coordinator/plan.h"

#include <sstream>

#include "common/strings.h"

namespace dsd::coordinator {
namespace {

std::string RankRange(int first, int count) {
  if (count == 0) return "-";
  return count == 1 ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(first + count - 1);
}

}  // namespace

int JobNodes::world_size() const {
  int n = 0;
  for (const auto& node : nodes) n += static_cast<int>(node.slots.size());
  return n;
}

Result<JobNodes> PlanJobNodes(const NodeSourceOptions& o) {
  Hostfile hf;
  JobNodes out;
  if (o.local > 0) {
    if (!o.hostfile.empty()) return InvalidArgument("--local and --hostfile are mutually exclusive");
    hf.path = "--local " + std::to_string(o.local);
    for (int i = 0; i < o.local; ++i) hf.hosts.push_back({"node-" + std::to_string(i), o.local_slots, 0});
    out.simulated = true;
  } else if (!o.hostfile.empty() || DefaultHostfilePath()) {
    DSD_ASSIGN_OR_RETURN(hf, LoadHostfile(o.hostfile.empty() ? *DefaultHostfilePath() : o.hostfile));
  } else if (o.slurm && o.attach_agents == 0) {
    hf.path = "Slurm job " + o.slurm->job_id;
    const int gpus = o.slurm->gpus_per_node;
    bool per_gpu = false;
    for (size_t i = 0; i < o.slurm->hosts.size(); ++i) {
      const bool tasks_known = i < o.slurm->tasks_per_node.size();
      int slots = tasks_known ? o.slurm->tasks_per_node[i] : gpus > 0 ? gpus : o.this_node_slots;
      // One task per node with several GPUs is the torchrun/deepspeed way (the launcher starts a
      // rank per GPU); several tasks per node are srun's (a rank per task).
      if (tasks_known && slots == 1 && gpus > 1) slots = gpus, per_gpu = true;
      hf.hosts.push_back({o.slurm->hosts[i], std::max(slots, 1), 0});
    }
    if (per_gpu) hf.path += " (1 task and " + std::to_string(gpus) + " GPUs per node: a rank per GPU)";
    out.slurm = true;
  } else if (o.attach_agents > 0) {
    hf.path = "--agents";
    for (size_t i = 0; i < o.attach_agents; ++i) hf.hosts.push_back({"node-" + std::to_string(i), 1, 0});
  } else {
    hf.path = "(this node)";
    hf.hosts.push_back({o.this_node, o.this_node_slots, 0});
    out.simulated = true;
    if (o.filters.num_nodes > 1) {
      return InvalidArgument("--num_nodes " + std::to_string(o.filters.num_nodes) +
                             " without a hostfile: only this node is known (deepspeed: \"Num nodes is >1 but no extra "
                             "nodes available via hostfile\")");
    }
  }
  DSD_ASSIGN_OR_RETURN(NodeSelection sel, PlanNodes(hf, o.filters));
  out.source = hf.path;
  out.nodes = std::move(sel.nodes);
  out.notes = std::move(sel.notes);
  return out;
}

RankPlan PlanRanks(const JobNodes& nodes, const std::vector<std::string>& node_names, const std::string& master_addr,
                   int master_port) {
  RankPlan plan{master_addr, master_port, {}, {}};
  const int world = nodes.world_size();
  const int nnodes = static_cast<int>(nodes.nodes.size());
  plan.ranks.reserve(static_cast<size_t>(world));
  plan.node_env.reserve(nodes.nodes.size());
  int rank = 0;
  for (int n = 0; n < nnodes; ++n) {
    const NodePlan& node = nodes.nodes[static_cast<size_t>(n)];
    const std::string name =
        static_cast<size_t>(n) < node_names.size() ? node_names[static_cast<size_t>(n)] : node.host;
    plan.node_env.push_back({{"WORLD_SIZE", std::to_string(world)},
                             {"LOCAL_SIZE", std::to_string(node.slots.size())},
                             {"CROSS_RANK", std::to_string(n)},
                             {"CROSS_SIZE", std::to_string(nnodes)},
                             {"MASTER_ADDR", master_addr},
                             {"MASTER_PORT", std::to_string(master_port)},
                             {"CUDA_VISIBLE_DEVICES", SlotList(node.slots)},
                             {"DSDOCTOR_NODE", name}});
    for (size_t s = 0; s < node.slots.size(); ++s, ++rank) plan.ranks.push_back({rank, static_cast<int>(s), n, name});
  }
  return plan;
}

std::map<std::string, std::string> RankPlan::OwnEnv(const RankLaunch& l) {
  return {{"RANK", std::to_string(l.rank)}, {"LOCAL_RANK", std::to_string(l.local_rank)}};
}

std::map<std::string, std::string> RankPlan::RankEnv(const RankLaunch& l) const {
  std::map<std::string, std::string> env;
  if (l.node_index >= 0 && static_cast<size_t>(l.node_index) < node_env.size()) env = node_env[l.node_index];
  for (auto& [k, v] : OwnEnv(l)) env[k] = std::move(v);
  return env;
}

nlohmann::json PlanJson(const JobNodes& nodes, const RankPlan& ranks, const std::string& launcher) {
  nlohmann::json j;
  j["source"] = nodes.source;
  j["launcher"] = launcher;
  j["simulated"] = nodes.simulated;
  j["world_size"] = nodes.world_size();
  j["master"] = {{"addr", ranks.master_addr}, {"port", ranks.master_port}};
  j["nodes"] = nlohmann::json::array();
  size_t r = 0;
  for (size_t n = 0; n < nodes.nodes.size(); ++n) {
    const NodePlan& node = nodes.nodes[n];
    nlohmann::json ids = nlohmann::json::array();
    std::string name = node.host;
    for (size_t s = 0; s < node.slots.size() && r < ranks.ranks.size(); ++s, ++r) {
      ids.push_back(ranks.ranks[r].rank);
      name = ranks.ranks[r].node;
    }
    j["nodes"].push_back({{"index", n},
                          {"host", node.host},
                          {"name", name},
                          {"slots", node.slots},
                          {"cuda_visible_devices", SlotList(node.slots)},
                          {"ranks", ids}});
  }
  j["notes"] = nodes.notes;
  return j;
}

std::string PlanText(const JobNodes& nodes, const RankPlan& ranks, const std::string& launcher) {
  std::ostringstream out;
  out << "Plan: " << nodes.nodes.size() << (nodes.nodes.size() == 1 ? " node, " : " nodes, ") << nodes.world_size()
      << (nodes.world_size() == 1 ? " rank" : " ranks") << " from " << nodes.source << ", launcher " << launcher
      << "\n";
  out << "  master " << (ranks.master_addr.empty() ? "(first node)" : ranks.master_addr) << ":"
      << (ranks.master_port ? std::to_string(ranks.master_port) : "(a free port at start)") << "\n";
  size_t host_w = 4;
  for (const auto& n : nodes.nodes) host_w = std::max(host_w, n.host.size());
  out << "  "
      << "node  "
      << "host" << std::string(host_w - 4 + 2, ' ') << "ranks      CUDA_VISIBLE_DEVICES\n";
  int first = 0;
  for (size_t i = 0; i < nodes.nodes.size(); ++i) {
    const NodePlan& n = nodes.nodes[i];
    std::string idx = std::to_string(i), rr = RankRange(first, static_cast<int>(n.slots.size()));
    out << "  " << idx << std::string(6 - std::min<size_t>(idx.size(), 5), ' ') << n.host
        << std::string(host_w - n.host.size() + 2, ' ') << rr << std::string(11 - std::min<size_t>(rr.size(), 10), ' ')
        << SlotList(n.slots) << "\n";
    first += static_cast<int>(n.slots.size());
  }
  for (const auto& note : nodes.notes) out << "  note: " << note << "\n";
  return out.str();
}

}  // namespace dsd::coordinator
