// The nodes of the Slurm allocation `check` and `run` are started in (docs/slurm.md): the job's
// nodes as Slurm names them, expanded by `scontrol show hostnames` (Slurm's own bracket grammar,
// never a parser of ours), and each node's task count from SLURM_TASKS_PER_NODE.
// Pure functions, except SlurmAllocationFromEnv, which reads the environment and runs scontrol.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/slurm_accounting.h"
#include "common/status.h"
#include "diagnosis/finding.h"

namespace dsd::coordinator {

struct SlurmAllocation {
  std::string job_id;
  std::vector<std::string> hosts;   // in Slurm's order
  std::vector<int> tasks_per_node;  // by host; empty when Slurm did not say
  // GPUs Slurm granted each node (0: none said), and the variable that said it
  // ("SLURM_GPUS_ON_NODE=4"): SLURM_GPUS_ON_NODE, else SLURM_GPUS_PER_NODE, else SLURM_JOB_GPUS.
  int gpus_per_node = 0;
  std::string gpus_from;
};

// A GPU count in Slurm's forms: "4", "a100:4", "gpu:a100:4", "a100:2,v100:1" (summed);
// nullopt for anything else.
std::optional<int> ParseSlurmGpuCount(std::string_view text);

// "2(x3),1" → {2, 2, 2, 1} (SLURM_TASKS_PER_NODE's grammar); errors name the text.
Result<std::vector<int>> ExpandTasksPerNode(std::string_view text);

// The allocation whose environment `env` is (SLURM_JOB_ID, SLURM_JOB_NODELIST or SLURM_NODELIST,
// SLURM_TASKS_PER_NODE), its host list expanded by running `scontrol show hostnames`; nullopt
// without SLURM_JOB_ID. Errors (kInvalidArgument) quote scontrol's own message.
Result<std::optional<SlurmAllocation>> SlurmAllocationFrom(const std::map<std::string, std::string>& env,
                                                           const std::string& scontrol = "scontrol");
// The same for this process's environment.
Result<std::optional<SlurmAllocation>> SlurmAllocationFromEnv();

struct SlurmNodeState {
  std::string name, state, reason;
};
// `sinfo -h -N -o %N|%T|%E` output → one entry per line (a node listed twice, once per partition,
// once); lines of another shape are skipped.
std::vector<SlurmNodeState> ParseSinfoNodes(std::string_view text);
// Asks sinfo about `hosts`; errors quote sinfo's own message.
Result<std::vector<SlurmNodeState>> SlurmNodeStates(const std::vector<std::string>& hosts,
                                                    const std::string& sinfo = "sinfo");

// What Slurm recorded of a job, for `analyze --slurm-job` (docs/slurm.md).
struct SlurmJobRecords {
  std::vector<collectors::SacctRecord> records;  // node lists expanded by scontrol show hostnames
  std::string source;                            // "sacct", or "sacct --completion" without slurmdbd
  std::vector<std::string> output_files;         // the job's StdOut/StdErr while slurmctld still knows it
  std::vector<std::string> notes;                // what could not be asked (scontrol's message), for warnings
};
// Runs `sacct -j ID` (and, where accounting storage is disabled, `sacct --completion`, which reads
// the job completion log), and `scontrol show job` for the job's output files. Errors
// (kInvalidArgument for an ID that is not a job id, kUnavailable when sacct knows no such job or
// cannot answer) quote sacct's own message.
Result<SlurmJobRecords> QuerySlurmJob(const std::string& job_id, const std::string& sacct = "sacct",
                                      const std::string& scontrol = "scontrol");

// Outside an allocation, `check`/`run --slurm-args "-p gpu -N 4"` asks Slurm for one and runs
// itself again inside it (docs/slurm.md): `salloc --immediate=WAIT -J dsdoctor ARGS… COMMAND…`.
// COMMAND keeps our stdin, stdout and stderr; salloc's own stderr is relayed line by line and read
// for the grant, the pending job's id (whose reason squeue gives while it waits) and its errors.
struct SallocRequest {
  std::vector<std::string> args;     // salloc's arguments (--slurm-args, split on blanks)
  int wait_s = 300;                  // --slurm-wait: no allocation within this long is a finding
  std::vector<std::string> command;  // what runs inside the allocation (this dsdoctor again)
  std::string salloc = "salloc", squeue = "squeue";
};
struct SallocOutcome {
  bool granted = false;
  std::string job_id;              // granted or pending
  int exit_code = 1;               // the command's when granted, else salloc's
  std::vector<std::string> error;  // salloc's own lines when it granted nothing
  std::string pending_reason;      // squeue's %r while the job waited ("Resources", "Priority", …)
  double waited_s = 0;
};
// Errors only where salloc cannot be run at all (not installed: kUnavailable, naming it).
Result<SallocOutcome> RunInSlurmAllocation(const SallocRequest& request);

// Why the job never started, naming salloc's words, the pending reason and what to do about it.
diagnosis::Finding NoAllocationFinding(const SallocRequest& request, const SallocOutcome& outcome);

}  // namespace dsd::coordinator
