// The connectivity phase of `dsdoctor check` on the wire (docs/agent-protocol.md, "ping"). Every
// agent gets the same table of targets and its own starting offset, so the coordinator serialises
// the table once and the nodes' probes are staggered: agent i begins at target i+1, and at any
// moment each listener sees SYNs from a few agents, not all of them. Replies are compact: one
// letter per target, one latency per target, and text only for the failures (4,000 targets make a
// reply of about 30 KB). Pure functions over values; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/net.h"
#include "common/status.h"

namespace dsd::agent {

// Outcome letters of a reply: o ok, D timeout (a DROP), R refused, U unreachable, N unresolved,
// E error, - not probed (the agent's own entry, or one it was told to skip).
char OutcomeLetter(net::ConnectOutcome outcome);
std::optional<net::ConnectOutcome> OutcomeFromLetter(char letter);

struct PingRequest {
  std::vector<net::ProbeTarget> targets;
  size_t start = 0;          // probe targets[start], targets[start+1], … wrapping around
  std::vector<size_t> skip;  // indices not probed (the agent itself)
  int timeout_ms = 2000;
  int max_in_flight = 16;
  // false: the reply's latencies are those of the failed targets only (a coordinator of thousands
  // of nodes shows no ok pair's latency, and 16,000 of them per reply cost it seconds to parse).
  bool ok_latency = true;
};

// {"type":"ping","targets":[[host,port],…],"start":k,"skip":[i],"timeout_ms":t,"max_in_flight":c}
// The table text is shared between agents; `id` and the per-agent fields wrap it without copying
// the table into a JSON value.
std::string PingRequestText(int id, const std::string& targets_json, size_t start, const std::vector<size_t>& skip,
                            int timeout_ms, int max_in_flight, bool ok_latency = true);
// Errors name the field (`ping.targets[3][1]: …`).
Result<PingRequest> ParsePingRequest(const nlohmann::json& request);

struct PingReply {
  std::string outcomes;                                // one letter per target
  std::vector<uint32_t> latency_us;                    // one per target (0 when not probed)
  std::vector<std::pair<size_t, std::string>> errors;  // failed targets' error text
  std::vector<size_t> retried;                         // targets whose first attempt timed out
  std::vector<int> listening;                          // ports the agent listens on
  // How often the kernel's neighbour (ARP/NDP) table was full while the probes ran, and its limit
  // (net.ipv4.neigh.default.gc_thresh3): a connect to a peer the table could not hold is dropped
  // before it leaves, so its timeout is not a firewall's doing.
  uint64_t neigh_table_fulls = 0;
  uint64_t neigh_gc_thresh3 = 0;
};

// The kernel's count of neighbour-table overflows (table_fulls of /proc/net/stat/arp_cache and
// ndisc_cache, summed over CPUs); 0 where it cannot be read.
uint64_t NeighbourTableFulls();

// Agent side: runs the probes (net::ProbeMany, from `source_addr`); `cancel` ends them early.
PingReply RunPing(const PingRequest& request, const std::string& source_addr,
                  const std::atomic<bool>* cancel = nullptr);
// ok_latency false: "latency_us" lists the failed targets' latencies only, in target order, and
// "latency_of":"failed" says so.
nlohmann::json PingReplyJson(const PingReply& reply, const std::string& from, bool ok_latency = true);
// Coordinator side: an agent's reply is untrusted; a wrong shape or length is an error naming it.
// Latencies of targets the reply left out (latency_of "failed") are 0.
Result<PingReply> ParsePingReply(const nlohmann::json& reply, size_t targets);

}  // namespace dsd::agent
