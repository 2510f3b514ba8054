// `dsdoctor check` evaluation: from what every agent reported (inventory, connect probes) to check
// rows, findings with remedies, a node×node connectivity matrix, and the text/JSON/JUnit outputs.
// Pure functions over values (no I/O); thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "diagnosis/finding.h"
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

struct ClusterCheckInput {
  std::vector<NodeProbe> nodes;  // nodes[0] is the master (rank 0's node)
  int master_port = 29500;
  bool simulated = false;        // local launcher: nodes share one machine (hostnames may repeat)
  int connect_timeout_ms = 2000;
};

struct ClusterCheckResult {
  std::vector<probe::CheckRow> rows;
  std::vector<diagnosis::Finding> findings;
  // matrix[kind][from][to]: "ok 0.1ms", "DROP", "RST", "UNR", "DNS", "ERR", "-" (self), "?" (unknown)
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
