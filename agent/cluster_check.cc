#include "agent/cluster_check.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "common/log.h"
#include "common/strings.h"
#include "probe/bandwidth.h"

namespace dsd::agent {

using diagnosis::Finding;
using diagnosis::Severity;
using nlohmann::json;
using probe::CheckRow;
using probe::CheckStatus;
namespace codes = diagnosis::codes;

namespace {

std::string Str(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// Agents' documents are untrusted input: a missing or mistyped field reads as empty, never throws.
const json& Field(const json& j, const char* key) {
  static const json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}
const json& Arr(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const json& v = Field(j, key);
  return v.is_array() ? v : kEmpty;
}
bool Bool(const json& j, const char* key) {
  const json& v = Field(j, key);
  return v.is_boolean() && v.get<bool>();
}
double Num(const json& j, const char* key) {
  const json& v = Field(j, key);
  return v.is_number() ? v.get<double>() : 0.0;
}
const json& Inv(const NodeProbe& n) { return Field(n.report, "inventory"); }

// {"2.18.3": [b], "2.21.5": [a, c]} → ("2.18.3 on b; 2.21.5 on a, c", [b, a, c]).
std::pair<std::string, std::vector<std::string>> DescribeGroups(
    const std::map<std::string, std::vector<std::string>>& groups) {
  std::vector<std::string> parts, nodes;
  for (const auto& [value, names] : groups) {
    parts.push_back(value + " on " + Join(names, ", "));
    nodes.insert(nodes.end(), names.begin(), names.end());
  }
  return {Join(parts, "; "), nodes};
}

bool Reachable(const NodeProbe& n) { return n.error.empty(); }

// What deepspeed accepts but would plan differently from what the flags suggest (hostfile.h notes).
CheckRow PlanRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  CheckRow r{"plan", CheckStatus::kOk, "", {}, ""};
  int ranks = 0;
  for (const auto& n : in.nodes) ranks += n.slots;
  r.summary = std::to_string(in.nodes.size()) + (in.nodes.size() == 1 ? " node, " : " nodes, ") +
              std::to_string(ranks) + " slots" + (in.plan_source.empty() ? "" : " from " + in.plan_source);
  for (const auto& note : in.plan_notes) {
    r.details.push_back(note);
    out.push_back(
        {codes::kLaunchPlan,
         Severity::kWarning,
         note,
         {},
         {},
         {in.plan_source},
         "fix the hostfile or the --include/--exclude/--num_nodes/--num_gpus flags so deepspeed plans what you "
         "mean; `dsdoctor check --plan` shows the plan"});
  }
  if (!in.plan_notes.empty()) {
    r.status = CheckStatus::kWarn;
    r.remedy = "see LAUNCH_PLAN: deepspeed would run a different set of slots than the flags suggest";
  }
  return r;
}

CheckRow AgentsRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  CheckRow r{"agents", CheckStatus::kOk, "", {}, ""};
  int up = 0;
  for (const auto& n : in.nodes) {
    if (Reachable(n)) {
      ++up;
      continue;
    }
    r.details.push_back(n.name + ": " + n.error);
    out.push_back(
        {codes::kAgentUnreachable,
         Severity::kError,
         "no agent on " + n.name,
         {n.name},
         {},
         {n.error},
         "check that the node is up and reachable from here (ssh, firewall) and that dsdoctor is installed there"});
  }
  r.summary = std::to_string(up) + "/" + std::to_string(in.nodes.size()) + " agents answered";
  if (up < static_cast<int>(in.nodes.size())) {
    r.status = CheckStatus::kFail;
    r.remedy = "every node needs a running agent; see AGENT_UNREACHABLE";
  }
  return r;
}

CheckRow HostnamesRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  CheckRow r{"hostnames", CheckStatus::kOk, "", {}, ""};
  if (in.simulated) {
    r.status = CheckStatus::kInfo;
    r.summary = "simulated nodes share this machine's hostname (not checked)";
    return r;
  }
  std::map<std::string, std::vector<std::string>> by_host;
  for (const auto& n : in.nodes) {
    if (Reachable(n)) by_host[Str(Field(Inv(n), "system"), "hostname")].push_back(n.name);
  }
  r.summary = std::to_string(by_host.size()) + " distinct hostnames";
  for (const auto& [host, names] : by_host) {
    if (names.size() < 2) continue;
    r.status = CheckStatus::kFail;
    r.details.push_back(host + ": " + Join(names, ", "));
    out.push_back({codes::kDuplicateHostname,
                   Severity::kError,
                   "nodes " + Join(names, ", ") + " report the same hostname '" + host + "'",
                   names,
                   {},
                   {},
                   "give every node a unique hostname: NCCL and torch use it to group local ranks"});
  }
  return r;
}

CheckRow NcclRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  CheckRow r{"NCCL version", CheckStatus::kOk, "", {}, ""};
  std::map<std::string, std::vector<std::string>> by_version;
  std::vector<std::string> missing;
  for (const auto& n : in.nodes) {
    if (!Reachable(n)) continue;
    const json& nccl = Field(Inv(n), "nccl");
    if (!Bool(nccl, "found")) {
      missing.push_back(n.name);
      continue;
    }
    by_version[Str(nccl, "version")].push_back(n.name);
    r.details.push_back(n.name + ": " + Str(nccl, "version") + " at " + Str(nccl, "path"));
  }
  if (!missing.empty()) {
    bool none = by_version.empty();
    r.status = none ? CheckStatus::kWarn : CheckStatus::kFail;
    r.details.push_back("missing on " + Join(missing, ", "));
    out.push_back(
        {codes::kNcclMissing,
         none ? Severity::kWarning : Severity::kError,
         none ? "no node has NCCL (fine for CPU-only gloo/MPI jobs)" : "NCCL missing on " + Join(missing, ", "),
         missing,
         {},
         {},
         "install the same NCCL on every node, or set DSDOCTOR_NCCL_LIBRARY to its path"});
  }
  if (by_version.size() > 1) {
    r.status = CheckStatus::kFail;
    auto [text, nodes] = DescribeGroups(by_version);
    out.push_back({codes::kNcclVersionMismatch,
                   Severity::kError,
                   "NCCL versions differ: " + text,
                   nodes,
                   {},
                   r.details,
                   "install one NCCL version everywhere (NCCL refuses to connect mismatched peers)"});
  }
  r.summary = by_version.empty()       ? "NCCL not found on any node"
              : by_version.size() == 1 ? "NCCL " + by_version.begin()->first + " on " +
                                             std::to_string(by_version.begin()->second.size()) + " nodes"
                                       : std::to_string(by_version.size()) + " different NCCL versions";
  return r;
}

CheckRow CudaRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  CheckRow r{"CUDA version", CheckStatus::kOk, "", {}, ""};
  std::map<std::string, std::vector<std::string>> by_runtime;
  for (const auto& n : in.nodes) {
    if (!Reachable(n)) continue;
    const json& cuda = Field(Inv(n), "cuda");
    std::string v = Bool(cuda, "runtime_found") ? Str(cuda, "runtime_version") : "none";
    by_runtime[v].push_back(n.name);
    r.details.push_back(n.name + ": runtime " + v + ", driver " + Str(cuda, "driver_version"));
  }
  r.summary = by_runtime.size() <= 1
                  ? "CUDA runtime " + (by_runtime.empty() ? "?" : by_runtime.begin()->first) + " everywhere"
                  : std::to_string(by_runtime.size()) + " different CUDA runtimes";
  if (by_runtime.size() > 1) {
    r.status = CheckStatus::kWarn;
    auto [text, nodes] = DescribeGroups(by_runtime);
    out.push_back({codes::kCudaVersionMismatch,
                   Severity::kWarning,
                   "CUDA runtimes differ: " + text,
                   nodes,
                   {},
                   {},
                   "use the same CUDA toolkit/container image on every node"});
  }
  return r;
}

CheckRow GpuSlotsRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  CheckRow r{"GPUs vs slots", CheckStatus::kOk, "", {}, ""};
  int with_gpus = 0;
  for (const auto& n : in.nodes) {
    if (!Reachable(n)) continue;
    size_t gpus = Arr(Field(Inv(n), "nvml"), "gpus").size();
    if (gpus == 0) continue;
    ++with_gpus;
    r.details.push_back(n.name + ": " + std::to_string(gpus) + " GPUs, " + std::to_string(n.slots) + " slots");
    if (static_cast<size_t>(n.slots) > gpus) {
      r.status = CheckStatus::kFail;
      out.push_back({codes::kSlotsExceedGpus,
                     Severity::kError,
                     n.name + " has slots=" + std::to_string(n.slots) + " but " + std::to_string(gpus) + " GPUs",
                     {n.name},
                     {},
                     {},
                     "lower slots= in the hostfile to the GPU count, or use --num_gpus"});
    }
  }
  if (with_gpus == 0) {
    r.status = CheckStatus::kInfo;
    r.summary = "no GPUs found (NVML); not checked";
  } else {
    r.summary = std::to_string(with_gpus) + " nodes with GPUs";
  }
  return r;
}

CheckRow BootstrapRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  CheckRow r{"NCCL bootstrap interface", CheckStatus::kOk, "", {}, ""};
  int ran = 0;
  for (const auto& n : in.nodes) {
    if (!Reachable(n)) continue;
    const json& inv = Inv(n);
    const json& b = Field(inv, "nccl_bootstrap");
    if (!Bool(b, "ran")) continue;
    ++ran;
    std::string ifname = Str(Field(inv, "env"), "NCCL_SOCKET_IFNAME");
    std::string iface = Str(b, "interface");
    if (!Bool(b, "ok")) {
      r.status = CheckStatus::kFail;
      std::vector<std::string> ev;
      for (const auto& w : Arr(b, "warnings")) {
        if (w.is_string()) ev.push_back("NCCL WARN " + w.get<std::string>());
      }
      r.details.push_back(n.name + ": failed under NCCL_SOCKET_IFNAME=" + (ifname.empty() ? "(unset)" : ifname));
      std::vector<std::string> names;
      for (const auto& nic : Arr(Field(inv, "system"), "interfaces")) {
        if (Bool(nic, "up") && !Bool(nic, "loopback")) names.push_back(Str(nic, "name"));
      }
      out.push_back({codes::kSocketIfnameInvalid,
                     Severity::kError,
                     n.name + ": NCCL finds no bootstrap interface" +
                         (ifname.empty() ? std::string() : " matching NCCL_SOCKET_IFNAME=" + ifname),
                     {n.name},
                     {},
                     ev,
                     "set NCCL_SOCKET_IFNAME to an interface present on every node (" + n.name + " has: " +
                         (names.empty() ? "none up" : Join(names, ", ")) + "), or a prefix / '^lo,docker' exclusion"});
      continue;
    }
    r.details.push_back(n.name + ": " + iface + " " + Str(b, "address"));
    if (iface == "lo" && !in.simulated) {
      r.status = std::max(r.status, CheckStatus::kWarn);
      out.push_back({codes::kSocketIfnameInvalid,
                     Severity::kWarning,
                     n.name + ": NCCL would bootstrap over loopback",
                     {n.name},
                     {},
                     {},
                     "set NCCL_SOCKET_IFNAME to the cluster network interface"});
    } else if (StartsWith(iface, "docker") || StartsWith(iface, "veth") || StartsWith(iface, "virbr")) {
      r.status = std::max(r.status, CheckStatus::kWarn);
      out.push_back({codes::kSocketIfnameInvalid,
                     Severity::kWarning,
                     n.name + ": NCCL would bootstrap over the container bridge " + iface,
                     {n.name},
                     {},
                     {},
                     "set NCCL_SOCKET_IFNAME=^docker,lo,veth or to the cluster interface"});
    }
  }
  r.summary = ran == 0 ? "not run (no NCCL)" : std::to_string(ran) + " nodes probed with the job's NCCL env";
  if (ran == 0) r.status = CheckStatus::kInfo;
  return r;
}

CheckRow EnvRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  CheckRow r{"environment consistency", CheckStatus::kOk, "", {}, ""};
  std::map<std::string, std::map<std::string, std::string>> values;  // var → node → value
  std::vector<std::string> reachable;
  for (const auto& n : in.nodes) {
    if (!Reachable(n)) continue;
    reachable.push_back(n.name);
    const json& env = Field(Inv(n), "env");
    if (!env.is_object()) continue;
    for (const auto& [k, v] : env.items()) {
      if (!v.is_string()) continue;
      if (StartsWith(k, "NCCL_") || k == "CUDA_VISIBLE_DEVICES" || StartsWith(k, "TORCH_NCCL_") ||
          StartsWith(k, "GLOO_")) {
        values[k][n.name] = v.get<std::string>();
      }
    }
    for (const auto& f : Arr(Inv(n), "deepspeed_env")) {
      for (const auto& p : Arr(f, "problems")) {
        if (!Bool(p, "fatal")) continue;
        r.status = CheckStatus::kFail;
        r.details.push_back(n.name + ": " + Str(f, "path") + ":" + std::to_string(static_cast<int>(Num(p, "line"))) +
                            ": " + Str(p, "reason"));
      }
    }
  }
  int mismatched = 0;
  for (const auto& [var, per_node] : values) {
    std::set<std::string> distinct;
    for (const auto& node : reachable) distinct.insert(per_node.count(node) ? per_node.at(node) : "(unset)");
    if (distinct.size() <= 1) continue;
    ++mismatched;
    r.status = CheckStatus::kFail;
    std::vector<std::string> ev;
    for (const auto& node : reachable)
      ev.push_back(node + ": " + var + "=" + (per_node.count(node) ? per_node.at(node) : "(unset)"));
    r.details.push_back(var + " differs: " + Join(ev, "; "));
    out.push_back({codes::kEnvMismatch,
                   Severity::kError,
                   var + " differs between nodes",
                   reachable,
                   {},
                   ev,
                   "set " + var +
                       " identically for every rank (put it in .deepspeed_env, which the launcher "
                       "exports to all workers)"});
  }
  r.summary =
      std::to_string(values.size()) + " NCCL/GLOO/CUDA variables compared, " + std::to_string(mismatched) + " differ";
  return r;
}

std::string Cell(const json& p) {
  std::string o = Str(p, "outcome");
  if (o == "ok") {
    char buf[32];
    std::snprintf(buf, sizeof buf, "ok %.1fms", Num(p, "latency_ms"));
    return buf;
  }
  if (o == "timeout") return "DROP";
  if (o == "refused") return "RST";
  if (o == "unreachable") return "UNR";
  if (o == "unresolved") return "DNS";
  return "ERR";
}

CheckRow ConnectivityRow(const ClusterCheckInput& in, const std::string& kind, ClusterCheckResult& res) {
  bool rendezvous = kind == "rendezvous";
  CheckRow r{
      rendezvous ? "connectivity: rendezvous port " + std::to_string(in.master_port) : "connectivity: agent port",
      CheckStatus::kOk,
      "",
      {},
      ""};
  size_t n = in.nodes.size();
  auto& m = res.matrix[kind];
  m.assign(n, std::vector<std::string>(n, "?"));
  std::map<std::pair<size_t, size_t>, json> results;
  auto index_of = [&](const std::string& name) -> size_t {
    for (size_t i = 0; i < n; ++i) {
      if (in.nodes[i].name == name) return i;
    }
    return n;
  };
  for (size_t i = 0; i < n; ++i) {
    m[i][i] = "-";
    if (!Reachable(in.nodes[i])) continue;
    for (const auto& p : Arr(in.nodes[i].pings, "results")) {
      if (Str(p, "kind") != kind) continue;
      size_t j = index_of(Str(p, "name"));
      if (j == n) continue;
      m[i][j] = Cell(p);
      results[{i, j}] = p;
    }
  }
  int ok = 0, bad = 0;
  for (const auto& [ij, p] : results) {
    auto [i, j] = ij;
    const NodeProbe& from = in.nodes[i];
    const NodeProbe& to = in.nodes[j];
    std::string outcome = Str(p, "outcome");
    if (outcome == "ok") {
      ++ok;
      continue;
    }
    ++bad;
    int port = static_cast<int>(Num(p, "port"));
    std::string pair =
        from.name + " (" + from.address + ") -> " + to.name + " (" + to.address + "):" + std::to_string(port);
    std::vector<std::string> ev = {pair + ": " + outcome + " after " +
                                   std::to_string(static_cast<int>(Num(p, "latency_ms"))) + " ms (" + Str(p, "error") +
                                   ")"};
    auto back = results.find({j, i});
    if (back != results.end() && Str(back->second, "outcome") == "ok") {
      ev.push_back("asymmetric: " + to.name + " -> " + from.name + ":" +
                   std::to_string(static_cast<int>(Num(back->second, "port"))) + " works");
    }
    Finding f;
    f.nodes = {from.name, to.name};
    f.evidence = ev;
    std::string what = (rendezvous ? "rendezvous port " : "agent port ") + std::to_string(port);
    std::string allow = "allow TCP " + std::to_string(port) + " from " + from.address + " to " + to.address + " (on " +
                        to.name + ": iptables -I INPUT -p tcp -s " + from.address + " --dport " + std::to_string(port) +
                        " -j ACCEPT; also check cloud security groups)";
    if (outcome == "timeout") {
      f.code = codes::kPortBlocked;
      f.summary = from.name + " -> " + to.name + ":" + std::to_string(port) + " (" + what +
                  ") blocked: connection attempts time out, as behind a firewall DROP rule";
      f.remedy = allow + ". Ping (ICMP) may still work: NCCL and torch need TCP.";
    } else if (outcome == "refused") {
      f.code = codes::kPortRefused;
      bool listening = false;
      for (const auto& lp : Arr(to.pings, "listening")) listening |= lp.is_number_integer() && lp.get<int>() == port;
      f.summary =
          from.name + " -> " + to.name + ":" + std::to_string(port) + " (" + what + ") refused: " +
          (listening ? "the port is open on " + to.name + ", so a REJECT rule answers" : "nothing listens there");
      f.evidence.push_back(listening ? to.name + "'s agent reports it is listening on " + std::to_string(port)
                                     : to.name + " is not listening on " + std::to_string(port));
      f.remedy = listening ? allow
                           : "start the service on " + to.name + " port " + std::to_string(port) +
                                 " (MASTER_PORT must be free and bound on the master)";
    } else if (outcome == "unreachable") {
      f.code = codes::kHostUnreachable;
      f.summary = from.name + " has no route to " + to.name + " (" + to.address + ")";
      f.remedy = "check routes and the interface (ip route get " + to.address + " on " + from.name + ")";
    } else if (outcome == "unresolved") {
      f.code = codes::kNameUnresolved;
      f.summary = from.name + " cannot resolve " + to.address;
      f.remedy = "fix DNS or /etc/hosts on " + from.name;
    } else {
      f.code = codes::kPortRefused;
      f.summary = from.name + " -> " + to.name + ":" + std::to_string(port) + " failed: " + Str(p, "error");
      f.remedy = allow;
    }
    f.severity = Severity::kError;
    r.details.push_back(f.summary);
    res.findings.push_back(f);
  }
  r.summary = std::to_string(ok) + " of " + std::to_string(ok + bad) + " connections ok";
  if (bad) {
    r.status = CheckStatus::kFail;
    r.remedy =
        "see the matrix below: DROP = timed out (firewall drops), RST = refused (REJECT rule or no listener), "
        "UNR = no route, DNS = name not resolved";
  }
  return r;
}

CheckRow AllReduceRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  const BandwidthInput& bw = in.bandwidth;
  CheckRow r{"all-reduce bandwidth", CheckStatus::kOk, "", {}, ""};
  if (!bw.ran) {
    r.status = CheckStatus::kInfo;
    r.summary = "not run: " + bw.skipped;
    return r;
  }
  if (!bw.allreduce_error.empty()) {
    r.status = CheckStatus::kFail;
    r.summary = bw.backend + " all-reduce over " + std::to_string(bw.ranks) + " ranks failed";
    r.details.push_back(bw.allreduce_error);
    out.push_back({codes::kCommError,
                   Severity::kError,
                   r.summary,
                   {},
                   {},
                   {bw.allreduce_error},
                   "the nodes connect but a collective between them fails; run with DSDOCTOR_LOG_LEVEL=debug"});
    return r;
  }
  double avg = probe::AvgBusBw(bw.allreduce);
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s, %d ranks, %zu sizes: avg busbw %.3f GB/s", bw.backend.c_str(), bw.ranks,
                bw.allreduce.size(), avg);
  r.summary = buf;
  long wrong = 0;
  std::vector<std::string> wrong_sizes;
  for (const auto& row : bw.allreduce) {
    wrong += row.wrong;
    if (row.wrong) wrong_sizes.push_back(std::to_string(row.bytes) + " B: " + std::to_string(row.wrong) + " wrong");
  }
  if (wrong > 0) {
    r.status = CheckStatus::kFail;
    out.push_back({codes::kAllreduceWrong,
                   Severity::kError,
                   "all-reduce returned " + std::to_string(wrong) + " wrong elements",
                   {},
                   {},
                   wrong_sizes,
                   "data is corrupted in transit or by a faulty node: rerun, then test nodes pairwise to isolate it"});
  }
  if (bw.min_busbw_gbps > 0 && avg < bw.min_busbw_gbps) {
    r.status = std::max(r.status, CheckStatus::kFail);
    std::snprintf(buf, sizeof buf, "all-reduce avg busbw %.3f GB/s is below --min-busbw %.3f GB/s", avg,
                  bw.min_busbw_gbps);
    out.push_back({codes::kBandwidthLow,
                   Severity::kError,
                   buf,
                   {},
                   {},
                   {},
                   "see the p2p matrix for the slow link or node; check NIC speed (ethtool), NCCL_SOCKET_IFNAME and "
                   "congestion"});
  }
  return r;
}

CheckRow P2pRow(const ClusterCheckInput& in, ClusterCheckResult& res) {
  const BandwidthInput& bw = in.bandwidth;
  CheckRow r{"p2p bandwidth", CheckStatus::kOk, "", {}, ""};
  if (!bw.ran || bw.p2p.empty()) {
    r.status = CheckStatus::kInfo;
    r.summary = "not run: " + (bw.ran ? std::string("fewer than two nodes") : bw.skipped);
    return r;
  }
  size_t n = in.nodes.size();
  auto index_of = [&](const std::string& name) -> size_t {
    for (size_t i = 0; i < n; ++i) {
      if (in.nodes[i].name == name) return i;
    }
    return n;
  };
  std::vector<double> values;
  for (const auto& p : bw.p2p) {
    if (p.error.empty()) values.push_back(p.gbit_s);
  }
  std::sort(values.begin(), values.end());
  double median = values.empty()      ? 0
                  : values.size() % 2 ? values[values.size() / 2]
                                      : (values[values.size() / 2 - 1] + values[values.size() / 2]) / 2;
  // Simulated nodes share this machine's cores: their differences are scheduling noise, so only
  // the absolute floor applies there.
  double threshold = in.simulated ? bw.min_p2p_gbit_s : std::max(bw.min_p2p_gbit_s, kSlowFraction * median);
  auto& m = res.matrix["p2p"];
  m.assign(n, std::vector<std::string>(n, "?"));
  for (size_t i = 0; i < n; ++i) m[i][i] = "-";
  std::map<std::string, int> pairs_of, low_of;
  std::vector<const P2pResult*> low;
  char buf[200];
  for (const auto& p : bw.p2p) {
    size_t i = index_of(p.from), j = index_of(p.to);
    if (i == n || j == n) continue;
    if (!p.error.empty()) {
      m[i][j] = "ERR";
      r.details.push_back(p.from + " -> " + p.to + ": " + p.error);
      r.status = CheckStatus::kFail;
      continue;
    }
    ++pairs_of[p.from];
    ++pairs_of[p.to];
    bool is_low = p.gbit_s < threshold;
    std::snprintf(buf, sizeof buf, "%s%.2f", is_low ? "LOW " : "", p.gbit_s);
    m[i][j] = buf;
    if (is_low) {
      low.push_back(&p);
      ++low_of[p.from];
      ++low_of[p.to];
    }
  }
  std::snprintf(buf, sizeof buf, "%zu pairs, median %.2f Gbit/s, %zu below %.2f Gbit/s", values.size(), median,
                low.size(), threshold);
  r.summary = buf;
  std::set<std::string> slow_nodes;
  for (const auto& [node, count] : pairs_of) {
    if (count >= 2 && low_of[node] >= kSlowNodeShare * count) slow_nodes.insert(node);
  }
  std::string rule = in.simulated ? "rule: below --min-p2p-gbit (simulated nodes)"
                                  : "rule: below " + std::string(bw.min_p2p_gbit_s > 0 ? "--min-p2p-gbit or " : "") +
                                        std::to_string(static_cast<int>(kSlowFraction * 100)) + "% of the median pair";
  for (const auto& node : slow_nodes) {
    std::vector<std::string> ev;
    for (const auto* p : low) {
      if (p->from != node && p->to != node) continue;
      std::snprintf(buf, sizeof buf, "%s -> %s: %.3f Gbit/s", p->from.c_str(), p->to.c_str(), p->gbit_s);
      ev.push_back(buf);
    }
    std::snprintf(buf, sizeof buf, "node %s is slow: %d of its %d transfers below %.2f Gbit/s (median %.2f)",
                  node.c_str(), low_of[node], pairs_of[node], threshold, median);
    ev.push_back(rule);
    res.findings.push_back({codes::kBandwidthLow,
                            Severity::kError,
                            buf,
                            {node},
                            {},
                            ev,
                            "check " + node +
                                "'s NIC (ethtool: speed/duplex, errors), its traffic shaping (tc qdisc), "
                                "cabling/switch port, and whether NCCL_SOCKET_IFNAME picks a slow interface there"});
    r.details.push_back(buf);
  }
  for (const auto* p : low) {
    if (slow_nodes.count(p->from) || slow_nodes.count(p->to)) continue;
    std::snprintf(buf, sizeof buf, "link %s -> %s is slow: %.3f Gbit/s (threshold %.2f, median %.2f)", p->from.c_str(),
                  p->to.c_str(), p->gbit_s, threshold, median);
    res.findings.push_back({codes::kBandwidthLow,
                            Severity::kError,
                            buf,
                            {p->from, p->to},
                            {},
                            {rule},
                            "check the path between the two nodes (switch ports, routing, shaping)"});
    r.details.push_back(buf);
  }
  if (!low.empty()) r.status = CheckStatus::kFail;
  return r;
}

std::string XmlEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          o += ' ';
        else
          o += c;
    }
  }
  return o;
}

}  // namespace

ClusterCheckResult EvaluateCluster(const ClusterCheckInput& in) {
  ClusterCheckResult res;
  // Each row keeps the codes of the findings its check produced (JUnit failure types).
  auto add = [&res](CheckRow row, size_t findings_before) {
    for (size_t i = findings_before; i < res.findings.size(); ++i) {
      if (std::find(row.codes.begin(), row.codes.end(), res.findings[i].code) == row.codes.end()) {
        row.codes.push_back(res.findings[i].code);
      }
    }
    res.rows.push_back(std::move(row));
  };
  for (auto check : {PlanRow, AgentsRow, HostnamesRow, NcclRow, CudaRow, GpuSlotsRow, BootstrapRow, EnvRow}) {
    size_t before = res.findings.size();
    add(check(in, res.findings), before);
  }
  for (const char* kind : {"agent", "rendezvous"}) {
    size_t before = res.findings.size();
    add(ConnectivityRow(in, kind, res), before);
  }
  {
    size_t before = res.findings.size();
    add(AllReduceRow(in, res.findings), before);
    before = res.findings.size();
    add(P2pRow(in, res), before);
  }
  diagnosis::SortBySeverity(res.findings);
  log::Get("agent")->debug("cluster check: {} rows, {} findings", res.rows.size(), res.findings.size());
  return res;
}

std::string RenderClusterText(const ClusterCheckInput& in, const ClusterCheckResult& res, bool color) {
  std::ostringstream out;
  out << probe::RenderChecksText("dsdoctor check: " + std::to_string(in.nodes.size()) + " nodes", res.rows, {color});
  for (const auto& [kind, m] : res.matrix) {
    bool any = false;
    for (const auto& row : m)
      any |= std::any_of(row.begin(), row.end(), [](const std::string& c) { return c != "?" && c != "-"; });
    if (!any) continue;
    if (kind == "rendezvous") {  // one target: the master
      out << "\nrendezvous port " << in.master_port << " on " << in.nodes[0].name << " (" << in.nodes[0].address
          << ")\n";
      for (size_t i = 1; i < m.size(); ++i)
        out << "  " << in.nodes[i].name << " -> " << in.nodes[0].name << ": " << m[i][0] << "\n";
      continue;
    }
    out << "\n"
        << (kind == "p2p" ? "p2p bandwidth, Gbit/s" : "connectivity matrix, agent port") << " (row -> column)\n";
    size_t w = 10;
    for (const auto& n : in.nodes) w = std::max(w, n.name.size() + 2);
    out << std::string(w, ' ');
    for (const auto& n : in.nodes) out << n.name << std::string(w - n.name.size(), ' ');
    out << "\n";
    for (size_t i = 0; i < m.size(); ++i) {
      out << in.nodes[i].name << std::string(w - in.nodes[i].name.size(), ' ');
      for (const auto& c : m[i]) out << c << std::string(w > c.size() ? w - c.size() : 1, ' ');
      out << "\n";
    }
  }
  if (!in.bandwidth.allreduce.empty()) {
    out << "\nall-reduce, " << in.bandwidth.backend << ", " << in.bandwidth.ranks << " ranks (nccl-tests columns)\n"
        << probe::RenderBandwidthTable(in.bandwidth.allreduce);
  }
  if (!res.findings.empty()) {
    out << "\nfindings\n";
    for (const auto& f : res.findings) {
      out << "  " << diagnosis::SeverityName(f.severity) << " " << f.code << ": " << f.summary << "\n";
      for (const auto& e : f.evidence) out << "      " << e << "\n";
      if (!f.remedy.empty()) out << "      remedy: " << f.remedy << "\n";
    }
  }
  return out.str();
}

json ClusterJson(const ClusterCheckInput& in, const ClusterCheckResult& res) {
  json nodes = json::array();
  for (const auto& n : in.nodes) {
    nodes.push_back({{"name", n.name},
                     {"address", n.address},
                     {"agent_port", n.agent_port},
                     {"slots", n.slots},
                     {"reachable", n.error.empty()},
                     {"error", n.error},
                     {"report", n.report}});
  }
  probe::CheckCounts counts = probe::CountChecks(res.rows);
  json findings = json::array();
  for (const auto& f : res.findings) findings.push_back(diagnosis::ToJson(f));
  const BandwidthInput& bw = in.bandwidth;
  json allreduce = json::array();
  for (const auto& row : bw.allreduce) allreduce.push_back(probe::ToJson(row));
  json p2p = json::array();
  for (const auto& p : bw.p2p) {
    p2p.push_back({{"from", p.from},
                   {"to", p.to},
                   {"gbit_s", p.gbit_s},
                   {"bytes", p.bytes},
                   {"seconds", p.seconds},
                   {"error", p.error}});
  }
  json bandwidth = {{"ran", bw.ran},
                    {"skipped", bw.skipped},
                    {"backend", bw.backend},
                    {"ranks", bw.ranks},
                    {"allreduce", allreduce},
                    {"avg_busbw_gbps", probe::AvgBusBw(bw.allreduce)},
                    {"allreduce_error", bw.allreduce_error},
                    {"p2p", p2p}};
  return {{"schema", "dsdoctor.check/1"},
          {"master_port", in.master_port},
          {"nodes", nodes},
          {"checks", probe::ChecksJson(res.rows)},
          {"findings", findings},
          {"matrix", res.matrix},
          {"bandwidth", bandwidth},
          {"summary",
           {{"fail", counts.fail},
            {"warn", counts.warn},
            {"findings", res.findings.size()},
            {"exit_code", ClusterExitCode(res)}}}};
}

std::string RenderJUnit(const ClusterCheckResult& res, double seconds) {
  int failures = probe::CountChecks(res.rows).fail;
  std::ostringstream x;
  char time[32];
  std::snprintf(time, sizeof time, "%.3f", seconds);
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"dsdoctor\" tests=\"" << res.rows.size() << "\" failures=\"" << failures << "\" time=\""
    << time << "\">\n";
  x << "  <testsuite name=\"dsdoctor check\" tests=\"" << res.rows.size() << "\" failures=\"" << failures
    << "\" errors=\"0\" skipped=\"0\" time=\"" << time << "\">\n";
  for (const auto& r : res.rows) {
    x << "    <testcase classname=\"dsdoctor.check\" name=\"" << XmlEscape(r.name) << "\">\n";
    if (r.status == CheckStatus::kFail) {
      std::string type = r.codes.empty() ? "fail" : Join(r.codes, ",");
      x << "      <failure type=\"" << XmlEscape(type) << "\" message=\"" << XmlEscape(r.summary) << "\">"
        << XmlEscape(Join(r.details, "\n") + (r.remedy.empty() ? "" : "\nremedy: " + r.remedy)) << "</failure>\n";
    } else {
      x << "      <system-out>" << XmlEscape(std::string(probe::CheckStatusName(r.status)) + ": " + r.summary)
        << "</system-out>\n";
    }
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

int ClusterExitCode(const ClusterCheckResult& res) { return probe::ReportExitCode(res.rows); }

}  // namespace dsd::agent
