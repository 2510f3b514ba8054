// Findings: what dsdoctor concluded, in the shape every report (text, JSON, JUnit, TUI) uses.
// JSON: {"code","severity","summary","nodes","ranks","evidence","remedy"} (DESIGN.md, docs/findings.md).
// Plain values; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace dsd::diagnosis {

enum class Severity { kInfo, kWarning, kError };
const char* SeverityName(Severity s);  // "info" | "warning" | "error"
Result<Severity> ParseSeverity(const std::string& s);

// The finding codes of DESIGN.md. Extend, never rename: users grep and alert on them.
namespace codes {
// check
inline constexpr const char* kAgentUnreachable = "AGENT_UNREACHABLE";
inline constexpr const char* kPortBlocked = "PORT_BLOCKED";
inline constexpr const char* kPortRefused = "PORT_REFUSED";
inline constexpr const char* kHostUnreachable = "HOST_UNREACHABLE";
inline constexpr const char* kNameUnresolved = "NAME_UNRESOLVED";
inline constexpr const char* kDuplicateHostname = "DUPLICATE_HOSTNAME";
inline constexpr const char* kNcclMissing = "NCCL_MISSING";
inline constexpr const char* kNcclVersionMismatch = "NCCL_VERSION_MISMATCH";
inline constexpr const char* kCudaVersionMismatch = "CUDA_VERSION_MISMATCH";
inline constexpr const char* kSocketIfnameInvalid = "SOCKET_IFNAME_INVALID";
inline constexpr const char* kEnvMismatch = "ENV_MISMATCH";
inline constexpr const char* kSlotsExceedGpus = "SLOTS_EXCEED_GPUS";
inline constexpr const char* kBandwidthLow = "BANDWIDTH_LOW";
inline constexpr const char* kAllreduceWrong = "ALLREDUCE_WRONG";
inline constexpr const char* kResourceLimit = "RESOURCE_LIMIT";     // ulimit -n too low for the cluster's links
inline constexpr const char* kSlurmNodeState = "SLURM_NODE_STATE";  // a node of the allocation drained/down
inline constexpr const char* kSlurmJobState =
    "SLURM_JOB_STATE";  // analyze --slurm-job: Slurm ended the job (node failure, time limit, preemption, …)
inline constexpr const char* kSlurmAllocation =
    "SLURM_ALLOCATION";  // --slurm-args outside an allocation: salloc granted none in time
inline constexpr const char* kLaunchPlan =
    "LAUNCH_PLAN";  // deepspeed accepts the flags/hostfile but plans surprisingly
// run
inline constexpr const char* kCollectiveMismatch = "COLLECTIVE_MISMATCH";
inline constexpr const char* kRankMissing = "RANK_MISSING";
inline constexpr const char* kRankExited = "RANK_EXITED";
inline constexpr const char* kCollectiveStall = "COLLECTIVE_STALL";
inline constexpr const char* kWatchdogTimeout = "WATCHDOG_TIMEOUT";
inline constexpr const char* kP2pDeadlock = "P2P_DEADLOCK";
inline constexpr const char* kStraggler = "STRAGGLER";
inline constexpr const char* kNcclError = "NCCL_ERROR";
inline constexpr const char* kCommError = "COMM_ERROR";
inline constexpr const char* kLogError = "LOG_ERROR";
// log catalogue (analyze and run): more specific than LOG_ERROR
inline constexpr const char* kRendezvousError = "RENDEZVOUS_ERROR";  // c10d store / rendezvous / MASTER_ADDR:PORT
inline constexpr const char* kOutOfMemory = "OUT_OF_MEMORY";         // host OOM killer or GPU memory
inline constexpr const char* kCudaError = "CUDA_ERROR";              // illegal address, device assert, ECC, driver
inline constexpr const char* kLaunchError = "LAUNCH_ERROR";          // ssh/pdsh/mpirun could not start or lost a node
inline constexpr const char* kAgentLost = "AGENT_LOST";              // run: an agent went silent or its link dropped
inline constexpr const char* kLogDirFull = "LOG_DIR_FULL";           // run: the log dir's file system is (nearly) full
}  // namespace codes

bool IsKnownCode(const std::string& code);

// What a `run` finding rests on (docs/run.md, "Proof"): `dsdoctor run --on-hang stop` ends a job
// only on a hang proven by traces, stacks, exits or logs; a heuristic one (timing and CPU alone) is
// a warning and never stops anything.
namespace proof {
inline constexpr const char* kTrace = "trace";          // the ranks' own trace records
inline constexpr const char* kStacks = "stacks";        // captured stacks (and /proc) of blocked ranks
inline constexpr const char* kExit = "exit";            // a rank's exit status
inline constexpr const char* kLog = "log";              // lines the ranks printed
inline constexpr const char* kAgent = "agent";          // the coordinator lost sight of an agent
inline constexpr const char* kDisk = "disk";            // statvfs of the log dir and writes that failed
inline constexpr const char* kHeuristic = "heuristic";  // quiet output, flat CPU, elapsed time
inline constexpr const char* kScheduler = "scheduler";  // the scheduler's own records (Slurm's sacct)
}  // namespace proof

struct Finding {
  std::string code;
  Severity severity = Severity::kError;
  std::string summary;
  std::vector<std::string> nodes;
  std::vector<int> ranks;
  std::vector<std::string> evidence;
  std::string remedy;
  std::string proof;  // proof::k* for `run` findings; "" for `check`

  bool operator==(const Finding&) const = default;
};

nlohmann::json ToJson(const Finding& f);
// Errors name the field that is missing or of the wrong type.
Result<Finding> FindingFromJson(const nlohmann::json& j);

// Errors first, then warnings, then info; stable within a severity.
void SortBySeverity(std::vector<Finding>& findings);

}  // namespace dsd::diagnosis
