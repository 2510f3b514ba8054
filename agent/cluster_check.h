// `dsdoctor check` evaluation: from what every agent reported (inventory, connect probes) to check
// rows, findings with remedies, a node×node connectivity matrix, and the text/JSON/JUnit outputs.
// Pure functions over values (no I/O); thread-safe.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "diagnosis/finding.h"
#include "probe/bandwidth.h"
#include "probe/report.h"

namespace dsd::agent {

struct NodeProbe {
  std::string name;
  std::string address;
  int agent_port = 0;
  int slots = 1;
  std::string error;      // non-empty: the agent was not reachable (AGENT_UNREACHABLE)
  nlohmann::json report;  // the agent's `report` document (docs/report-json.md)
  nlohmann::json pings;   // its ping_result reply (docs/agent-protocol.md)
};

struct P2pResult {
  std::string from, to;
  double gbit_s = 0;  // receiver's bytes × 8 / sender's elapsed time (until the receiver's ack)
  uint64_t bytes = 0;
  double seconds = 0;
  std::string error;
};

// Bandwidth probes (docs/check.md): an all-reduce size sweep over every reachable agent and
// point-to-point transfers between node pairs.
struct BandwidthInput {
  bool ran = false;
  std::string skipped;  // why the probes did not run (shown as info)
  std::string backend;  // "gloo"
  int ranks = 0;
  std::vector<probe::SizeResult> allreduce;  // combined over ranks
  std::string allreduce_error;
  std::vector<P2pResult> p2p;
  double min_busbw_gbps = 0;  // 0: no absolute floor
  double min_p2p_gbit_s = 0;  // 0: no absolute floor
};

// BANDWIDTH_LOW for links: a pair below min_p2p_gbit_s, or below kSlowFraction × the median of all
// measured pairs. A node is named (a slow node) when at least kSlowNodeShare of its pairs, as
// sender or receiver, are low and it has two or more; its pairs then fold into that one finding.
inline constexpr double kSlowFraction = 0.5;
inline constexpr double kSlowNodeShare = 0.75;

struct ClusterCheckInput {
  std::vector<NodeProbe> nodes;  // nodes[0] is the master (rank 0's node)
  int master_port = 29500;
  bool simulated = false;  // local launcher: nodes share one machine (hostnames may repeat)
  int connect_timeout_ms = 2000;
  BandwidthInput bandwidth;
  std::string plan_source;              // the hostfile (or --local N …) the nodes came from
  std::vector<std::string> plan_notes;  // where deepspeed plans surprisingly (coordinator/hostfile.h)
};

struct ClusterCheckResult {
  std::vector<probe::CheckRow> rows;
  std::vector<diagnosis::Finding> findings;
  // matrix[kind][from][to]: "ok 0.1ms", "DROP", "RST", "UNR", "DNS", "ERR", "-" (self), "?" (unknown);
  // matrix["p2p"] holds Gbit/s ("9.41", "LOW 0.02", "ERR").
  std::map<std::string, std::vector<std::vector<std::string>>> matrix;
};

ClusterCheckResult EvaluateCluster(const ClusterCheckInput& input);

std::string RenderClusterText(const ClusterCheckInput& input, const ClusterCheckResult& result, bool color);
// {"schema":"dsdoctor.check/1","nodes":[…],"checks":[…],"findings":[…],"matrix":{…},"summary":{…}}
nlohmann::json ClusterJson(const ClusterCheckInput& input, const ClusterCheckResult& result);
// One <testcase> per check row; fail rows carry a <failure> with the finding codes.
std::string RenderJUnit(const ClusterCheckResult& result, double seconds);
int ClusterExitCode(const ClusterCheckResult& result);

}  // namespace dsd::agent
