// --slurm-args outside a Slurm allocation: `check` and `run` ask salloc for one and run themselves
// again inside it (coordinator/slurm.h RunInSlurmAllocation); here only the flags.
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "common/strings.h"
#include "coordinator/slurm.h"

namespace dsd::cli {

std::vector<std::string> WithoutSallocFlags(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  bool ours = true;  // before "--": our flags
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (ours && a == "--") ours = false;
    if (ours && (a == "--slurm-args" || a == "--slurm-wait")) {
      ++i;  // and its value
      continue;
    }
    if (ours && (a.starts_with("--slurm-args=") || a.starts_with("--slurm-wait="))) continue;
    out.push_back(a);
  }
  return out;
}

std::optional<int> RunInNewSlurmAllocation(const char* who, const std::string& slurm_args, int wait_s,
                                           const std::vector<std::string>& self_args, bool nodes_named,
                                           const std::function<int(const diagnosis::Finding&)>& report_no_allocation) {
  if (slurm_args.empty()) return std::nullopt;
  if (const char* job = std::getenv("SLURM_JOB_ID"); job && *job) {
    std::cerr << "dsdoctor " << who << ": note: already inside Slurm job " << job
              << ": --slurm-args is not used (the allocation's nodes are)\n";
    return std::nullopt;
  }
  if (nodes_named) {
    std::cerr << "dsdoctor " << who
              << ": --slurm-args asks Slurm for the nodes: give it without --hostfile, --local or --agents\n";
    return kExitUsage;
  }
  // salloc runs this command again; SLURM_JOB_ID inside stops it from asking again.
  coordinator::SallocRequest req;
  req.args = SplitWhitespace(slurm_args);
  req.wait_s = wait_s;
  req.command = {SelfExe()};
  for (auto& a : WithoutSallocFlags(self_args)) req.command.push_back(std::move(a));
  auto outcome = coordinator::RunInSlurmAllocation(req);
  if (!outcome.ok()) {
    std::cerr << "dsdoctor " << who << ": " << outcome.status().message() << "\n";
    return kExitUsage;
  }
  if (outcome->granted) return outcome->exit_code;
  return report_no_allocation(coordinator::NoAllocationFinding(req, *outcome));
}

}  // namespace dsd::cli
