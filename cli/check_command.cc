#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "agent/cluster_check.h"
#include "cli/commands.h"
#include "cli/launch_flags.h"
#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"
#include "coordinator/check_session.h"
#include "coordinator/job_env.h"
#include "coordinator/launcher.h"
#include "coordinator/plan.h"
#include "coordinator/slurm.h"
#include "probe/collective.h"

namespace dsd::cli {
namespace {

using nlohmann::json;

}  // namespace

namespace {

// The text, --json and --junit reports of a check, and its exit code.
int EmitCheck(const CheckOptions& o, agent::ClusterCheckInput input, std::chrono::steady_clock::time_point started) {
  auto log = log::Get("cli");
  auto result = agent::EvaluateCluster(input);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  int code = agent::ClusterExitCode(result);
  if (!o.junit_out.empty()) {
    if (Status s = WriteFileAtomic(o.junit_out, agent::RenderJUnit(result, seconds)); !s.ok()) {
      log->error("--junit: {}", s.message());
      return kExitInternal;
    }
  }
  // The JSON report last: it takes the nodes' reports out of `input` as it writes them.
  if (o.json_out == "-") {
    Status s = agent::WriteClusterJson(std::move(input), result, [](std::string_view part) {
      std::cout << part;
      return std::cout ? Status::Ok() : IoError("stdout: write failed");
    });
    if (!s.ok()) {
      log->error("--json -: {}", s.message());
      return kExitInternal;
    }
  } else {
    std::cout << agent::RenderClusterText(input, result, o.color);
    if (!o.json_out.empty()) {
      Status s = WriteFileAtomicWith(
          o.json_out, [&](const PartSink& emit) { return agent::WriteClusterJson(std::move(input), result, emit); });
      if (!s.ok()) {
        log->error("--json: {}", s.message());
        return kExitInternal;
      }
    }
  }
  log->debug("check finished in {:.2f} s with exit code {}", seconds, code);
  return code;
}

}  // namespace

int RunCheck(const CheckOptions& o) {
  auto log = log::Get("cli");
  auto started = std::chrono::steady_clock::now();
  auto agent_list = coordinator::ParseAgentList(o.agents);
  if (!agent_list.ok()) {
    std::cerr << "dsdoctor check: " << agent_list.status().message() << "\n";
    return kExitUsage;
  }
  const std::vector<net::Endpoint>& endpoints = *agent_list;
  // Outside an allocation, --slurm-args asks Slurm for one and checks its nodes from inside it.
  if (auto rc = RunInNewSlurmAllocation("check", o.slurm_args, o.slurm_wait_s, o.self_args,
                                        !o.hostfile.empty() || o.local > 0 || !endpoints.empty(),
                                        [&](const diagnosis::Finding& why) {
                                          agent::ClusterCheckInput in;
                                          in.plan_source = "Slurm: salloc " + o.slurm_args;
                                          in.not_started = why;
                                          return EmitCheck(o, std::move(in), started);
                                        }))
    return *rc;
  coordinator::NodeSourceOptions source;
  source.hostfile = o.hostfile;
  source.local = o.local;
  source.attach_agents = endpoints.size();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  source.this_node = host;
  source.filters = {o.include, o.exclude, o.num_nodes, o.num_gpus};
  if (o.hostfile.empty() && o.local == 0 && endpoints.empty()) {
    auto slurm = coordinator::SlurmAllocationFromEnv();
    if (!slurm.ok()) {
      std::cerr << "dsdoctor check: " << slurm.status().message() << "\n";
      return kExitUsage;
    }
    source.slurm = *slurm;
  }
  auto nodes = coordinator::PlanJobNodes(source);
  if (!nodes.ok()) {
    std::cerr << "dsdoctor check: " << nodes.status().message() << "\n";
    return kExitUsage;
  }
  auto sizes = probe::ParseSizes(o.sizes);
  if (!sizes.ok()) {
    std::cerr << "dsdoctor check: " << sizes.status().message() << "\n";
    return kExitUsage;
  }
  const std::string launcher_name =
      !o.launcher.empty() ? o.launcher
                          : coordinator::DefaultLauncher(!o.agents.empty(), nodes->simulated, nodes->slurm);
  if (o.plan) {
    // The plan alone: what each node would run, without starting anything.
    auto ranks = coordinator::PlanRanks(*nodes, {}, nodes->nodes[0].host, o.master_port);
    if (o.json_out == "-")
      std::cout << coordinator::PlanJson(*nodes, ranks, launcher_name)
                       .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    else
      std::cout << coordinator::PlanText(*nodes, ranks, launcher_name);
    return kExitOk;
  }
  coordinator::LauncherChoice choice = LauncherChoiceFrom(o, launcher_name, endpoints, o.local > 0);
  // Local agents start as forks running `dsdoctor agent …` (coordinator/launcher.h); `run`
  // keeps exec, so that its long-lived agents show their own command line.
  choice.agent_main = [](int argc, char** argv) { return Main(argc, argv); };
  auto setup = coordinator::MakeLauncher(choice, nodes->nodes.size());
  if (!setup.ok()) {
    std::cerr << "dsdoctor check: " << setup.status().message() << "\n";
    return setup.status().code() == StatusCode::kInternal ? kExitInternal : kExitUsage;
  }
  std::unique_ptr<coordinator::Launcher> launcher = std::move(setup->launcher);
  const std::string token = setup->token;
  coordinator::CheckSessionOptions so;
  so.master_port = o.master_port;
  so.connect_timeout_ms = o.connect_timeout_ms;
  so.bandwidth = !o.no_bandwidth;
  so.sizes = *sizes;
  so.min_busbw = o.min_busbw;
  so.min_p2p_gbit = o.min_p2p_gbit;
  so.p2p_seconds = o.p2p_seconds;
  so.use_mpi = launcher_name == "mpirun";
  so.shutdown_agents = launcher_name != "attach";
  so.job_env = coordinator::JobEnvironment();
  agent::ClusterCheckInput input = coordinator::RunCheckSession(*nodes, *launcher, token, so);
  if (nodes->slurm) {
    input.slurm = true;
    input.slurm_gpus_per_node = source.slurm->gpus_per_node;
    input.slurm_gpus_from = source.slurm->gpus_from;
    std::vector<std::string> hosts;
    for (const auto& n : nodes->nodes) hosts.push_back(n.host);
    if (auto states = coordinator::SlurmNodeStates(hosts); states.ok())
      for (auto& s : *states) input.slurm_nodes.push_back({std::move(s.name), std::move(s.state), std::move(s.reason)});
    else
      input.slurm_error = states.status().message();
  }

  return EmitCheck(o, std::move(input), started);
}

}  // namespace dsd::cli
