// What `check` and `run` share between flags and the coordinator: the launcher choice. Header-only
// because both option structs spell the launcher flags the same way.
#pragma once

#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/strings.h"
#include "coordinator/launcher.h"

namespace dsd::cli {

template <typename Options>
coordinator::LauncherChoice LauncherChoiceFrom(const Options& o, std::string kind, std::vector<net::Endpoint> agents,
                                               bool simulated) {
  coordinator::LauncherChoice c;
  c.kind = std::move(kind);
  c.self_binary = SelfExe();
  c.remote_dsdoctor = o.remote_dsdoctor;
  c.ssh_args = SplitWhitespace(o.ssh_opts);
  c.mpirun_args = SplitWhitespace(o.mpirun_opts);
  c.pdsh_args = SplitWhitespace(o.pdsh_opts);
  c.slurm_args = SplitWhitespace(o.slurm_opts);
  c.agents = std::move(agents);
  c.token_file = o.token_file;
  c.agent_port = o.agent_port;
  c.log_level = o.log_level;
  c.simulated = simulated;
  return c;
}

}  // namespace dsd::cli
