#include "coordinator/takeover.h"

#include <unistd.h>

#include <cerrno>

#include "agent/json_fields.h"
#include "common/file.h"

namespace dsd::coordinator {

using nlohmann::json;

Takeover TakeoverOf(const RunSpec& spec, const std::vector<std::string>& agent_names,
                    const std::vector<net::Endpoint>& endpoints) {
  Takeover t;
  t.run_id = spec.run_id;
  t.command = spec.command;
  t.python = spec.python;
  t.mpi = spec.mpi;
  t.launcher = spec.launcher;
  t.simulated = spec.simulated;
  t.timeout_s = spec.timeout_s;
  t.hang_after_s = spec.hang_after_s;
  t.sample_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(spec.sample_period).count());
  t.stop_escalation_ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(spec.stop_escalation).count());
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  t.coordinator_host = host;
  t.coordinator_pid = static_cast<int>(::getpid());
  for (size_t i = 0; i < spec.nodes.nodes.size() && i < endpoints.size(); ++i) {
    TakeoverNode n{
        i < agent_names.size() ? agent_names[i] : spec.nodes.nodes[i].host, spec.nodes.nodes[i].host, endpoints[i], {}};
    for (const auto& l : spec.NodeRanks(i)) n.ranks.emplace_back(l.rank, l.local_rank);
    t.nodes.push_back(std::move(n));
  }
  return t;
}

json TakeoverJson(const Takeover& t) {
  json nodes = json::array();
  for (const auto& n : t.nodes) {
    json ranks = json::array();
    for (const auto& [rank, local] : n.ranks) ranks.push_back({{"rank", rank}, {"local_rank", local}});
    nodes.push_back({{"name", n.name},
                     {"host", n.host},
                     {"agent", {{"host", n.endpoint.host}, {"port", n.endpoint.port}}},
                     {"ranks", std::move(ranks)}});
  }
  return {{"version", 1},
          {"run_id", t.run_id},
          {"command", t.command},
          {"python", t.python},
          {"mpi", t.mpi},
          {"launcher", t.launcher},
          {"simulated", t.simulated},
          {"timeout_s", t.timeout_s},
          {"hang_after_s", t.hang_after_s},
          {"sample_ms", t.sample_ms},
          {"stop_escalation_ms", t.stop_escalation_ms},
          {"coordinator", {{"host", t.coordinator_host}, {"pid", t.coordinator_pid}}},
          {"nodes", std::move(nodes)}};
}

Result<Takeover> ParseTakeover(const std::string& text, const std::string& path) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(path + ": not JSON");
  using agent::fields::Fields;
  Fields f(j, path);
  f.Int("version", 1, 1, true)
      .String("run_id", 256, true)
      .StringList("command", 100000, agent::fields::kMaxValue, true, /*non_empty=*/true)
      .Bool("python")
      .Bool("mpi")
      .String("launcher", 64)
      .Bool("simulated")
      .Number("timeout_s", 0, 1e9)
      .Number("hang_after_s", 0, 1e9)
      .Int("sample_ms", 1, 60000)
      .Int("stop_escalation_ms", 0, 3600 * 1000)
      .Objects("nodes", 1 << 20, true, [](Fields& n) {
        n.String("name", agent::fields::kMaxName, true)
            .String("host", agent::fields::kMaxName, true)
            .Endpoint("agent", true)
            .Objects("ranks", 65536, true,
                     [](Fields& r) { r.Int("rank", 0, (1 << 20) - 1, true).Int("local_rank", 0, 65535, true); });
      });
  DSD_RETURN_IF_ERROR(f.status());
  Takeover t;
  t.run_id = j.at("run_id").get<std::string>();
  if (t.run_id.empty()) return InvalidArgument(path + ": field 'run_id' is empty");
  t.command = j.at("command").get<std::vector<std::string>>();
  t.python = j.value("python", false);
  t.mpi = j.value("mpi", false);
  t.launcher = j.value("launcher", std::string());
  t.simulated = j.value("simulated", false);
  t.timeout_s = j.value("timeout_s", 60.0);
  t.hang_after_s = j.value("hang_after_s", 5.0);
  t.sample_ms = j.value("sample_ms", 200);
  t.stop_escalation_ms = j.value("stop_escalation_ms", 3000);
  if (auto c = j.find("coordinator"); c != j.end()) {
    Fields cf(*c, path + ".coordinator");
    DSD_RETURN_IF_ERROR(cf.String("host", agent::fields::kMaxName).Int("pid", 0, 1 << 30).status());
    t.coordinator_host = c->value("host", std::string());
    t.coordinator_pid = c->value("pid", 0);
  }
  std::vector<bool> seen;
  for (const auto& n : j.at("nodes")) {
    TakeoverNode node{n.at("name").get<std::string>(),
                      n.at("host").get<std::string>(),
                      {n.at("agent").at("host").get<std::string>(), n.at("agent").at("port").get<int>()},
                      {}};
    for (const auto& r : n.at("ranks")) {
      const int rank = r.at("rank").get<int>();
      if (rank >= static_cast<int>(seen.size())) seen.resize(rank + 1);
      if (seen[rank]) return InvalidArgument(path + ": rank " + std::to_string(rank) + " is on two nodes");
      seen[rank] = true;
      node.ranks.emplace_back(rank, r.at("local_rank").get<int>());
    }
    t.nodes.push_back(std::move(node));
  }
  for (size_t r = 0; r < seen.size(); ++r)
    if (!seen[r]) return InvalidArgument(path + ": rank " + std::to_string(r) + " is on no node");
  if (seen.empty()) return InvalidArgument(path + ": no ranks");
  return t;
}

Result<Takeover> ReadTakeover(const RunDir& dir) {
  auto text = ReadFile(dir.Agents(), 256u << 20);
  if (!text.ok()) {
    if (!FileExists(dir.Agents()))
      return NotFound(dir.Agents() + " does not exist: the run had no agents to take over (run --direct), or " +
                      dir.path() + " is not a run dir");
    return text.status();
  }
  return ParseTakeover(*text, dir.Agents());
}

RunSpec SpecOfTakeover(const Takeover& t, const RunDir& dir) {
  RunSpec s;
  s.launcher = t.launcher;
  s.simulated = t.simulated;
  s.command = t.command;
  s.python = t.python;
  s.mpi = t.mpi;
  s.run_dir = dir;
  s.run_id = t.run_id;
  s.timeout_s = t.timeout_s;
  s.hang_after_s = t.hang_after_s;
  s.sample_period = std::chrono::milliseconds(t.sample_ms);
  s.stop_escalation = std::chrono::milliseconds(t.stop_escalation_ms);
  s.nodes.source = dir.Agents();
  s.nodes.simulated = t.simulated;
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    NodePlan plan{t.nodes[i].host, {}};
    for (const auto& [rank, local] : t.nodes[i].ranks) {
      plan.slots.push_back(local);
      s.ranks.ranks.push_back({rank, local, static_cast<int>(i), t.nodes[i].host});
    }
    s.nodes.nodes.push_back(std::move(plan));
  }
  std::sort(s.ranks.ranks.begin(), s.ranks.ranks.end(),
            [](const RankLaunch& a, const RankLaunch& b) { return a.rank < b.rank; });
  return s;
}

}  // namespace dsd::coordinator
