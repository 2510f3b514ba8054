// What Slurm's accounting says about a finished job (`dsdoctor analyze --slurm-job ID`,
// docs/slurm.md): `sacct --parsable2` records of the job and its steps, and the findings they add to
// a report built from the job's logs or run dir: a step killed for memory, a node that failed, a
// time limit, a preemption or cancellation, each naming the step, its nodes and the ranks that ran
// there. Pure functions over text; the commands are run by coordinator/slurm.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "diagnosis/finding.h"
#include "diagnosis/state.h"

namespace dsd::collectors {

// One line of `sacct --parsable2`: the job ("1234"), its batch/extern steps ("1234.batch") or a
// step ("1234.0"). Fields sacct did not print are empty.
struct SacctRecord {
  std::string job_id;
  std::string name;
  std::string state;      // "OUT_OF_MEMORY", "CANCELLED by 1000", "NODE_FAIL", …
  std::string exit_code;  // "0:9" (exit code : signal)
  std::string derived_exit_code;
  std::string node_list;           // as Slurm writes it, "node-[0-3]"
  std::vector<std::string> nodes;  // node_list expanded (coordinator::QuerySlurmJob fills it)
  std::string elapsed, start, end, reason;
  int line = 0;  // in sacct's output, for errors and evidence
};

// sacct's output with its header line (`--parsable2`, any --format order: fields go by the
// header's names). Errors name the line; an output with no header is an error.
Result<std::vector<SacctRecord>> ParseSacct(std::string_view text);

// Adds the findings Slurm's records give to `findings` (a report's, built from the job's logs or
// run dir). `source` says where the records came from ("sacct", "sacct --completion"), for the
// evidence. A record's ranks are those whose node (job.ranks[].node, else log lines that name a
// host and a rank) is among its nodes. A Slurm finding whose code and nodes match one already
// there (the job's own log said OOM on that node) joins it as evidence instead of repeating it; a
// FAILED job is an error only when nothing else in the report explains it.
void AddSlurmJobFindings(const std::string& job_id, const std::vector<SacctRecord>& records,
                         const diagnosis::JobState& job, const std::string& source,
                         std::vector<diagnosis::Finding>* findings);

}  // namespace dsd::collectors
