#include "coordinator/check_session.h"

#include <unistd.h>

#include <algorithm>
#include <future>
#include <numeric>
#include <optional>

#include "agent/client.h"
#include "common/log.h"
#include "common/strings.h"
#include "probe/bandwidth.h"
#include "probe/collective.h"
#include "probe/dsenv.h"

namespace dsd::coordinator {

using nlohmann::json;

probe::EnvMap CheckJobEnv() {
  probe::EnvMap env;
  for (const auto& [k, v] : probe::RealInventorySource().Environment()) {
    if (StartsWith(k, "NCCL_") || StartsWith(k, "GLOO_") || StartsWith(k, "TORCH_NCCL_")) env[k] = v;
  }
  for (const auto& [k, v] : probe::MergeDsEnv(probe::FindDsEnvFiles())) env[k] = v;
  return env;
}

namespace {

// All-reduce sweep over every reachable agent, then p2p transfers in rounds where every node sends
// once and receives once (i -> i+k); more than 16 nodes are sampled (k = 1, 2, n/2).
// MPI_Allreduce when mpirun started every agent (MPI_COMM_WORLD must be complete), else Gloo.
void RunBandwidth(const CheckSessionOptions& o, const std::vector<size_t>& sizes, const std::string& token,
                  bool use_mpi, std::vector<std::optional<agent::AgentClient>>& clients,
                  agent::ClusterCheckInput& input) {
  auto log = log::Get("check");
  agent::BandwidthInput& bw = input.bandwidth;
  std::vector<size_t> idx;
  for (size_t i = 0; i < clients.size(); ++i) {
    if (clients[i]) idx.push_back(i);
  }
  if (idx.size() < 2) {
    bw.skipped = "fewer than two reachable agents";
    return;
  }
  for (size_t i : idx) {
    for (const auto& p : input.nodes[i].pings.value("results", json::array())) {
      if (p.value("kind", "") == "agent" && p.value("outcome", "") != "ok") {
        bw.skipped = "connectivity failures between nodes (see above)";
        return;
      }
    }
  }
  bw.ran = true;
  // NCCL on device buffers when every node has GPUs (one rank per GPU), else MPI under mpirun, else Gloo.
  std::vector<int> gpus;
  for (size_t i : idx) {
    const json& inv = input.nodes[i].report.value("inventory", json::object());
    int n = inv.value("cuda", json::object()).value("device_count", 0);
    int slots = input.nodes[i].slots;
    gpus.push_back(std::min(n, slots));
  }
  bool all_gpus = std::all_of(gpus.begin(), gpus.end(), [](int g) { return g > 0; });
  bw.backend = all_gpus ? "nccl" : use_mpi && idx.size() == clients.size() ? "mpi" : "gloo";
  bw.ranks = all_gpus ? std::accumulate(gpus.begin(), gpus.end(), 0) : static_cast<int>(idx.size());
  bw.min_busbw_gbps = o.min_busbw;
  bw.min_p2p_gbit_s = o.min_p2p_gbit;
  const auto long_call = std::chrono::seconds(900);
  std::string run = token.substr(0, 8) + std::to_string(::getpid());
  const auto& master = input.nodes[idx[0]];
  std::vector<json> replies(idx.size());
  std::vector<std::string> errors(idx.size());
  {
    std::vector<std::future<void>> work;
    for (size_t r = 0; r < idx.size(); ++r) {
      work.push_back(std::async(std::launch::async, [&, r] {
        json request = {{"type", "allreduce"},
                        {"backend", bw.backend},
                        {"rank", r},
                        {"size", bw.ranks},
                        {"store", {{"host", master.address}, {"port", master.agent_port}}},
                        {"run", run},
                        {"sizes", sizes},
                        {"timeout_ms", 60000}};
        if (bw.backend == "nccl") {
          request["first_rank"] = std::accumulate(gpus.begin(), gpus.begin() + static_cast<long>(r), 0);
          request["gpus"] = gpus[r];
        }
        auto reply = clients[idx[r]]->Call(request, long_call);
        if (reply.ok())
          replies[r] = *reply;
        else
          errors[r] = input.nodes[idx[r]].name + ": " + reply.status().message();
      }));
    }
    for (auto& w : work) w.get();
  }
  std::vector<std::vector<probe::RankSizeResult>> per_rank;
  for (size_t r = 0; r < idx.size(); ++r) {
    if (!errors[r].empty()) {
      bw.allreduce_error += (bw.allreduce_error.empty() ? "" : "; ") + errors[r];
      continue;
    }
    // One list of results per rank: an NCCL reply carries one per local GPU.
    json lists = json::array();
    if (replies[r].contains("ranks")) {
      for (const auto& g : replies[r]["ranks"]) lists.push_back(g.value("results", json::array()));
    } else {
      lists.push_back(replies[r].value("results", json::array()));
    }
    for (const auto& list : lists) {
      std::vector<probe::RankSizeResult> rows;
      for (const auto& row : list) {
        rows.push_back({row.value("bytes", size_t{0}), row.value("time_us", 0.0), row.value("wrong", 0L)});
      }
      per_rank.push_back(rows);
    }
  }
  if (bw.allreduce_error.empty()) bw.allreduce = probe::CombineRanks(per_rank, bw.ranks);
  log->debug("all-reduce sweep done: {} sizes, error '{}'", bw.allreduce.size(), bw.allreduce_error);

  size_t n = idx.size();
  std::vector<size_t> shifts;
  for (size_t k = 1; k < n; ++k) shifts.push_back(k);
  if (n > 16) shifts = {1, 2, n / 2};
  for (size_t k : shifts) {
    std::vector<agent::P2pResult> round(n);
    std::vector<std::future<void>> work;
    for (size_t a = 0; a < n; ++a) {
      const auto& from = input.nodes[idx[a]];
      const auto& to = input.nodes[idx[(a + k) % n]];
      round[a].from = from.name;
      round[a].to = to.name;
      work.push_back(std::async(std::launch::async, [&, a] {
        auto reply = clients[idx[a]]->Call({{"type", "p2p_send"},
                                            {"target", {{"host", to.address}, {"port", to.agent_port}}},
                                            {"seconds", o.p2p_seconds}},
                                           long_call);
        if (!reply.ok()) {
          round[a].error = reply.status().message();
          return;
        }
        round[a].gbit_s = reply->value("gbit_s", 0.0);
        round[a].bytes = reply->value("bytes", uint64_t{0});
        round[a].seconds = reply->value("seconds", 0.0);
      }));
    }
    for (auto& w : work) w.get();
    bw.p2p.insert(bw.p2p.end(), round.begin(), round.end());
  }
}

}  // namespace

agent::ClusterCheckInput RunCheckSession(const JobNodes& nodes, Launcher& launcher, const std::string& token,
                                         const CheckSessionOptions& o) {
  auto log = log::Get("check");
  auto handles = launcher.Start(nodes.nodes, token);
  const auto timeout = std::chrono::milliseconds(std::max(o.connect_timeout_ms, 100));
  const auto call_timeout = std::chrono::seconds(60);

  agent::ClusterCheckInput input;
  input.master_port = o.master_port;
  input.simulated = launcher.simulated();
  input.connect_timeout_ms = o.connect_timeout_ms;
  input.plan_source = nodes.source;
  input.plan_notes = nodes.notes;
  std::vector<std::optional<agent::AgentClient>> clients(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) {
    agent::NodeProbe p;
    p.name = handles[i].name;
    p.address = handles[i].endpoint.host;
    p.agent_port = handles[i].endpoint.port;
    p.slots = static_cast<int>(nodes.nodes[i].slots.size());
    p.error = handles[i].error;
    input.nodes.push_back(p);
  }
  // Connect and collect inventories in parallel.
  const probe::EnvMap& job_env = o.job_env;
  {
    std::vector<std::future<void>> work;
    for (size_t i = 0; i < handles.size(); ++i) {
      if (!input.nodes[i].error.empty()) continue;
      work.push_back(std::async(std::launch::async, [&, i] {
        auto c = agent::AgentClient::Connect(handles[i].endpoint, token, timeout);
        if (!c.ok()) {
          input.nodes[i].error = c.status().message();
          return;
        }
        auto inv = c->Call({{"type", "inventory"}, {"job_env", job_env}}, call_timeout);
        if (!inv.ok()) {
          input.nodes[i].error = inv.status().message();
          return;
        }
        input.nodes[i].report = (*inv)["report"];
        clients[i].emplace(std::move(c).value());
      }));
    }
    for (auto& w : work) w.get();
  }
  // The master node's agent opens the rendezvous port, as rank 0's store would.
  if (clients[0]) {
    auto l = clients[0]->Call({{"type", "listen"}, {"port", o.master_port}}, call_timeout);
    if (!l.ok())
      log->warn("master {} could not listen on {}: {}", input.nodes[0].name, o.master_port, l.status().message());
  }
  // Full mesh, every agent at once: the whole phase is bounded by one connect timeout. Every
  // reply also lists the ports its agent listens on (the master's rendezvous port included), which
  // tells a REJECT rule from a missing listener.
  {
    std::vector<std::future<void>> work;
    for (size_t i = 0; i < handles.size(); ++i) {
      if (!clients[i]) continue;
      json targets = json::array();
      for (size_t j = 0; j < handles.size(); ++j) {
        if (i == j || !input.nodes[j].error.empty()) continue;
        targets.push_back({{"name", input.nodes[j].name},
                           {"host", input.nodes[j].address},
                           {"port", input.nodes[j].agent_port},
                           {"kind", "agent"}});
      }
      if (i != 0 && input.nodes[0].error.empty()) {
        targets.push_back({{"name", input.nodes[0].name},
                           {"host", input.nodes[0].address},
                           {"port", o.master_port},
                           {"kind", "rendezvous"}});
      }
      work.push_back(std::async(std::launch::async, [&, i, targets] {
        auto r = clients[i]->Call({{"type", "ping"}, {"targets", targets}, {"timeout_ms", o.connect_timeout_ms}},
                                  call_timeout);
        if (r.ok())
          input.nodes[i].pings = *r;
        else
          log->warn("ping from {}: {}", input.nodes[i].name, r.status().message());
      }));
    }
    for (auto& w : work) w.get();
  }
  if (!o.bandwidth) {
    input.bandwidth.skipped = "--no-bandwidth";
  } else {
    RunBandwidth(o, o.sizes, token, o.use_mpi, clients, input);
  }
  for (auto& c : clients) {
    if (c && o.shutdown_agents) (void)c->Call({{"type", "shutdown"}}, std::chrono::seconds(2));
  }
  clients.clear();
  launcher.Stop();
  return input;
}

}  // namespace dsd::coordinator
