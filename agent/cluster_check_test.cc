#include "agent/cluster_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

namespace dsd::agent {
namespace {

using nlohmann::json;

json Report(const std::string& host, const std::string& nccl, const std::string& cuda, json env = json::object(),
            int gpus = 0) {
  json gpu_list = json::array();
  for (int i = 0; i < gpus; ++i) gpu_list.push_back({{"index", i}});
  return {
      {"inventory",
       {{"system",
         {{"hostname", host}, {"interfaces", json::array({{{"name", "eth0"}, {"up", true}, {"loopback", false}}})}}},
        {"nccl", {{"found", !nccl.empty()}, {"version", nccl}, {"path", "/lib/libnccl.so.2"}}},
        {"nccl_bootstrap", {{"ran", !nccl.empty()}, {"ok", true}, {"interface", "eth0"}, {"address", "198.18.0.1"}}},
        {"cuda", {{"runtime_found", true}, {"runtime_version", cuda}, {"driver_version", "none"}}},
        {"nvml", {{"gpus", gpu_list}}},
        {"env", env},
        {"deepspeed_env", json::array()}}}};
}

ClusterCheckInput Cluster(std::vector<json> reports) {
  ClusterCheckInput in;
  for (size_t i = 0; i < reports.size(); ++i) {
    NodeProbe n;
    n.name = "node-" + std::to_string(i);
    n.address = "198.18.0." + std::to_string(i + 1);
    n.report = reports[i];
    in.nodes.push_back(n);
  }
  return in;
}

std::vector<diagnosis::Finding> WithCode(const ClusterCheckResult& r, const std::string& code) {
  std::vector<diagnosis::Finding> out;
  for (const auto& f : r.findings) {
    if (f.code == code) out.push_back(f);
  }
  return out;
}

TEST(ClusterCheckTest, HealthyClusterHasNoFindings) {
  auto r = EvaluateCluster(Cluster({Report("a", "2.21.5", "12.4"), Report("b", "2.21.5", "12.4")}));
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(ClusterExitCode(r), 0);
}

// Slurm's own view of the allocation: a drained or unresponsive node is named with Slurm's reason
// and the remedy, although every probe of it passed; healthy states pass; no row outside Slurm.
TEST(ClusterCheckTest, ADrainedOrDownSlurmNodeIsNamedWithSlurmsReason) {
  auto in = Cluster({Report("a", "2.21.5", "12.4"), Report("b", "2.21.5", "12.4"), Report("c", "2.21.5", "12.4")});
  auto rows_named = [](const ClusterCheckResult& r) {
    int n = 0;
    for (const auto& row : r.rows) n += row.name == "Slurm nodes";
    return n;
  };
  EXPECT_EQ(rows_named(EvaluateCluster(in)), 0);
  in.slurm = true;
  in.slurm_nodes = {{"node-0", "mixed", "none"}, {"node-1", "draining", "bad gpu"}, {"node-2", "idle*", ""}};
  auto r = EvaluateCluster(in);
  ASSERT_EQ(rows_named(r), 1);
  auto f = WithCode(r, "SLURM_NODE_STATE");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"node-1"});
  EXPECT_NE(f[0].summary.find("draining (reason: bad gpu)"), std::string::npos) << f[0].summary;
  EXPECT_NE(f[0].remedy.find("state=resume"), std::string::npos);
  EXPECT_EQ(f[1].nodes, std::vector<std::string>{"node-2"});
  EXPECT_EQ(ClusterExitCode(r), 1);
  in.slurm_nodes = {{"node-0", "allocated", ""}, {"node-1", "mixed", ""}, {"node-2", "allocated", ""}};
  EXPECT_TRUE(WithCode(EvaluateCluster(in), "SLURM_NODE_STATE").empty());
  in.slurm_nodes.clear();
  in.slurm_error = "`sinfo` failed (exit 1): slurm_load_node: Unable to contact slurm controller";
  auto unasked = EvaluateCluster(in);
  for (const auto& row : unasked.rows)
    if (row.name == "Slurm nodes") EXPECT_NE(row.summary.find("Unable to contact"), std::string::npos);
}

// More ranks planned on a node than the GPUs Slurm granted it (SLURM_GPUS_ON_NODE): named with the
// nodes and both remedies; as many ranks as GPUs passes.
TEST(ClusterCheckTest, MoreRanksThanSlurmGrantedGpusIsNamed) {
  auto in = Cluster({Report("a", "2.21.5", "12.4"), Report("b", "2.21.5", "12.4")});
  in.slurm = true;
  in.slurm_nodes = {{"node-0", "allocated", ""}, {"node-1", "allocated", ""}};
  in.slurm_gpus_per_node = 4;
  in.slurm_gpus_from = "SLURM_GPUS_ON_NODE=4";
  in.nodes[0].slots = 4;
  in.nodes[1].slots = 8;
  auto f = WithCode(EvaluateCluster(in), "SLOTS_EXCEED_GPUS");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"node-1"});
  EXPECT_NE(f[0].summary.find("granted 4 GPUs per node but 8 ranks"), std::string::npos) << f[0].summary;
  EXPECT_NE(f[0].remedy.find("--gpus-per-node=8"), std::string::npos) << f[0].remedy;
  EXPECT_NE(f[0].remedy.find("--ntasks-per-node=4"), std::string::npos) << f[0].remedy;
  EXPECT_EQ(f[0].evidence, std::vector<std::string>{"SLURM_GPUS_ON_NODE=4"});
  in.nodes[1].slots = 4;
  EXPECT_TRUE(WithCode(EvaluateCluster(in), "SLOTS_EXCEED_GPUS").empty());
}

TEST(ClusterCheckTest, NcclVersionMismatchListsWhichNodeHasWhich) {
  auto r = EvaluateCluster(
      Cluster({Report("a", "2.21.5", "12.4"), Report("b", "2.18.3", "12.4"), Report("c", "2.21.5", "12.4")}));
  auto f = WithCode(r, "NCCL_VERSION_MISMATCH");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].summary, "NCCL versions differ: 2.18.3 on node-1; 2.21.5 on node-0, node-2");
  EXPECT_EQ(ClusterExitCode(r), 1);
  // The row carries its finding code, which JUnit uses as the failure type.
  auto row =
      std::find_if(r.rows.begin(), r.rows.end(), [](const probe::CheckRow& x) { return x.name == "NCCL version"; });
  ASSERT_NE(row, r.rows.end());
  EXPECT_EQ(row->codes, std::vector<std::string>{"NCCL_VERSION_MISMATCH"});
  EXPECT_NE(RenderJUnit(r, 0).find("<failure type=\"NCCL_VERSION_MISMATCH\""), std::string::npos);
}

TEST(ClusterCheckTest, NcclMissingOnSomeNodesIsAnError) {
  auto r = EvaluateCluster(Cluster({Report("a", "2.21.5", "12.4"), Report("b", "", "12.4")}));
  auto f = WithCode(r, "NCCL_MISSING");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, diagnosis::Severity::kError);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"node-1"});
  auto none = EvaluateCluster(Cluster({Report("a", "", "12.4"), Report("b", "", "12.4")}));
  EXPECT_EQ(WithCode(none, "NCCL_MISSING")[0].severity, diagnosis::Severity::kWarning);
}

TEST(ClusterCheckTest, CudaMismatchDuplicateHostnamesAndSlots) {
  auto in = Cluster({Report("same", "2.21.5", "12.4", {}, 2), Report("same", "2.21.5", "12.1", {}, 8)});
  in.nodes[0].slots = 4;
  auto r = EvaluateCluster(in);
  EXPECT_EQ(WithCode(r, "CUDA_VERSION_MISMATCH").size(), 1u);
  auto dup = WithCode(r, "DUPLICATE_HOSTNAME");
  ASSERT_EQ(dup.size(), 1u);
  EXPECT_EQ(dup[0].nodes, (std::vector<std::string>{"node-0", "node-1"}));
  auto slots = WithCode(r, "SLOTS_EXCEED_GPUS");
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(slots[0].summary, "node-0 has slots=4 but 2 GPUs");
  in.simulated = true;  // one machine: same hostname is expected
  EXPECT_TRUE(WithCode(EvaluateCluster(in), "DUPLICATE_HOSTNAME").empty());
}

TEST(ClusterCheckTest, EnvMismatchNamesTheVariableAndValues) {
  auto r = EvaluateCluster(Cluster(
      {Report("a", "2.21.5", "12.4", {{"NCCL_IB_DISABLE", "1"}}), Report("b", "2.21.5", "12.4", json::object())}));
  auto f = WithCode(r, "ENV_MISMATCH");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].evidence, (std::vector<std::string>{"node-0: NCCL_IB_DISABLE=1", "node-1: NCCL_IB_DISABLE=(unset)"}));
}

TEST(ClusterCheckTest, UnreachableAgentIsReportedAndSkippedElsewhere) {
  auto in = Cluster({Report("a", "2.21.5", "12.4"), json()});
  in.nodes[1].error = "connect timeout";
  auto r = EvaluateCluster(in);
  auto f = WithCode(r, "AGENT_UNREACHABLE");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"node-1"});
  EXPECT_TRUE(WithCode(r, "NCCL_MISSING").empty());
}

using net::ConnectOutcome;

// n healthy nodes with every agent pair and the rendezvous port probed ok (1 ms).
ClusterCheckInput Mesh(size_t n) {
  std::vector<json> reports;
  for (size_t i = 0; i < n; ++i) reports.push_back(Report("h" + std::to_string(i), "", "12.4"));
  auto in = Cluster(reports);
  in.agent_mesh.Resize(n, n);
  in.rendezvous.Resize(n, 1);
  for (size_t i = 0; i < n; ++i) {
    in.nodes[i].agent_port = 47000;
    in.nodes[i].listening = {47000};
    for (size_t j = 0; j < n; ++j) {
      if (i != j) in.agent_mesh.Set(i, j, ConnectOutcome::kOk, 1.0, false);
    }
    if (i != 0) in.rendezvous.Set(i, 0, ConnectOutcome::kOk, 1.0, false);
  }
  if (n > 0) in.nodes[0].listening.push_back(29500);
  return in;
}

// Timeouts from a node whose kernel neighbour table overflowed while it probed (more peers on the
// subnet than gc_thresh3): its SYNs may never have left. No PORT_BLOCKED, a RESOURCE_LIMIT naming
// the node and the sysctls instead; another node's timeouts stay PORT_BLOCKED.
TEST(ClusterCheckTest, TimeoutsDuringANeighbourTableOverflowAreNotAFirewall) {
  auto in = Mesh(4);
  in.agent_mesh.Set(1, 2, ConnectOutcome::kTimeout, 2000.0, true, "no answer within 2000 ms, twice");
  in.agent_mesh.Set(1, 3, ConnectOutcome::kTimeout, 2000.0, true, "no answer within 2000 ms, twice");
  in.nodes[1].neigh_table_fulls = 7;
  in.nodes[1].neigh_gc_thresh3 = 1024;
  auto r = EvaluateCluster(in);
  EXPECT_TRUE(WithCode(r, "PORT_BLOCKED").empty());
  auto f = WithCode(r, "RESOURCE_LIMIT");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"node-1"});
  EXPECT_NE(f[0].summary.find("neighbour (ARP/NDP) table overflowed on node-1"), std::string::npos) << f[0].summary;
  EXPECT_NE(f[0].remedy.find("gc_thresh3=8192"), std::string::npos) << f[0].remedy;
  EXPECT_EQ(ClusterExitCode(r), 1);
  in.nodes[1].neigh_table_fulls = 0;
  EXPECT_EQ(WithCode(EvaluateCluster(in), "PORT_BLOCKED").size(), 2u);
}

TEST(ClusterCheckTest, ConnectivityOutcomesMapToCodes) {
  auto in = Mesh(3);
  in.agent_mesh.Set(0, 1, ConnectOutcome::kUnreachable, 1.0, false, "No route to host");
  in.agent_mesh.Set(0, 2, ConnectOutcome::kUnresolved, 1.0, false, "cannot resolve");
  in.agent_mesh.Set(1, 0, ConnectOutcome::kRefused, 1.0, false, "Connection refused");
  in.agent_mesh.Set(2, 1, ConnectOutcome::kTimeout, 2000.0, true, "no answer within 2000 ms, twice");
  in.nodes[1].listening.clear();
  auto r = EvaluateCluster(in);
  EXPECT_EQ(WithCode(r, "HOST_UNREACHABLE").size(), 1u);
  EXPECT_EQ(WithCode(r, "NAME_UNRESOLVED").size(), 1u);
  auto refused = WithCode(r, "PORT_REFUSED");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].summary.find("REJECT rule"), std::string::npos);  // node-0 listens on 47000
  auto blocked = WithCode(r, "PORT_BLOCKED");
  ASSERT_EQ(blocked.size(), 1u);
  EXPECT_EQ(blocked[0].nodes, (std::vector<std::string>{"node-2", "node-1"}));
  EXPECT_NE(blocked[0].evidence[0].find("on the second try too"), std::string::npos) << blocked[0].evidence[0];
  EXPECT_EQ(r.matrix["agent"][2][1], "DROP");
  EXPECT_EQ(r.matrix["agent"][1][2], "ok 1.0ms");
  EXPECT_EQ(r.matrix["agent"][0][0], "-");
  EXPECT_EQ(r.matrix["rendezvous"][1][0], "ok 1.0ms");
  EXPECT_EQ(r.matrix["rendezvous"][0][0], "-");
  // The second try is counted in the row.
  auto row =
      std::find_if(r.rows.begin(), r.rows.end(), [](const auto& x) { return x.name == "connectivity: agent port"; });
  ASSERT_NE(row, r.rows.end());
  EXPECT_EQ(row->summary, "2 of 6 connections ok, 1 only on a second try");
}

TEST(ClusterCheckTest, ANodeBlockedFromEveryoneIsOneFinding) {
  auto in = Mesh(40);
  for (size_t i = 0; i < 40; ++i) {
    if (i != 7) in.agent_mesh.Set(i, 7, ConnectOutcome::kTimeout, 2000.0, true, "no answer");
  }
  auto r = EvaluateCluster(in);
  auto blocked = WithCode(r, "PORT_BLOCKED");
  ASSERT_EQ(blocked.size(), 1u);
  EXPECT_EQ(blocked[0].nodes, std::vector<std::string>{"node-7"});
  EXPECT_NE(
      blocked[0].summary.find("agent port 47000 on node-7 (198.18.0.8): connections from 39 of 39 nodes time out"),
      std::string::npos)
      << blocked[0].summary;
  EXPECT_EQ(blocked[0].evidence.size(), 9u);  // 8 pairs and a count
  EXPECT_EQ(blocked[0].evidence.back(), "… and 31 more pairs");
  EXPECT_NE(blocked[0].remedy.find("iptables -I INPUT -p tcp --dport 47000 -j ACCEPT"), std::string::npos);
}

TEST(ClusterCheckTest, ANodeThatReachesNobodyIsOneFinding) {
  auto in = Mesh(10);
  for (size_t j = 0; j < 10; ++j) {
    if (j != 3) in.agent_mesh.Set(3, j, ConnectOutcome::kUnreachable, 0.1, false, "Network is unreachable");
  }
  in.rendezvous.Set(3, 0, ConnectOutcome::kUnreachable, 0.1, false, "Network is unreachable");
  auto r = EvaluateCluster(in);
  auto f = WithCode(r, "HOST_UNREACHABLE");
  ASSERT_EQ(f.size(), 2u);  // the agent mesh (folded) and the rendezvous port (one pair)
  EXPECT_EQ(f[0].nodes, std::vector<std::string>{"node-3"});
  EXPECT_NE(f[0].summary.find("its connections to 9 of 9 nodes' agent ports find no route"), std::string::npos)
      << f[0].summary;
}

TEST(ClusterCheckTest, ScatteredFailuresPastTheCapAreCounted) {
  auto in = Mesh(100);
  // 120 failing pairs spread so that no node fails for most of its peers.
  for (size_t k = 0; k < 120; ++k) {
    in.agent_mesh.Set(k % 100, (k % 100 + 1 + k / 100) % 100, ConnectOutcome::kTimeout, 2000.0, true, "x");
  }
  auto r = EvaluateCluster(in);
  auto blocked = WithCode(r, "PORT_BLOCKED");
  ASSERT_EQ(blocked.size(), kMaxPairFindings + 1);
  EXPECT_NE(blocked.back().summary.find("more failing pairs"), std::string::npos) << blocked.back().summary;
  EXPECT_TRUE(r.matrix.empty());  // 100 nodes: no matrix
  auto doc = ClusterJson(in, r);
  EXPECT_EQ(doc["connectivity"]["agent"]["failed"].size(), 120u);
  EXPECT_EQ(doc["connectivity"]["agent"]["probed"], 9900u);
  EXPECT_EQ(doc["connectivity"]["agent"]["ok"], 9780u);
  EXPECT_NE(RenderClusterText(in, r, false).find("no node×node matrix"), std::string::npos);
}

// What no row reads leaves the DOM (CBOR on the side) and comes back whole in the JSON report; the
// rows' verdicts do not change.
TEST(ClusterCheckTest, ACompactedReportGivesTheSameVerdictAndDocument) {
  auto in = Cluster({Report("a", "2.21.5", "12.4"), Report("b", "2.18.3", "12.4")});
  for (auto& n : in.nodes) n.report["checks"] = json::array({{{"name", "nics"}, {"status", "ok"}}});
  // node-1's bootstrap failed: its finding names the interfaces it has, which compaction moves out.
  json& inv = in.nodes[1].report["inventory"];
  inv["nccl_bootstrap"] = {{"ran", true}, {"ok", false}, {"interface", ""}, {"warnings", json::array()}};
  inv["system"]["interfaces"] = json::array({{{"name", "ib0"}, {"up", true}, {"loopback", false}}});
  const auto before = EvaluateCluster(in);
  bool names_ib0 = false;
  for (const auto& f : before.findings) names_ib0 |= f.remedy.find("ib0") != std::string::npos;
  EXPECT_TRUE(names_ib0);
  const json doc = ClusterJson(in, before);
  auto compact = in;
  for (auto& n : compact.nodes) CompactReport(n);
  EXPECT_FALSE(compact.nodes[0].report.contains("checks"));
  EXPECT_FALSE(compact.nodes[0].report_rest.empty());
  EXPECT_FALSE(compact.nodes[1].report["inventory"]["system"].contains("interfaces"));
  const auto after = EvaluateCluster(compact);
  EXPECT_EQ(after.findings, before.findings);
  EXPECT_EQ(ClusterJson(compact, after), doc);
}

TEST(ClusterCheckTest, StreamedJsonIsTheSameDocument) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}}) {
    auto in = Mesh(n);
    if (n == 3) in.agent_mesh.Set(1, 2, ConnectOutcome::kTimeout, 2000.0, true, "no answer");
    auto r = EvaluateCluster(in);
    json expected = ClusterJson(in, r);
    std::string text;
    Status st = WriteClusterJson(ClusterCheckInput(in), r, [&](std::string_view part) {
      text += part;
      return Status::Ok();
    });
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n');
    EXPECT_EQ(json::parse(text), expected) << text;
  }
  // A failing sink ends the write with its error.
  auto in = Mesh(2);
  Status st = WriteClusterJson(ClusterCheckInput(in), EvaluateCluster(in),
                               [](std::string_view) { return IoError("disk full"); });
  EXPECT_EQ(st.message(), "disk full");
}

TEST(ClusterCheckTest, ResourceLimitBlamesNoNode) {
  auto in = Cluster({json(), json()});
  in.resource_error = "it needs about 136 open files but ulimit -n is 64 (hard limit 64)";
  for (auto& n : in.nodes) n.error = "not started";
  auto r = EvaluateCluster(in);
  auto f = WithCode(r, "RESOURCE_LIMIT");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].summary.find("ulimit -n is 64"), std::string::npos);
  EXPECT_TRUE(WithCode(r, "AGENT_UNREACHABLE").empty());
  EXPECT_EQ(ClusterExitCode(r), 1);
}

TEST(ClusterCheckTest, MalformedAgentDocumentsNeverThrow) {
  auto in = Cluster({json("not an object"), json{{"inventory", {{"nccl", 5}, {"env", {{"NCCL_X", 3}}}}}}});
  in.agent_mesh.Resize(1, 1);  // smaller than the node list
  EXPECT_NO_THROW((void)EvaluateCluster(in));
}

BandwidthInput Bandwidth(std::vector<std::tuple<std::string, std::string, double>> pairs) {
  BandwidthInput bw;
  bw.ran = true;
  bw.backend = "gloo";
  bw.ranks = 4;
  probe::SizeResult row{1 << 20, 1 << 18, "float", "sum", 1000.0, 0, 0, 0};
  probe::ComputeBandwidth(probe::CollectiveOp::kAllReduce, 4, &row);
  bw.allreduce = {row};
  for (const auto& [from, to, gbit] : pairs) bw.p2p.push_back({from, to, gbit, 1000, 0.3, ""});
  return bw;
}

std::vector<std::tuple<std::string, std::string, double>> AllPairs(const std::string& slow, double slow_gbit) {
  std::vector<std::tuple<std::string, std::string, double>> out;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      std::string from = "node-" + std::to_string(a), to = "node-" + std::to_string(b);
      out.emplace_back(from, to, from == slow || to == slow ? slow_gbit : 10.0);
    }
  }
  return out;
}

TEST(BandwidthRulesTest, SlowNodeIsNamedOnce) {
  auto in =
      Cluster({Report("a", "", "12.4"), Report("b", "", "12.4"), Report("c", "", "12.4"), Report("d", "", "12.4")});
  in.bandwidth = Bandwidth(AllPairs("node-2", 0.05));
  auto r = EvaluateCluster(in);
  auto low = WithCode(r, "BANDWIDTH_LOW");
  ASSERT_EQ(low.size(), 1u);
  EXPECT_EQ(low[0].nodes, std::vector<std::string>{"node-2"});
  EXPECT_EQ(low[0].evidence.size(), 7u);  // six pairs and the rule
  EXPECT_EQ(r.matrix["p2p"][2][0], "LOW 0.05");
  EXPECT_EQ(r.matrix["p2p"][0][1], "10.00");
}

TEST(BandwidthRulesTest, SimulatedNodesUseOnlyTheAbsoluteFloor) {
  auto in =
      Cluster({Report("a", "", "12.4"), Report("b", "", "12.4"), Report("c", "", "12.4"), Report("d", "", "12.4")});
  in.simulated = true;  // --local: one machine's cores, so relative differences are noise
  in.bandwidth = Bandwidth(AllPairs("node-2", 0.05));
  EXPECT_TRUE(WithCode(EvaluateCluster(in), "BANDWIDTH_LOW").empty());
  in.bandwidth.min_p2p_gbit_s = 1;
  auto low = WithCode(EvaluateCluster(in), "BANDWIDTH_LOW");
  ASSERT_EQ(low.size(), 1u);
  EXPECT_EQ(low[0].nodes, std::vector<std::string>{"node-2"});
}

TEST(BandwidthRulesTest, SingleSlowLinkNamesBothEnds) {
  auto in =
      Cluster({Report("a", "", "12.4"), Report("b", "", "12.4"), Report("c", "", "12.4"), Report("d", "", "12.4")});
  auto pairs = AllPairs("", 0);
  for (auto& [from, to, gbit] : pairs) {
    if (from == "node-0" && to == "node-3") gbit = 1.0;
  }
  in.bandwidth = Bandwidth(pairs);
  auto low = WithCode(EvaluateCluster(in), "BANDWIDTH_LOW");
  ASSERT_EQ(low.size(), 1u);
  EXPECT_EQ(low[0].nodes, (std::vector<std::string>{"node-0", "node-3"}));
  EXPECT_NE(low[0].summary.find("link node-0 -> node-3 is slow: 1.000 Gbit/s"), std::string::npos) << low[0].summary;
}

TEST(BandwidthRulesTest, AbsoluteFloorsAndWrongResults) {
  auto in =
      Cluster({Report("a", "", "12.4"), Report("b", "", "12.4"), Report("c", "", "12.4"), Report("d", "", "12.4")});
  in.bandwidth = Bandwidth(AllPairs("", 0));
  EXPECT_TRUE(WithCode(EvaluateCluster(in), "BANDWIDTH_LOW").empty());
  in.bandwidth.min_p2p_gbit_s = 20;  // every pair below the floor: every node is slow
  EXPECT_EQ(WithCode(EvaluateCluster(in), "BANDWIDTH_LOW").size(), 4u);
  in.bandwidth.min_p2p_gbit_s = 0;
  in.bandwidth.min_busbw_gbps = 100;
  auto busbw = WithCode(EvaluateCluster(in), "BANDWIDTH_LOW");
  ASSERT_EQ(busbw.size(), 1u);
  EXPECT_NE(busbw[0].summary.find("below --min-busbw 100.000 GB/s"), std::string::npos);
  in.bandwidth.min_busbw_gbps = 0;
  in.bandwidth.allreduce[0].wrong = 3;
  auto wrong = WithCode(EvaluateCluster(in), "ALLREDUCE_WRONG");
  ASSERT_EQ(wrong.size(), 1u);
  EXPECT_EQ(wrong[0].evidence, std::vector<std::string>{"1048576 B: 3 wrong"});
}

TEST(BandwidthRulesTest, SkippedProbesAreInfoNotFailures) {
  auto in = Cluster({Report("a", "", "12.4")});
  in.bandwidth.skipped = "--no-bandwidth";
  auto r = EvaluateCluster(in);
  for (const auto& row : r.rows) {
    if (row.name == "all-reduce bandwidth" || row.name == "p2p bandwidth") {
      EXPECT_EQ(row.status, probe::CheckStatus::kInfo);
      EXPECT_EQ(row.summary, "not run: --no-bandwidth");
    }
  }
}

TEST(ClusterCheckTest, JUnitEscapesAndCountsFailures) {
  ClusterCheckResult r;
  r.rows = {{"a<b", probe::CheckStatus::kOk, "fine & dandy", {}, ""},
            {"c", probe::CheckStatus::kFail, "bad \"x\"", {"d"}, "fix"}};
  std::string x = RenderJUnit(r, 1.5);
  EXPECT_NE(x.find("tests=\"2\" failures=\"1\""), std::string::npos);
  EXPECT_NE(x.find("name=\"a&lt;b\""), std::string::npos);
  EXPECT_NE(x.find("message=\"bad &quot;x&quot;\""), std::string::npos);
  EXPECT_NE(x.find("fine &amp; dandy"), std::string::npos);
}

}  // namespace
}  // namespace dsd::agent

namespace dsd::agent {
namespace {

// A node's report with the given GPU UUIDs ("" for a GPU NVML gave no UUID for).
NodeProbe GpuNode(const std::string& name, const std::string& host, std::vector<std::string> uuids) {
  json gpus = json::array();
  for (size_t i = 0; i < uuids.size(); ++i) gpus.push_back({{"index", i}, {"uuid", uuids[i]}});
  NodeProbe n;
  n.name = name;
  n.report = {{"inventory", {{"system", {{"hostname", host}}}, {"nvml", {{"gpus", gpus}}}}}};
  return n;
}

TEST(SharedGpuTest, TwoRanksOnOneGpuAreNamed) {
  // `check --local 2` on a one-GPU machine: both simulated nodes see the same device.
  std::vector<NodeProbe> local = {GpuNode("node-0", "box", {"GPU-5e89"}), GpuNode("node-1", "box", {"GPU-5e89"})};
  EXPECT_EQ(SharedGpu(local, {0, 1}, {1, 1}), "node-0 and node-1 both have GPU GPU-5e89");
  // Without NVML's UUIDs the hostname and device index tell them apart.
  std::vector<NodeProbe> no_nvml = {GpuNode("node-0", "box", {""}), GpuNode("node-1", "box", {""})};
  EXPECT_EQ(SharedGpu(no_nvml, {0, 1}, {1, 1}), "node-0 and node-1 both have GPU box GPU 0");
  // Only the GPUs the ranks use count: node-0 uses its first two, the second of which node-2 also has.
  std::vector<NodeProbe> overlap = {GpuNode("node-0", "a", {"GPU-1", "GPU-2", "GPU-3"}),
                                    GpuNode("node-1", "b", {"GPU-9"}), GpuNode("node-2", "c", {"GPU-2"})};
  EXPECT_EQ(SharedGpu(overlap, {0, 1, 2}, {2, 1, 1}), "node-0 and node-2 both have GPU GPU-2");
  EXPECT_EQ(SharedGpu(overlap, {0, 1, 2}, {1, 1, 0}), "");
}

TEST(SharedGpuTest, CudaVisibleDevicesPerAgentAreTold) {
  // Two agents on one 2-GPU host, CUDA_VISIBLE_DEVICES=0 and =1: each has a device 0, and NVML lists
  // both GPUs for both. CUDA's PCI bus ids say they differ; the same id on both is a shared GPU.
  auto node = [](const std::string& name, const std::string& bus) {
    NodeProbe n = GpuNode(name, "box", {"GPU-a", "GPU-b"});
    n.report["inventory"]["cuda"] = {{"device_count", 1}, {"pci_bus_ids", {bus}}};
    return n;
  };
  EXPECT_EQ(SharedGpu({node("node-0", "0000:3b:00.0"), node("node-1", "0000:5e:00.0")}, {0, 1}, {1, 1}), "");
  EXPECT_EQ(SharedGpu({node("node-0", "0000:3b:00.0"), node("node-1", "0000:3b:00.0")}, {0, 1}, {1, 1}),
            "node-0 and node-1 both have GPU box PCI 0000:3b:00.0");
  // The same bus id on two hosts is two GPUs.
  NodeProbe other = node("node-1", "0000:3b:00.0");
  other.report["inventory"]["system"]["hostname"] = "box2";
  EXPECT_EQ(SharedGpu({node("node-0", "0000:3b:00.0"), other}, {0, 1}, {1, 1}), "");
}

TEST(SharedGpuTest, AReportOfTheWrongShapeReadsAsUnknownNotAnException) {
  NodeProbe odd = GpuNode("node-1", "box", {"GPU-1"});
  odd.report["inventory"]["nvml"]["gpus"][0]["uuid"] = 5;         // not a string
  odd.report["inventory"]["system"]["hostname"] = json::array();  // not a string
  odd.report["inventory"]["cuda"] = "twelve";
  NodeProbe none;
  none.name = "node-2";
  none.report = json::array();  // not even an object
  std::vector<NodeProbe> nodes = {GpuNode("node-0", "box", {"GPU-1"}), odd, none};
  EXPECT_EQ(SharedGpu(nodes, {0, 1, 2}, {1, 1, 1}), "");
  EXPECT_EQ(ReportedGpus(odd), 0);
  EXPECT_EQ(ReportedHostname(odd), "");
  EXPECT_EQ(ReportedGpus(none), 0);
  EXPECT_EQ(ReportedCpus(none), 0);
  EXPECT_EQ(ReportedHostname(nodes[0]), "box");
}

TEST(SharedGpuTest, DistinctGpusAreFine) {
  std::vector<NodeProbe> nodes = {GpuNode("node-0", "a", {"GPU-1", "GPU-2"}),
                                  GpuNode("node-1", "b", {"GPU-3", "GPU-4"}), GpuNode("node-2", "c", {"", ""}),
                                  GpuNode("node-3", "d", {"", ""})};
  EXPECT_EQ(SharedGpu(nodes, {0, 1, 2, 3}, {2, 2, 2, 2}), "");
  EXPECT_EQ(SharedGpu(nodes, {}, {}), "");
}

TEST(SharedGpuTest, TheNoteIsShownWithTheAllReduceRow) {
  ClusterCheckInput in;
  in.nodes = {GpuNode("node-0", "box", {"GPU-5e89"}), GpuNode("node-1", "box", {"GPU-5e89"})};
  in.bandwidth.ran = true;
  in.bandwidth.backend = "gloo";
  in.bandwidth.ranks = 2;
  in.bandwidth.note = "NCCL not used: node-0 and node-1 both have GPU GPU-5e89";
  probe::SizeResult row{1 << 20, 1 << 18, "float", "sum", 1000.0, 0, 0, 0};
  probe::ComputeBandwidth(probe::CollectiveOp::kAllReduce, 2, &row);
  in.bandwidth.allreduce = {row};
  auto r = EvaluateCluster(in);
  auto it = std::find_if(r.rows.begin(), r.rows.end(), [](const auto& x) { return x.name == "all-reduce bandwidth"; });
  ASSERT_NE(it, r.rows.end());
  EXPECT_EQ(it->status, probe::CheckStatus::kOk);
  ASSERT_FALSE(it->details.empty());
  EXPECT_EQ(it->details[0], in.bandwidth.note);
  EXPECT_EQ(ClusterJson(in, r)["bandwidth"]["note"], in.bandwidth.note);
}

}  // namespace
}  // namespace dsd::agent
