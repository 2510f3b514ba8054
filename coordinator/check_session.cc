#include "coordinator/check_session.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "agent/client.h"
#include "agent/ping.h"
#include "common/log.h"
#include "common/process.h"
#include "common/strings.h"
#include "probe/bandwidth.h"
#include "probe/collective.h"
#include "probe/dsenv.h"
#include "probe/gloo_comm.h"

namespace dsd::coordinator {

using nlohmann::json;

uint64_t CheckFdsNeeded(size_t nodes, int fds_per_node) {
  return static_cast<uint64_t>(fds_per_node) * nodes + kFdsReserve;
}

namespace {

// Threads that connect to agents at once (TLS handshakes): enough to hide a WAN round trip, few
// enough for any ulimit -u.
constexpr size_t kConnectThreads = 32;
// New connects in flight per agent during the mesh probe (net::ProbeMany): 16 measured fastest for
// 250 nodes on 2 cores (64: +25 % wall), and 16 per ms of round trip is ample on a real network.
constexpr int kProbesInFlight = 16;

std::vector<agent::AgentClient*> Callees(std::vector<std::optional<agent::AgentClient>>& clients) {
  std::vector<agent::AgentClient*> out;
  for (auto& c : clients) out.push_back(c ? &*c : nullptr);
  return out;
}

// Full mesh and the rendezvous port. Every agent gets one table of targets (the reachable agents,
// then the master's rendezvous port) and starts probing just past its own entry, so the SYNs
// spread over the listeners. The whole phase takes about two connect timeouts at worst (a timed
// out probe is tried once more). Replies also list the ports each agent listens on (the master's
// rendezvous port included), which tells a REJECT rule from a missing listener.
void ProbeConnectivity(const CheckSessionOptions& o, std::vector<std::optional<agent::AgentClient>>& clients,
                       agent::ClusterCheckInput& input, Duration call_timeout) {
  auto log = log::Get("check");
  const size_t n = input.nodes.size();
  input.agent_mesh.Resize(n, n);
  input.rendezvous.Resize(n, 1);
  std::vector<size_t> node_of;  // target index → node
  json table = json::array();
  std::vector<size_t> entry_of(n, SIZE_MAX);
  for (size_t j = 0; j < n; ++j) {
    if (!clients[j]) continue;
    entry_of[j] = node_of.size();
    node_of.push_back(j);
    table.push_back(json::array({input.nodes[j].address, input.nodes[j].agent_port}));
  }
  const size_t agents = node_of.size();
  const bool master_up = clients[0].has_value();
  if (master_up) table.push_back(json::array({input.nodes[0].address, o.master_port}));
  const std::string table_text = table.dump();
  table = json();
  const size_t entries = agents + (master_up ? 1 : 0);
  std::vector<bool> retried(entries, false);
  auto on_reply = [&](size_t i, Result<json> r) {
    auto reply = r.ok() ? agent::ParsePingReply(*r, entries) : Result<agent::PingReply>(r.status());
    if (!reply.ok()) {
      input.nodes[i].ping_error = reply.status().message();
      log->warn("ping from {}: {}", input.nodes[i].name, input.nodes[i].ping_error);
      return;
    }
    std::fill(retried.begin(), retried.end(), false);
    for (size_t e : reply->retried) retried[e] = true;
    std::unordered_map<size_t, std::string> errors(reply->errors.begin(), reply->errors.end());
    for (size_t e = 0; e < entries; ++e) {
      auto outcome = agent::OutcomeFromLetter(reply->outcomes[e]);
      if (!outcome) continue;  // not probed
      std::string error;
      if (*outcome != net::ConnectOutcome::kOk) {
        auto it = errors.find(e);
        if (it != errors.end()) error = std::move(it->second);
      }
      double ms = reply->latency_us[e] / 1000.0;
      if (e < agents)
        input.agent_mesh.Set(i, node_of[e], *outcome, ms, retried[e], std::move(error));
      else
        input.rendezvous.Set(i, 0, *outcome, ms, retried[e], std::move(error));
    }
    input.nodes[i].listening = std::move(reply->listening);
    input.nodes[i].neigh_table_fulls = reply->neigh_table_fulls;
    input.nodes[i].neigh_gc_thresh3 = reply->neigh_gc_thresh3;
  };
  agent::CallEach(
      Callees(clients),
      [&](size_t i, int id) {
        std::vector<size_t> skip = {entry_of[i]};
        if (i == 0 && master_up) skip.push_back(agents);
        // Past the matrix's size no ok pair's latency is shown: the agents leave them out.
        return agent::PingRequestText(id, table_text, (entry_of[i] + 1) % entries, skip, o.connect_timeout_ms,
                                      kProbesInFlight, agents <= agent::kMatrixMaxNodes);
      },
      call_timeout + 2 * std::chrono::milliseconds(o.connect_timeout_ms), on_reply);
}

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
    for (size_t j : idx) {
      if (input.agent_mesh.known(i, j) && input.agent_mesh.outcome(i, j) != net::ConnectOutcome::kOk) {
        bw.skipped = "connectivity failures between nodes (see above)";
        return;
      }
    }
  }
  bw.ran = true;
  // NCCL on device buffers when every node has GPUs (one rank per GPU), else MPI under mpirun, else Gloo.
  std::vector<int> gpus;
  for (size_t i : idx) {
    gpus.push_back(std::min(agent::ReportedGpus(input.nodes[i]), input.nodes[i].slots));
  }
  bool all_gpus = std::all_of(gpus.begin(), gpus.end(), [](int g) { return g > 0; });
  if (all_gpus) {
    if (std::string shared = agent::SharedGpu(input.nodes, idx, gpus); !shared.empty()) {
      all_gpus = false;
      bw.note = "NCCL not used: " + shared + " (NCCL needs a GPU of its own for every rank)";
    }
  }
  bw.backend = all_gpus ? "nccl" : use_mpi && idx.size() == clients.size() ? "mpi" : "gloo";
  bw.ranks = all_gpus ? std::accumulate(gpus.begin(), gpus.end(), 0) : static_cast<int>(idx.size());
  if (!bw.note.empty()) bw.note += "; measured with " + bw.backend + " on the CPU instead";
  bw.min_busbw_gbps = o.min_busbw;
  bw.min_p2p_gbit_s = o.min_p2p_gbit;
  const auto long_call = std::chrono::seconds(900);
  std::string run = token.substr(0, 8) + std::to_string(::getpid());
  const auto& master = input.nodes[idx[0]];
  // Gloo ranks busy-poll where each has a core of its own (a dedicated node does; --local agents
  // sharing a machine's cores do not).
  std::vector<probe::RankHost> hosts;
  for (size_t i : idx) hosts.push_back({agent::ReportedHostname(input.nodes[i]), agent::ReportedCpus(input.nodes[i])});
  const std::vector<bool> busy_poll = probe::GlooBusyPollPerRank(hosts);
  std::vector<json> replies(idx.size());
  std::vector<std::string> errors(idx.size());
  {
    std::vector<agent::AgentClient*> callees;
    for (size_t i : idx) callees.push_back(&*clients[i]);
    auto results = agent::CallAll(
        callees,
        [&](size_t r, int id) {
          json request = {
              {"id", id},   {"type", "allreduce"}, {"backend", bw.backend},
              {"rank", r},  {"size", bw.ranks},    {"store", {{"host", master.address}, {"port", master.agent_port}}},
              {"run", run}, {"sizes", sizes},      {"timeout_ms", 60000}};
          if (bw.backend == "gloo") request["busy_poll"] = busy_poll[r];
          if (bw.backend == "nccl") {
            request["first_rank"] = std::accumulate(gpus.begin(), gpus.begin() + static_cast<long>(r), 0);
            request["gpus"] = gpus[r];
          }
          return request.dump();
        },
        long_call);
    for (size_t r = 0; r < idx.size(); ++r) {
      if (results[r].ok())
        replies[r] = std::move(results[r]).value();
      else
        errors[r] = input.nodes[idx[r]].name + ": " + results[r].status().message();
    }
  }
  std::vector<std::vector<probe::RankSizeResult>> per_rank;
  std::map<std::string, int> modes;  // how the ranks moved data, and how many ranks did so
  for (size_t r = 0; r < idx.size(); ++r) {
    if (!errors[r].empty()) {
      bw.allreduce_error += (bw.allreduce_error.empty() ? "" : "; ") + errors[r];
      continue;
    }
    if (auto mode = replies[r].value("mode", std::string()); !mode.empty()) ++modes[mode];
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
  for (const auto& [mode, ranks] : modes) {
    if (!bw.mode.empty()) bw.mode += "; ";
    bw.mode += modes.size() == 1 ? mode : mode + " on " + std::to_string(ranks) + " ranks";
  }
  if (bw.allreduce_error.empty()) bw.allreduce = probe::CombineRanks(per_rank, bw.ranks);
  log->debug("all-reduce sweep done: {} sizes, error '{}'", bw.allreduce.size(), bw.allreduce_error);

  size_t n = idx.size();
  std::vector<size_t> shifts;
  for (size_t k = 1; k < n; ++k) shifts.push_back(k);
  if (n > 16) shifts = {1, 2, n / 2};
  for (size_t k : shifts) {
    std::vector<agent::P2pResult> round(n);
    std::vector<agent::AgentClient*> callees;
    for (size_t a = 0; a < n; ++a) {
      round[a].from = input.nodes[idx[a]].name;
      round[a].to = input.nodes[idx[(a + k) % n]].name;
      callees.push_back(&*clients[idx[a]]);
    }
    auto results = agent::CallAll(
        callees,
        [&](size_t a, int id) {
          const auto& to = input.nodes[idx[(a + k) % n]];
          return json{{"id", id},
                      {"type", "p2p_send"},
                      {"target", {{"host", to.address}, {"port", to.agent_port}}},
                      {"seconds", o.p2p_seconds}}
              .dump();
        },
        long_call);
    for (size_t a = 0; a < n; ++a) {
      if (!results[a].ok()) {
        round[a].error = results[a].status().message();
        continue;
      }
      const json& reply = *results[a];
      round[a].gbit_s = reply.value("gbit_s", 0.0);
      round[a].bytes = reply.value("bytes", uint64_t{0});
      round[a].seconds = reply.value("seconds", 0.0);
    }
    bw.p2p.insert(bw.p2p.end(), round.begin(), round.end());
  }
}

}  // namespace

agent::ClusterCheckInput RunCheckSession(const JobNodes& nodes, Launcher& launcher, const std::string& token,
                                         const CheckSessionOptions& o) {
  auto log = log::Get("check");
  agent::ClusterCheckInput input;
  input.master_port = o.master_port;
  input.simulated = launcher.simulated();
  input.connect_timeout_ms = o.connect_timeout_ms;
  input.plan_source = nodes.source;
  input.plan_notes = nodes.notes;
  // Checked before anything starts: past the limit, connects fail one by one and healthy nodes
  // would be blamed as unreachable.
  const uint64_t fds_needed = CheckFdsNeeded(nodes.nodes.size(), launcher.fds_per_node());
  FdLimit limit = RaiseFdLimit(fds_needed);
  if (limit.soft < fds_needed) {
    input.resource_error = "it needs about " + std::to_string(fds_needed) + " open files (" +
                           std::to_string(launcher.fds_per_node()) + " per node and " + std::to_string(kFdsReserve) +
                           " more) but ulimit -n is " + std::to_string(limit.soft) + " (hard limit " +
                           std::to_string(limit.hard) + ")";
    for (const auto& n : nodes.nodes) {
      agent::NodeProbe p;
      p.name = n.host;
      p.slots = static_cast<int>(n.slots.size());
      p.error = "not started";
      input.nodes.push_back(p);
    }
    log->error("check: {}", input.resource_error);
    return input;
  }
  log->debug("open-file limit {} (hard {}) for {} nodes", limit.soft, limit.hard, nodes.nodes.size());
  auto handles = launcher.Start(nodes.nodes, token);
  const auto timeout = std::chrono::milliseconds(std::max(o.connect_timeout_ms, 100));
  const auto call_timeout = std::chrono::seconds(60);

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
  // Connect with bounded concurrency (each connect is a TLS handshake), then every phase is one
  // request per agent with the replies collected in one poll loop: no thread per node.
  const probe::EnvMap& job_env = o.job_env;
  agent::ParallelFor(handles.size(), kConnectThreads, [&](size_t i) {
    if (!input.nodes[i].error.empty()) return;
    auto c = agent::AgentClient::Connect(handles[i].endpoint, token, timeout);
    if (!c.ok()) {
      input.nodes[i].error = c.status().message();
      return;
    }
    clients[i].emplace(std::move(c).value());
  });
  {
    const std::string tail =
        ",\"type\":\"inventory\",\"job_env\":" + json(job_env).dump(-1, ' ', false, json::error_handler_t::replace) +
        "}";
    agent::CallEach(
        Callees(clients), [&](size_t, int id) { return "{\"id\":" + std::to_string(id) + tail; }, call_timeout,
        [&](size_t i, Result<json> reply) {
          if (reply.ok()) {
            input.nodes[i].report = std::move((*reply)["report"]);
            agent::CompactReport(input.nodes[i]);
          } else {
            input.nodes[i].error = reply.status().message();
          }
        });
    for (size_t i = 0; i < clients.size(); ++i) {
      if (clients[i] && !input.nodes[i].error.empty()) clients[i].reset();
    }
  }
  log->debug("inventories collected");
  // The master node's agent opens the rendezvous port, as rank 0's store would.
  if (clients[0]) {
    auto l = clients[0]->Call({{"type", "listen"}, {"port", o.master_port}}, call_timeout);
    if (!l.ok())
      log->warn("master {} could not listen on {}: {}", input.nodes[0].name, o.master_port, l.status().message());
  }
  ProbeConnectivity(o, clients, input, call_timeout);
  log->debug("connect probes done");
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
  // Thousands of links' TLS state was just freed, in between long-lived allocations: hand the
  // pages back before the reports are built on top (glibc keeps them otherwise).
  ::malloc_trim(0);
  return input;
}

}  // namespace dsd::coordinator
