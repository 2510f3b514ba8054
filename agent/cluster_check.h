// `dsdoctor check` evaluation: from what every agent reported (inventory, connect probes) to check
// rows, findings with remedies, a node×node connectivity matrix, and the text/JSON/JUnit outputs.
// Pure functions over values (no I/O); thread-safe.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/file.h"
#include "common/net.h"
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
  // CompactReport moves what the rows do not read (everything but "inventory") and what they read
  // only on a failure (the interface list) here, as CBOR: as a DOM it costs ~15 KB a node, 240 MB
  // at 16,000 nodes. The JSON report puts it back.
  std::vector<uint8_t> report_rest;
  std::vector<int> listening;      // ports its agent listens on (from its ping reply)
  std::string ping_error;          // why its connect probes have no results (its ping call failed)
  uint64_t neigh_table_fulls = 0;  // its kernel's neighbour table overflowed while it probed
  uint64_t neigh_gc_thresh3 = 0;
};

// Connect-probe outcomes of one kind: one byte per (from, to) pair, the outcome. Tables small enough
// for a matrix (kMatrixMaxNodes rows or fewer) keep every latency too, in 10 µs steps (two bytes);
// larger ones keep only the latencies of failed or retried pairs, the only ones a report shows, so
// 16,000 nodes (256 M pairs) take 256 MB. Failures keep their error text, and latencies past 655 ms
// their exact value, on the side. Not thread-safe: one writer, then readers.
class PairTable {
 public:
  void Resize(size_t rows, size_t cols);
  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  void Set(size_t from, size_t to, net::ConnectOutcome outcome, double latency_ms, bool retried,
           std::string error = "");
  bool known(size_t from, size_t to) const { return cell(from, to) != kUnknown; }
  net::ConnectOutcome outcome(size_t from, size_t to) const {
    return static_cast<net::ConnectOutcome>(cell(from, to) & kOutcomeMask);
  }
  bool retried(size_t from, size_t to) const { return known(from, to) && (cell(from, to) & kRetried); }
  double latency_ms(size_t from, size_t to) const;
  const std::string& error(size_t from, size_t to) const;

 private:
  struct Extra {
    std::string error;
    float latency_ms = 0;
  };
  static constexpr uint8_t kUnknown = 0xff;
  static constexpr uint8_t kRetried = 0x40;
  static constexpr uint8_t kOutcomeMask = 0x3f;
  static constexpr uint16_t kLatencyOnSide = 0xffff;  // the latency is in extra_
  uint8_t cell(size_t from, size_t to) const { return cells_[from * cols_ + to]; }
  size_t rows_ = 0, cols_ = 0;
  std::vector<uint8_t> cells_;
  std::vector<uint16_t> latency_10us_;
  std::unordered_map<uint64_t, Extra> extra_;
};

// Keeps in `node.report` only what the rows read; the rest goes to report_rest (thread-compatible).
void CompactReport(NodeProbe& node);

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
  std::string backend;  // "gloo", "mpi", "nccl"
  std::string note;     // why the backend is not the one expected ("NCCL not used: …"), shown with the row
  std::string mode;     // how it moved data ("synchronous pairs, busy-polling"); empty if the library chose
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
  PairTable agent_mesh;  // nodes × nodes: each agent to every other agent's port
  PairTable rendezvous;  // nodes × 1: each node to the master's rendezvous port
  BandwidthInput bandwidth;
  std::string plan_source;              // the hostfile (or --local N …) the nodes came from
  std::vector<std::string> plan_notes;  // where deepspeed plans surprisingly (coordinator/hostfile.h)
  // The nodes came from a Slurm allocation: what Slurm says of each (sinfo), for the "Slurm nodes"
  // row; slurm_error when sinfo could not be asked.
  struct SlurmNode {
    std::string name, state, reason;  // sinfo's %N, %T (e.g. "mixed", "draining", "down*"), %E
  };
  bool slurm = false;
  std::vector<SlurmNode> slurm_nodes;
  std::string slurm_error;
  int slurm_gpus_per_node = 0;  // GPUs Slurm granted each node (0: it said none)
  std::string slurm_gpus_from;  // the variable that said so ("SLURM_GPUS_ON_NODE=4")
  // Set: no agent was started because the nodes never came (Slurm granted no allocation): this
  // finding says why, and every other row is "not checked".
  std::optional<diagnosis::Finding> not_started;
  // Non-empty: the check could not start (this process's limits are too low for the cluster);
  // RESOURCE_LIMIT says which and how to raise it, and no node is blamed.
  std::string resource_error;
};

// Node×node matrices are for people: shown (text) and written (JSON "matrix") up to this many
// nodes. Beyond it the JSON lists every failed pair instead ("connectivity").
inline constexpr size_t kMatrixMaxNodes = 64;
// A node whose port fails from at least this share of the nodes that probed it (or which fails to
// reach this share of its targets), with the same outcome and at least two pairs, is named in one
// finding instead of one per pair; pair findings beyond kMaxPairFindings are counted in one more.
inline constexpr double kBlockedNodeShare = 0.75;
inline constexpr size_t kMaxPairFindings = 50;
// Failed pairs listed in the JSON report per kind; the rest are counted ("failed_omitted").
inline constexpr size_t kMaxJsonFailedPairs = 100000;

struct ClusterCheckResult {
  std::vector<probe::CheckRow> rows;
  std::vector<diagnosis::Finding> findings;
  // matrix[kind][from][to]: "ok 0.1ms", "DROP", "RST", "UNR", "DNS", "ERR", "-" (self), "?" (unknown);
  // matrix["p2p"] holds Gbit/s ("9.41", "LOW 0.02", "ERR"). Empty beyond kMatrixMaxNodes nodes.
  std::map<std::string, std::vector<std::vector<std::string>>> matrix;
};

ClusterCheckResult EvaluateCluster(const ClusterCheckInput& input);

// What every output (text, JSON, JUnit) says of nodes the local launcher simulated.
inline constexpr const char* kSimulatedLabel = "simulated on this machine: no other host was contacted";

// What the bandwidth probes read from a node's report. The report is the agent's document:
// a missing or mistyped field reads as 0 or empty, never throws.
int ReportedGpus(const NodeProbe& node);              // inventory.cuda.device_count
int ReportedCpus(const NodeProbe& node);              // inventory.system.cpus
std::string ReportedHostname(const NodeProbe& node);  // inventory.system.hostname

// NCCL refuses two ranks on one GPU. With gpus[k] ranks on node idx[k] (its first gpus[k]
// devices), the first GPU two ranks would share, as "node-0 and node-1 both have GPU <uuid>"
// (nodes on one machine: `--local`, or a host listed twice); empty when every rank has its own.
// A GPU is its NVML UUID, or the hostname and device index where NVML gave none.
std::string SharedGpu(const std::vector<NodeProbe>& nodes, const std::vector<size_t>& idx,
                      const std::vector<int>& gpus);

std::string RenderClusterText(const ClusterCheckInput& input, const ClusterCheckResult& result, bool color);
// {"schema":"dsdoctor.check/1","nodes":[…],"checks":[…],"findings":[…],"matrix":{…},"summary":{…}}
nlohmann::json ClusterJson(const ClusterCheckInput& input, const ClusterCheckResult& result);
// The same, taking the nodes' reports out of `input` instead of copying them (thousands of nodes).
nlohmann::json ClusterJson(ClusterCheckInput&& input, const ClusterCheckResult& result);
// The same document as text (indented by 2, then a newline), written in parts through `emit` and
// taking the nodes' reports out of `input` one at a time: at 4,000 nodes neither the whole
// document nor its 30 MB of text is held at once.
Status WriteClusterJson(ClusterCheckInput&& input, const ClusterCheckResult& result, const PartSink& emit);
// One <testcase> per check row; fail rows carry a <failure> with the finding codes.
std::string RenderJUnit(const ClusterCheckResult& result, double seconds);
int ClusterExitCode(const ClusterCheckResult& result);

}  // namespace dsd::agent
