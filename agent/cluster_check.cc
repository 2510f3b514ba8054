#include "agent/cluster_check.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "common/file.h"
#include "common/json_get.h"
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
double Num(const json& j, const char* key) {
  const json& v = Field(j, key);
  return v.is_number() ? v.get<double>() : 0.0;
}
const json& Inv(const NodeProbe& n) { return Field(n.report, "inventory"); }

// A node's network interfaces (system.interfaces), which CompactReport moves out of the DOM: read
// only to name a failed bootstrap's alternatives.
json Interfaces(const NodeProbe& n) {
  const json& in_dom = Field(Field(Inv(n), "system"), "interfaces");
  if (in_dom.is_array() || n.report_rest.empty()) return in_dom.is_array() ? in_dom : json::array();
  json rest = json::from_cbor(n.report_rest, true, false);
  json list = rest.is_object() ? rest.value("/inventory/system/interfaces"_json_pointer, json::array()) : json();
  return list.is_array() ? list : json::array();
}

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
  // Never a green check of a cluster that was not touched: every output says the nodes were simulated.
  if (in.simulated) r.summary += ", " + std::string(kSimulatedLabel);
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

// What Slurm says of the allocation's nodes: one drained, draining, down, failing or not
// responding ("*") is named with Slurm's reason, whatever the probes found (a drained node may
// answer every probe and still be taken out by the next job).
CheckRow SlurmRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  CheckRow r{"Slurm nodes", CheckStatus::kOk, "", {}, ""};
  if (!in.slurm_error.empty()) {
    r.status = CheckStatus::kWarn;
    r.summary = "not checked: " + in.slurm_error;
    r.remedy = "run the check where sinfo works (the login node of the allocation)";
    return r;
  }
  std::vector<std::string> bad_nodes;
  for (const auto& n : in.slurm_nodes) {
    const std::string& st = n.state;
    const bool bad = st.find("drain") != std::string::npos || st.find("down") != std::string::npos ||
                     st.find("fail") != std::string::npos || st.find("maint") != std::string::npos ||
                     st.find("reboot") != std::string::npos || (!st.empty() && st.back() == '*');
    if (!bad) continue;
    bad_nodes.push_back(n.name);
    const std::string reason = n.reason.empty() || n.reason == "none" ? "" : " (reason: " + n.reason + ")";
    r.details.push_back(n.name + ": " + st + reason);
    out.push_back({codes::kSlurmNodeState,
                   Severity::kError,
                   "Slurm has node " + n.name + " of this allocation " + st + reason,
                   {n.name},
                   {},
                   {"sinfo: " + n.name + " " + st + (n.reason.empty() ? "" : " " + n.reason)},
                   "`scontrol show node " + n.name + "` says why; once it is fixed, `scontrol update nodename=" +
                       n.name + " state=resume`, or leave it out of the job (sbatch/salloc --exclude=" + n.name + ")"});
  }
  r.summary = std::to_string(in.slurm_nodes.size() - bad_nodes.size()) + " of " +
              std::to_string(in.slurm_nodes.size()) + " nodes usable by Slurm";
  if (!bad_nodes.empty()) {
    r.status = CheckStatus::kFail;
    r.summary += "; " + Join(bad_nodes, ", ") + " not";
    r.remedy = "see SLURM_NODE_STATE";
  }
  // More ranks on a node than the GPUs Slurm granted it: ranks would share a GPU (NCCL refuses:
  // "Duplicate GPU detected"), or see none, since Slurm hides the others (CUDA_VISIBLE_DEVICES).
  if (in.slurm_gpus_per_node > 0) {
    std::vector<std::string> over;
    int most = 0;
    for (const auto& n : in.nodes)
      if (n.slots > in.slurm_gpus_per_node) over.push_back(n.name), most = std::max(most, n.slots);
    r.details.push_back("Slurm granted " + std::to_string(in.slurm_gpus_per_node) + " GPUs per node (" +
                        in.slurm_gpus_from + ")");
    if (!over.empty()) {
      r.status = CheckStatus::kFail;
      r.summary += "; " + std::to_string(over.size()) + " with more ranks than granted GPUs";
      r.remedy = r.remedy.empty() ? "see SLOTS_EXCEED_GPUS" : r.remedy + ", SLOTS_EXCEED_GPUS";
      out.push_back({codes::kSlotsExceedGpus,
                     Severity::kError,
                     "Slurm granted " + std::to_string(in.slurm_gpus_per_node) + " GPUs per node but " +
                         std::to_string(most) + " ranks are planned on " +
                         (over.size() <= 4 ? Join(over, ", ") : std::to_string(over.size()) + " nodes") +
                         ": ranks would share a GPU",
                     over,
                     {},
                     {in.slurm_gpus_from},
                     "ask Slurm for a GPU per rank (--gpus-per-node=" + std::to_string(most) + " or --gres=gpu:" +
                         std::to_string(most) + ") or start fewer ranks per node (--ntasks-per-node=" +
                         std::to_string(in.slurm_gpus_per_node) + ", or --num_gpus)"});
    }
  }
  return r;
}

CheckRow AgentsRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  CheckRow r{"agents", CheckStatus::kOk, "", {}, ""};
  if (in.not_started) {
    r.status = CheckStatus::kFail;
    r.summary = "not started: " + in.not_started->summary;
    r.remedy = "see " + in.not_started->code;
    out.push_back(*in.not_started);
    return r;
  }
  if (!in.resource_error.empty()) {
    r.status = CheckStatus::kFail;
    r.summary = "not started: " + in.resource_error;
    r.remedy = "see RESOURCE_LIMIT";
    out.push_back(
        {codes::kResourceLimit,
         Severity::kError,
         "this coordinator cannot hold links to " + std::to_string(in.nodes.size()) + " agents: " + in.resource_error,
         {},
         {},
         {},
         "raise the open-file limit of the shell that runs dsdoctor (ulimit -n, or nofile in "
         "/etc/security/limits.conf or the Slurm/systemd unit), or check fewer nodes at a time "
         "(--include/--num_nodes)"});
    return r;
  }
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
    if (Reachable(n)) by_host[JsonString(Field(Inv(n), "system"), "hostname")].push_back(n.name);
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
    if (!JsonBool(nccl, "found")) {
      missing.push_back(n.name);
      continue;
    }
    by_version[JsonString(nccl, "version")].push_back(n.name);
    r.details.push_back(n.name + ": " + JsonString(nccl, "version") + " at " + JsonString(nccl, "path"));
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
    std::string v = JsonBool(cuda, "runtime_found") ? JsonString(cuda, "runtime_version") : "none";
    by_runtime[v].push_back(n.name);
    r.details.push_back(n.name + ": runtime " + v + ", driver " + JsonString(cuda, "driver_version"));
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
    if (!JsonBool(b, "ran")) continue;
    ++ran;
    std::string ifname = JsonString(Field(inv, "env"), "NCCL_SOCKET_IFNAME");
    std::string iface = JsonString(b, "interface");
    if (!JsonBool(b, "ok")) {
      r.status = CheckStatus::kFail;
      std::vector<std::string> ev;
      for (const auto& w : Arr(b, "warnings")) {
        if (w.is_string()) ev.push_back("NCCL WARN " + w.get<std::string>());
      }
      r.details.push_back(n.name + ": failed under NCCL_SOCKET_IFNAME=" + (ifname.empty() ? "(unset)" : ifname));
      std::vector<std::string> names;
      for (const auto& nic : Interfaces(n)) {
        if (JsonBool(nic, "up") && !JsonBool(nic, "loopback")) names.push_back(JsonString(nic, "name"));
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
    r.details.push_back(n.name + ": " + iface + " " + JsonString(b, "address"));
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
        if (!JsonBool(p, "fatal")) continue;
        r.status = CheckStatus::kFail;
        r.details.push_back(n.name + ": " + JsonString(f, "path") + ":" +
                            std::to_string(static_cast<int>(Num(p, "line"))) + ": " + JsonString(p, "reason"));
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

// How each connect outcome shows in the matrix, the finding code it raises, and how a finding
// that folds many pairs phrases it; indexed by net::ConnectOutcome.
struct OutcomeWords {
  const char* cell;
  const char* code;
  const char* phrase;
};
constexpr OutcomeWords kOutcomeWords[] = {
    {"ok", codes::kPortRefused, "fail"},  // kOk: never a finding
    {"DROP", codes::kPortBlocked, "time out (a firewall DROP rule)"},
    {"RST", codes::kPortRefused, "are refused"},
    {"UNR", codes::kHostUnreachable, "find no route"},
    {"DNS", codes::kNameUnresolved, "cannot resolve the name"},
    {"ERR", codes::kPortRefused, "fail"},
};
constexpr size_t kOutcomes = std::size(kOutcomeWords);
static_assert(static_cast<size_t>(net::ConnectOutcome::kError) == kOutcomes - 1);

const OutcomeWords& Words(net::ConnectOutcome o) { return kOutcomeWords[static_cast<size_t>(o)]; }

std::string Cell(const PairTable& t, size_t from, size_t to) {
  if (!t.known(from, to)) return "?";
  if (t.outcome(from, to) != net::ConnectOutcome::kOk) return Words(t.outcome(from, to)).cell;
  char buf[32];
  std::snprintf(buf, sizeof buf, "ok %.1fms", t.latency_ms(from, to));
  return buf;
}

// One connectivity check (the agent mesh or the rendezvous port) over a PairTable: column `col`
// of the rendezvous table is the master, node 0.
struct MeshView {
  const ClusterCheckInput& in;
  const PairTable& t;
  bool rendezvous;
  size_t target(size_t col) const { return rendezvous ? 0 : col; }
  int port(size_t col) const { return rendezvous ? in.master_port : in.nodes[target(col)].agent_port; }
  std::string what(size_t col) const {
    return (rendezvous ? "rendezvous port " : "agent port ") + std::to_string(port(col));
  }
  bool listening(size_t col) const {
    const auto& ports = in.nodes[target(col)].listening;
    return std::find(ports.begin(), ports.end(), port(col)) != ports.end();
  }
  std::string AllowRule(size_t from, size_t col) const {
    const NodeProbe& a = in.nodes[from];
    const NodeProbe& b = in.nodes[target(col)];
    std::string p = std::to_string(port(col));
    return "allow TCP " + p + " from " + a.address + " to " + b.address + " (on " + b.name +
           ": iptables -I INPUT -p tcp -s " + a.address + " --dport " + p +
           " -j ACCEPT; also check cloud security groups)";
  }
  std::string PairText(size_t from, size_t col) const {
    const NodeProbe& a = in.nodes[from];
    const NodeProbe& b = in.nodes[target(col)];
    return a.name + " (" + a.address + ") -> " + b.name + " (" + b.address + "):" + std::to_string(port(col));
  }
  std::string Evidence(size_t from, size_t col) const {
    std::string e = PairText(from, col) + ": " + net::ConnectOutcomeName(t.outcome(from, col)) + " after " +
                    std::to_string(static_cast<int>(t.latency_ms(from, col))) + " ms (" + t.error(from, col) + ")";
    if (t.retried(from, col)) e += ", on the second try too";
    return e;
  }
};

Finding PairFinding(const MeshView& v, size_t i, size_t col) {
  const NodeProbe& from = v.in.nodes[i];
  const NodeProbe& to = v.in.nodes[v.target(col)];
  net::ConnectOutcome o = v.t.outcome(i, col);
  std::string port = std::to_string(v.port(col));
  Finding f;
  f.code = Words(o).code;
  f.severity = Severity::kError;
  f.nodes = {from.name, to.name};
  f.evidence = {v.Evidence(i, col)};
  size_t j = v.target(col);
  if (!v.rendezvous && j < v.t.rows() && i < v.t.cols() && v.t.known(j, i) &&
      v.t.outcome(j, i) == net::ConnectOutcome::kOk) {
    f.evidence.push_back("asymmetric: " + to.name + " -> " + from.name + ":" + std::to_string(from.agent_port) +
                         " works");
  }
  std::string allow = v.AllowRule(i, col);
  switch (o) {
    case net::ConnectOutcome::kTimeout:
      f.summary = from.name + " -> " + to.name + ":" + port + " (" + v.what(col) +
                  ") blocked: connection attempts time out, as behind a firewall DROP rule";
      f.remedy = allow + ". Ping (ICMP) may still work: NCCL and torch need TCP.";
      break;
    case net::ConnectOutcome::kRefused: {
      bool listening = v.listening(col);
      f.summary =
          from.name + " -> " + to.name + ":" + port + " (" + v.what(col) + ") refused: " +
          (listening ? "the port is open on " + to.name + ", so a REJECT rule answers" : "nothing listens there");
      f.evidence.push_back(listening ? to.name + "'s agent reports it is listening on " + port
                                     : to.name + " is not listening on " + port);
      f.remedy = listening ? allow
                           : "start the service on " + to.name + " port " + port +
                                 " (MASTER_PORT must be free and bound on the master)";
      break;
    }
    case net::ConnectOutcome::kUnreachable:
      f.summary = from.name + " has no route to " + to.name + " (" + to.address + ")";
      f.remedy = "check routes and the interface (ip route get " + to.address + " on " + from.name + ")";
      break;
    case net::ConnectOutcome::kUnresolved:
      f.summary = from.name + " cannot resolve " + to.address;
      f.remedy = "fix DNS or /etc/hosts on " + from.name;
      break;
    default:
      f.summary = from.name + " -> " + to.name + ":" + port + " failed: " + v.t.error(i, col);
      f.remedy = allow;
  }
  return f;
}

// Up to kEvidencePairs pairs, then a count of the rest.
constexpr size_t kEvidencePairs = 8;
void AddPairEvidence(const MeshView& v, const std::vector<std::pair<size_t, size_t>>& pairs,
                     std::vector<std::string>& ev) {
  for (size_t k = 0; k < pairs.size() && k < kEvidencePairs; ++k)
    ev.push_back(v.Evidence(pairs[k].first, pairs[k].second));
  if (pairs.size() > kEvidencePairs)
    ev.push_back("… and " + std::to_string(pairs.size() - kEvidencePairs) + " more pairs");
}

CheckRow ConnectivityRow(const ClusterCheckInput& in, const std::string& kind, ClusterCheckResult& res) {
  const bool rendezvous = kind == "rendezvous";
  const PairTable& t = rendezvous ? in.rendezvous : in.agent_mesh;
  MeshView v{in, t, rendezvous};
  CheckRow r{
      rendezvous ? "connectivity: rendezvous port " + std::to_string(in.master_port) : "connectivity: agent port",
      CheckStatus::kOk,
      "",
      {},
      ""};
  const size_t n = in.nodes.size();
  const size_t rows = std::min(n, t.rows());
  const size_t cols = rendezvous ? std::min<size_t>(1, t.cols()) : std::min(n, t.cols());
  // Counts per (node as target, outcome) and (node as source, outcome): O(N²) over one byte each.
  std::vector<std::array<uint32_t, kOutcomes>> failed_to(n), failed_from(n);
  std::vector<uint32_t> probed_to(n, 0), probed_from(n, 0);
  std::vector<std::pair<size_t, size_t>> failures;
  size_t ok = 0, retried = 0;
  // Timeouts of a node whose neighbour table overflowed while it probed: its SYNs may never have
  // left, so they prove no firewall (RESOURCE_LIMIT below names the node instead).
  std::map<size_t, uint32_t> unproven;
  for (size_t i = 0; i < rows; ++i) {
    for (size_t c = 0; c < cols; ++c) {
      if (!t.known(i, c)) continue;
      size_t j = v.target(c);
      ++probed_to[j];
      ++probed_from[i];
      if (t.retried(i, c)) ++retried;
      net::ConnectOutcome o = t.outcome(i, c);
      if (o == net::ConnectOutcome::kOk) {
        ++ok;
        continue;
      }
      if (o == net::ConnectOutcome::kTimeout && in.nodes[i].neigh_table_fulls > 0) {
        ++unproven[i];
        continue;
      }
      ++failed_to[j][static_cast<size_t>(o)];
      ++failed_from[i][static_cast<size_t>(o)];
      failures.emplace_back(i, c);
    }
  }
  if (n <= kMatrixMaxNodes) {
    auto& m = res.matrix[kind];
    m.assign(n, std::vector<std::string>(rendezvous ? 1 : n, "?"));
    for (size_t i = 0; i < n; ++i) {
      for (size_t c = 0; c < m[i].size(); ++c) {
        if (i == v.target(c)) {
          m[i][c] = "-";
        } else if (i < rows && c < cols) {
          m[i][c] = Cell(t, i, c);
        }
      }
    }
  }
  // A node whose port fails from most of the cluster, or which reaches little of it, is one
  // finding: at 4,000 nodes one firewall makes thousands of failing pairs.
  auto dominant = [](const std::array<uint32_t, kOutcomes>& counts, uint32_t probed) -> int {
    for (size_t o = 1; o < kOutcomes; ++o) {
      if (counts[o] >= 2 && counts[o] >= kBlockedNodeShare * probed) return static_cast<int>(o);
    }
    return -1;
  };
  std::vector<int> blocked_to(n, -1), blocked_from(n, -1);
  for (size_t j = 0; j < n; ++j) blocked_to[j] = dominant(failed_to[j], probed_to[j]);
  if (!rendezvous) {
    for (size_t i = 0; i < n; ++i) blocked_from[i] = dominant(failed_from[i], probed_from[i]);
  }
  std::map<size_t, std::vector<std::pair<size_t, size_t>>> by_target, by_source;
  std::vector<std::pair<size_t, size_t>> single;
  for (const auto& [i, c] : failures) {
    size_t j = v.target(c);
    int o = static_cast<int>(t.outcome(i, c));
    if (blocked_to[j] == o) {
      by_target[j].push_back({i, c});
    } else if (blocked_from[i] == o) {
      by_source[i].push_back({i, c});
    } else {
      single.push_back({i, c});
    }
  }
  for (const auto& [j, pairs] : by_target) {
    const NodeProbe& to = in.nodes[j];
    auto o = static_cast<net::ConnectOutcome>(blocked_to[j]);
    size_t col = rendezvous ? 0 : j;
    Finding f;
    f.code = Words(o).code;
    f.severity = Severity::kError;
    f.nodes = {to.name};
    f.summary = v.what(col) + " on " + to.name + " (" + to.address + "): connections from " +
                std::to_string(pairs.size()) + " of " + std::to_string(probed_to[j]) + " nodes " + Words(o).phrase;
    AddPairEvidence(v, pairs, f.evidence);
    std::string port = std::to_string(v.port(col));
    if (o == net::ConnectOutcome::kRefused && !v.listening(col)) {
      f.remedy = "nothing listens on " + to.name + " port " + port + ": start the service there";
    } else if (o == net::ConnectOutcome::kUnresolved) {
      f.remedy = "make " + to.address + " resolvable on every node (DNS or /etc/hosts)";
    } else if (o == net::ConnectOutcome::kUnreachable) {
      f.remedy =
          "check the routes to " + to.address + " (ip route get " + to.address + ") and " + to.name + "'s interface";
    } else {
      f.remedy = "allow TCP " + port + " into " + to.name + " from the cluster (on " + to.name +
                 ": iptables -I INPUT -p tcp --dport " + port + " -j ACCEPT; also check cloud security groups)";
    }
    r.details.push_back(f.summary);
    res.findings.push_back(std::move(f));
  }
  for (const auto& [i, pairs] : by_source) {
    const NodeProbe& from = in.nodes[i];
    auto o = static_cast<net::ConnectOutcome>(blocked_from[i]);
    Finding f;
    f.code = Words(o).code;
    f.severity = Severity::kError;
    f.nodes = {from.name};
    f.summary = from.name + " (" + from.address + "): its connections to " + std::to_string(pairs.size()) + " of " +
                std::to_string(probed_from[i]) + " nodes' agent ports " + Words(o).phrase;
    AddPairEvidence(v, pairs, f.evidence);
    f.remedy = "check what " + from.name +
               " does to outgoing TCP (iptables -L OUTPUT -n on it, security groups, routes and DNS there)";
    r.details.push_back(f.summary);
    res.findings.push_back(std::move(f));
  }
  std::map<std::string, std::vector<std::pair<size_t, size_t>>> overflow;  // code → pairs past the cap
  for (size_t k = 0; k < single.size(); ++k) {
    auto [i, c] = single[k];
    if (k >= kMaxPairFindings) {
      overflow[Words(t.outcome(i, c)).code].push_back(single[k]);
      continue;
    }
    Finding f = PairFinding(v, i, c);
    r.details.push_back(f.summary);
    res.findings.push_back(std::move(f));
  }
  for (const auto& [code, pairs] : overflow) {
    Finding f;
    f.code = code;
    f.severity = Severity::kError;
    f.summary = std::to_string(pairs.size()) + " more failing pairs (" + kind + " port) beyond the first " +
                std::to_string(kMaxPairFindings) + " findings";
    std::set<std::string> names;
    for (const auto& [i, c] : pairs) {
      if (names.size() < 16) names.insert(in.nodes[i].name);
      if (names.size() < 16) names.insert(in.nodes[v.target(c)].name);
    }
    f.nodes.assign(names.begin(), names.end());
    AddPairEvidence(v, pairs, f.evidence);
    f.remedy =
        "the JSON report (--json) lists every failed pair under \"connectivity\"; fix the firewall rules "
        "they share";
    r.details.push_back(f.summary);
    res.findings.push_back(std::move(f));
  }
  r.summary = std::to_string(ok) + " of " + std::to_string(ok + failures.size()) + " connections ok";
  if (retried > 0) {
    r.summary += ", " + std::to_string(retried) + " only on a second try";
    r.details.push_back(std::to_string(retried) +
                        " connect probes timed out once and were tried again: a listen queue that overflowed, or "
                        "packet loss; only those that timed out twice count as blocked");
  }
  for (size_t i = 0; i < n; ++i) {
    if (!in.nodes[i].ping_error.empty()) {
      r.status = std::max(r.status, CheckStatus::kWarn);
      r.details.push_back(in.nodes[i].name + ": no probe results (" + in.nodes[i].ping_error + ")");
    }
  }
  if (!failures.empty()) {
    r.status = CheckStatus::kFail;
    r.remedy =
        "DROP = timed out twice (firewall drops), RST = refused (REJECT rule or no listener), UNR = no route, "
        "DNS = name not resolved";
  }
  if (!unproven.empty()) {
    // One finding for the nodes whose kernel could not hold their peers' addresses.
    Finding f;
    f.code = codes::kResourceLimit;
    f.severity = Severity::kError;
    uint32_t total = 0;
    uint64_t thresh = 0;
    for (const auto& [i, count] : unproven) {
      total += count;
      thresh = std::max(thresh, in.nodes[i].neigh_gc_thresh3);
      if (f.nodes.size() < 16) f.nodes.push_back(in.nodes[i].name);
      if (f.evidence.size() < 8)
        f.evidence.push_back(in.nodes[i].name + ": neighbour table full " +
                             std::to_string(in.nodes[i].neigh_table_fulls) + " times during its probes, " +
                             std::to_string(count) + " connects timed out (gc_thresh3 " +
                             std::to_string(in.nodes[i].neigh_gc_thresh3) + ")");
    }
    f.summary = "the kernel's neighbour (ARP/NDP) table overflowed on " +
                (unproven.size() == 1 ? f.nodes[0] : std::to_string(unproven.size()) + " nodes") +
                " while probing: " + std::to_string(total) +
                " timed-out connects are not proof of a firewall (packets to peers the table could not hold "
                "were dropped before leaving), and NCCL's connections would meet the same drops";
    f.remedy =
        "raise the neighbour table above the number of hosts a node talks to on its subnet, on every node: "
        "sysctl -w net.ipv4.neigh.default.gc_thresh1=" +
        std::to_string(std::max<uint64_t>(thresh, 1024) * 2) +
        " net.ipv4.neigh.default.gc_thresh2=" + std::to_string(std::max<uint64_t>(thresh, 1024) * 4) +
        " net.ipv4.neigh.default.gc_thresh3=" + std::to_string(std::max<uint64_t>(thresh, 1024) * 8) +
        " (and the net.ipv6.neigh ones), then run the check again; `dmesg` shows 'neighbor table "
        "overflow'";
    r.status = CheckStatus::kFail;
    r.details.push_back(f.summary);
    res.findings.push_back(std::move(f));
  }
  return r;
}

CheckRow AllReduceRow(const ClusterCheckInput& in, std::vector<Finding>& out) {
  const BandwidthInput& bw = in.bandwidth;
  CheckRow r{"all-reduce bandwidth", CheckStatus::kOk, "", {}, ""};
  if (!bw.note.empty()) r.details.push_back(bw.note);
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
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < n; ++i) index.emplace(in.nodes[i].name, i);
  auto index_of = [&](const std::string& name) -> size_t {
    auto it = index.find(name);
    return it == index.end() ? n : it->second;
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
  std::vector<std::vector<std::string>> unused;
  auto& m = n <= kMatrixMaxNodes ? res.matrix["p2p"] : unused;
  if (n <= kMatrixMaxNodes) m.assign(n, std::vector<std::string>(n, "?"));
  for (size_t i = 0; i < m.size(); ++i) m[i][i] = "-";
  std::map<std::string, int> pairs_of, low_of;
  std::vector<const P2pResult*> low;
  char buf[200];
  for (const auto& p : bw.p2p) {
    size_t i = index_of(p.from), j = index_of(p.to);
    if (i == n || j == n) continue;
    if (!p.error.empty()) {
      if (!m.empty()) m[i][j] = "ERR";
      r.details.push_back(p.from + " -> " + p.to + ": " + p.error);
      r.status = CheckStatus::kFail;
      continue;
    }
    ++pairs_of[p.from];
    ++pairs_of[p.to];
    bool is_low = p.gbit_s < threshold;
    std::snprintf(buf, sizeof buf, "%s%.2f", is_low ? "LOW " : "", p.gbit_s);
    if (!m.empty()) m[i][j] = buf;
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

void PairTable::Resize(size_t rows, size_t cols) {
  rows_ = rows;
  cols_ = cols;
  cells_.assign(rows * cols, kUnknown);
  latency_10us_.assign(rows <= kMatrixMaxNodes ? rows * cols : 0, 0);
  latency_10us_.shrink_to_fit();
  extra_.clear();
}

void PairTable::Set(size_t from, size_t to, net::ConnectOutcome outcome, double latency_ms, bool retried,
                    std::string error) {
  if (from >= rows_ || to >= cols_) return;
  size_t k = from * cols_ + to;
  cells_[k] = static_cast<uint8_t>(static_cast<uint8_t>(outcome) | (retried ? kRetried : 0));
  if (latency_10us_.empty()) {  // a large table: only what a report shows
    if (!error.empty() || outcome != net::ConnectOutcome::kOk || retried)
      extra_[k] = Extra{std::move(error), static_cast<float>(latency_ms)};
    else
      extra_.erase(k);
    return;
  }
  double steps = std::max(0.0, latency_ms * 100.0 + 0.5);
  bool on_side = !error.empty() || steps >= kLatencyOnSide;
  latency_10us_[k] = on_side ? kLatencyOnSide : static_cast<uint16_t>(steps);
  if (on_side)
    extra_[k] = Extra{std::move(error), static_cast<float>(latency_ms)};
  else
    extra_.erase(k);
}

double PairTable::latency_ms(size_t from, size_t to) const {
  size_t k = from * cols_ + to;
  if (!latency_10us_.empty() && latency_10us_[k] != kLatencyOnSide) return latency_10us_[k] / 100.0;
  auto it = extra_.find(k);
  return it == extra_.end() ? 0.0 : it->second.latency_ms;
}

const std::string& PairTable::error(size_t from, size_t to) const {
  static const std::string kNone;
  auto it = extra_.find(from * cols_ + to);
  return it == extra_.end() ? kNone : it->second.error;
}

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
    if (in.slurm && check == AgentsRow) {  // Slurm's view of the nodes, beside the agents'
      before = res.findings.size();
      add(SlurmRow(in, res.findings), before);
    }
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
  // No agent answered: every row past the plan and the agents rests on no node at all, and none may
  // read "ok" (a check that reached no host is never green).
  if (std::none_of(in.nodes.begin(), in.nodes.end(), [](const NodeProbe& n) { return Reachable(n); })) {
    for (auto& row : res.rows) {
      if (row.name == "plan" || row.name == "agents" || row.name == "Slurm nodes" || row.status == CheckStatus::kFail)
        continue;
      row.status = CheckStatus::kInfo;
      row.summary = "not checked: no node's agent answered";
      row.details.clear();
    }
  }
  diagnosis::SortBySeverity(res.findings);
  log::Get("agent")->debug("cluster check: {} rows, {} findings", res.rows.size(), res.findings.size());
  return res;
}

std::string RenderClusterText(const ClusterCheckInput& in, const ClusterCheckResult& res, bool color) {
  std::ostringstream out;
  out << probe::RenderChecksText("dsdoctor check: " + std::to_string(in.nodes.size()) + " nodes" +
                                     (in.simulated ? " (" + std::string(kSimulatedLabel) + ")" : ""),
                                 res.rows, {color});
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
  if (in.nodes.size() > kMatrixMaxNodes) {
    out << "\n(" << in.nodes.size() << " nodes: no node×node matrix beyond " << kMatrixMaxNodes
        << "; the findings name every failing node or pair, and --json lists each failed pair)\n";
  }
  if (!in.bandwidth.allreduce.empty()) {
    out << "\nall-reduce, " << in.bandwidth.backend << (in.bandwidth.mode.empty() ? "" : " (" + in.bandwidth.mode + ")")
        << ", " << in.bandwidth.ranks << " ranks (nccl-tests columns)\n"
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

namespace {
json ClusterJsonFrom(const ClusterCheckInput& in, const ClusterCheckResult& res, std::vector<json>* moved_reports,
                     bool with_nodes = true);

json NodeJson(const NodeProbe& n, json report) {
  if (!n.report_rest.empty() && report.is_object()) {
    json rest = json::from_cbor(n.report_rest, true, false);
    if (rest.is_object()) report.merge_patch(rest);  // objects merge key by key, down the tree
  }
  return {{"name", n.name},
          {"address", n.address},
          {"agent_port", n.agent_port},
          {"slots", n.slots},
          {"reachable", n.error.empty()},
          {"error", n.error},
          {"report", std::move(report)}};
}
}  // namespace

Status WriteClusterJson(ClusterCheckInput&& in, const ClusterCheckResult& res, const PartSink& emit) {
  const std::string text = ClusterJsonFrom(in, res, nullptr, false).dump(2, ' ', false, json::error_handler_t::replace);
  static const std::string kMarker = "\n  \"nodes\": []";
  size_t at = text.find(kMarker);
  if (at == std::string::npos) return Internal("cluster JSON without its nodes list");
  DSD_RETURN_IF_ERROR(emit(std::string_view(text).substr(0, at)));
  DSD_RETURN_IF_ERROR(emit("\n  \"nodes\": ["));
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    std::string node =
        NodeJson(in.nodes[i], std::move(in.nodes[i].report)).dump(2, ' ', false, json::error_handler_t::replace);
    std::string indented = i ? ",\n    " : "\n    ";
    indented.reserve(node.size() + node.size() / 8);
    for (char c : node) {
      indented += c;
      if (c == '\n') indented += "    ";
    }
    DSD_RETURN_IF_ERROR(emit(indented));
  }
  DSD_RETURN_IF_ERROR(emit(in.nodes.empty() ? "]" : "\n  ]"));
  DSD_RETURN_IF_ERROR(emit(std::string_view(text).substr(at + kMarker.size())));
  return emit("\n");
}

json ClusterJson(ClusterCheckInput&& in, const ClusterCheckResult& res) {
  std::vector<json> reports;
  reports.reserve(in.nodes.size());
  for (auto& n : in.nodes) reports.push_back(std::move(n.report));
  return ClusterJsonFrom(in, res, &reports);
}

json ClusterJson(const ClusterCheckInput& in, const ClusterCheckResult& res) {
  return ClusterJsonFrom(in, res, nullptr);
}

namespace {

json ClusterJsonFrom(const ClusterCheckInput& in, const ClusterCheckResult& res, std::vector<json>* moved_reports,
                     bool with_nodes) {
  json nodes = json::array();
  for (size_t i = 0; with_nodes && i < in.nodes.size(); ++i) {
    const NodeProbe& n = in.nodes[i];
    nodes.push_back(NodeJson(n, moved_reports ? std::move((*moved_reports)[i]) : n.report));
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
                    {"mode", bw.mode},
                    {"note", bw.note},
                    {"ranks", bw.ranks},
                    {"allreduce", allreduce},
                    {"avg_busbw_gbps", probe::AvgBusBw(bw.allreduce)},
                    {"allreduce_error", bw.allreduce_error},
                    {"p2p", p2p}};
  json connectivity = json::object();
  for (const char* kind : {"agent", "rendezvous"}) {
    bool rendezvous = std::string(kind) == "rendezvous";
    const PairTable& t = rendezvous ? in.rendezvous : in.agent_mesh;
    size_t probed = 0, ok = 0, retried = 0, omitted = 0;
    json failed = json::array();
    for (size_t i = 0; i < t.rows() && i < in.nodes.size(); ++i) {
      for (size_t c = 0; c < t.cols(); ++c) {
        if (!t.known(i, c)) continue;
        ++probed;
        retried += t.retried(i, c);
        if (t.outcome(i, c) == net::ConnectOutcome::kOk) {
          ++ok;
          continue;
        }
        if (failed.size() >= kMaxJsonFailedPairs) {
          ++omitted;
          continue;
        }
        size_t j = rendezvous ? 0 : c;
        if (j >= in.nodes.size()) continue;
        failed.push_back({{"from", in.nodes[i].name},
                          {"to", in.nodes[j].name},
                          {"port", rendezvous ? in.master_port : in.nodes[j].agent_port},
                          {"outcome", net::ConnectOutcomeName(t.outcome(i, c))},
                          {"latency_ms", t.latency_ms(i, c)},
                          {"retried", t.retried(i, c)},
                          {"error", t.error(i, c)}});
      }
    }
    connectivity[kind] = {
        {"probed", probed}, {"ok", ok}, {"retried", retried}, {"failed", failed}, {"failed_omitted", omitted}};
  }
  return {{"schema", "dsdoctor.check/1"},
          {"master_port", in.master_port},
          {"simulated", in.simulated},  // the local launcher's nodes: this machine only (kSimulatedLabel)
          {"nodes", nodes},
          {"checks", probe::ChecksJson(res.rows)},
          {"findings", findings},
          {"matrix", res.matrix},
          {"connectivity", connectivity},
          {"bandwidth", bandwidth},
          {"summary",
           {{"fail", counts.fail},
            {"warn", counts.warn},
            {"findings", res.findings.size()},
            {"exit_code", ClusterExitCode(res)}}}};
}

}  // namespace

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

void CompactReport(NodeProbe& node) {
  if (!node.report.is_object()) return;
  json rest = json::object();
  for (auto it = node.report.begin(); it != node.report.end();) {
    if (it.key() == "inventory") {
      ++it;
      continue;
    }
    rest[it.key()] = std::move(it.value());
    it = node.report.erase(it);
  }
  // The interface list is the biggest part of an inventory, and read only when a bootstrap failed.
  if (auto inv = node.report.find("inventory"); inv != node.report.end() && inv->is_object())
    if (auto sys = inv->find("system"); sys != inv->end() && sys->is_object())
      if (auto nics = sys->find("interfaces"); nics != sys->end() && nics->is_array()) {
        rest["inventory"]["system"]["interfaces"] = std::move(*nics);
        sys->erase(nics);
      }
  if (!rest.empty()) node.report_rest = json::to_cbor(rest);
}

int ClusterExitCode(const ClusterCheckResult& res) { return probe::ReportExitCode(res.rows); }

int ReportedGpus(const NodeProbe& node) { return static_cast<int>(Num(Field(Inv(node), "cuda"), "device_count")); }
int ReportedCpus(const NodeProbe& node) { return static_cast<int>(Num(Field(Inv(node), "system"), "cpus")); }
std::string ReportedHostname(const NodeProbe& node) { return JsonString(Field(Inv(node), "system"), "hostname"); }

std::string SharedGpu(const std::vector<NodeProbe>& nodes, const std::vector<size_t>& idx,
                      const std::vector<int>& gpus) {
  std::map<std::string, std::string> owner;  // GPU → the first node that uses it
  for (size_t k = 0; k < idx.size() && k < gpus.size(); ++k) {
    const NodeProbe& node = nodes[idx[k]];
    const json& list = Arr(Field(Inv(node), "nvml"), "gpus");
    // CUDA's own view of device d (its CUDA_VISIBLE_DEVICES applied) comes first; NVML's list is
    // every GPU in NVML's order, right only where nothing hides or reorders devices.
    const json& bus_ids = Arr(Field(Inv(node), "cuda"), "pci_bus_ids");
    const std::string host = ReportedHostname(node);
    for (int d = 0; d < gpus[k]; ++d) {
      const size_t i = static_cast<size_t>(d);
      const std::string bus = i < bus_ids.size() && bus_ids[i].is_string() ? bus_ids[i].get<std::string>() : "";
      const std::string uuid = i < list.size() ? JsonString(list[i], "uuid") : "";
      const std::string gpu = !bus.empty() && !host.empty() ? host + " PCI " + bus
                              : !uuid.empty()               ? uuid
                              : host.empty()                ? ""
                                                            : host + " GPU " + std::to_string(d);
      if (gpu.empty()) continue;  // nothing to tell it by
      auto [it, fresh] = owner.emplace(gpu, node.name);
      if (!fresh) return it->second + " and " + node.name + " both have GPU " + gpu;
    }
  }
  return "";
}

}  // namespace dsd::agent
