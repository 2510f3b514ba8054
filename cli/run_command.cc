// `dsdoctor run` (docs/run.md): flags → PlanRun → the run session → report → exit code. Everything
// between lives in coordinator/ (run_spec.h, run_session.h); this file only turns the options into a
// plan, Ctrl-C into a stop request, and the session's result into the report and the exit code.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/launch_flags.h"
#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"
#include "coordinator/mpi_ranks.h"
#include "coordinator/plan.h"
#include "coordinator/run_session.h"
#include "coordinator/run_spec.h"
#include "diagnosis/report.h"

namespace dsd::cli {
namespace {

std::atomic<int> g_stop_signal{0};
void OnSignal(int sig) { g_stop_signal = sig; }

int EmitReport(const diagnosis::JobState& job, const diagnosis::Diagnosis& d, const std::string& json_out, bool color,
               const char* who = "run") {
  const auto json = [&] {
    return diagnosis::RunJson(job, d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  };
  if (json_out == "-") {
    std::cout << json();
  } else {
    std::cout << "\n" << diagnosis::RenderRunText(job, d, color);
    if (!json_out.empty())
      if (Status st = WriteFileAtomic(json_out, json()); !st.ok()) {
        std::cerr << "dsdoctor " << who << ": cannot write " << json_out << ": " << st.message() << "\n";
        return kExitInternal;
      }
  }
  std::cout.flush();
  return kExitOk;
}

}  // namespace

int RunJob(const RunOptions& o) {
  auto endpoints = coordinator::ParseAgentList(o.agents);
  if (!endpoints.ok()) {
    std::cerr << "dsdoctor run: " << endpoints.status().message() << "\n";
    return kExitUsage;
  }
  // Outside an allocation, --slurm-args asks Slurm for one and runs the job from inside it.
  if (auto rc = RunInNewSlurmAllocation(
          "run", o.slurm_args, o.slurm_wait_s, o.self_args,
          !o.hostfile.empty() || o.local > 0 || !endpoints->empty() || o.direct, [&](const diagnosis::Finding& why) {
            diagnosis::JobState job;
            job.evidence_missing.push_back("no rank was started: Slurm granted no allocation");
            diagnosis::Diagnosis d;
            d.findings.push_back(why);
            const int code = EmitReport(job, d, o.json_out, o.color);
            return code == kExitOk ? kExitProblems : code;
          }))
    return *rc;
  coordinator::RunPlanOptions p;
  p.nodes = {.hostfile = o.hostfile,
             .local = o.local,
             .local_slots = o.slots,
             .attach_agents = endpoints->size(),
             .this_node_slots = o.slots,
             .filters = {o.include, o.exclude, o.num_nodes, o.num_gpus}};
  if (o.hostfile.empty() && o.local == 0 && endpoints->empty() && !o.direct) {
    auto slurm = coordinator::SlurmAllocationFromEnv();
    if (!slurm.ok()) {
      std::cerr << "dsdoctor run: " << slurm.status().message() << "\n";
      return kExitUsage;
    }
    p.nodes.slurm = *slurm;
  }
  p.agents = *endpoints;
  p.launcher = o.launcher;
  p.direct = o.direct;
  p.command = o.command;
  p.log_dir = o.log_dir;
  p.master_addr = o.master_addr;
  p.master_port = o.master_port;
  p.timeout_s = o.timeout_s;
  p.hang_after_s = o.hang_after_s;
  p.on_hang = o.on_hang;
  p.tui = o.tui;
  p.trace = !o.no_trace;
  p.nccl_profiler = !o.no_nccl_profiler;
  p.mpi = o.trace_mpi ? "on" : o.no_mpi ? "off" : "";
  p.share_group = o.share_group;
  p.debug = spdlog::get_level() <= spdlog::level::debug;  // --log-level or DSDOCTOR_LOG_LEVEL
  p.dry_run = o.dry_run;
  p.serve = o.serve;
  p.quiet = o.quiet;
  p.reattach_window_s = o.reattach_window_s;
  auto spec = coordinator::PlanRun(p);
  if (!spec.ok()) {
    std::cerr << "dsdoctor run: " << spec.status().message() << "\n";
    return spec.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitInternal;
  }
  if (o.dry_run) {
    // An MPI program's ranks are started by one mpirun: its command line, the run id left out.
    std::vector<std::string> mpirun;
    if (spec->mpi) {
      coordinator::RunSpec shown = *spec;
      shown.run_id = "RUN_ID";
      mpirun = coordinator::MpiRanksCommand(
          shown,
          coordinator::MpiRanksOptionsFor(shown, LauncherChoiceFrom(o, spec->launcher, *endpoints, spec->simulated)));
    }
    if (o.json_out == "-") {
      auto plan = coordinator::PlanJson(spec->nodes, spec->ranks, spec->launcher);
      if (spec->mpi) plan["mpirun"] = mpirun;
      std::cout << plan.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << coordinator::PlanText(spec->nodes, spec->ranks, spec->launcher);
      if (spec->mpi) std::cout << "MPI ranks started by: " << Join(mpirun, " ") << "\n";
    }
    return kExitOk;
  }
  // Ctrl-C stops the job once its ranks start; before that it ends dsdoctor and its agents at once.
  const auto install_handlers = [] {
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
  };
  auto result = coordinator::RunJobSession(*spec, LauncherChoiceFrom(o, spec->launcher, *endpoints, spec->simulated),
                                           {stdout, stderr, &g_stop_signal, install_handlers});
  if (!result.ok()) {
    std::cerr << "dsdoctor run: " << result.status().message() << "\n";
    switch (result.status().code()) {
      case StatusCode::kInvalidArgument:
        return kExitUsage;
      case StatusCode::kUnavailable:
        return kExitProblems;
      default:
        return kExitInternal;
    }
  }
  if (int rc = EmitReport(result->job, result->diagnosis, o.json_out, o.color); rc != kExitOk) return rc;
  return result->exit_code;
}

int RunAttach(const AttachCmdOptions& o) {
  coordinator::AttachOptions a{o.quiet, o.on_hang, o.timeout_s, o.hang_after_s};
  const auto install_handlers = [] {
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
  };
  auto result = coordinator::AttachJobSession(RunDir(std::filesystem::absolute(o.run_dir).lexically_normal().string()),
                                              a, {stdout, stderr, &g_stop_signal, install_handlers});
  if (!result.ok()) {
    std::cerr << "dsdoctor attach: " << result.status().message() << "\n";
    switch (result.status().code()) {
      case StatusCode::kInvalidArgument:
      case StatusCode::kNotFound:
        return kExitUsage;
      case StatusCode::kUnavailable:
        return kExitProblems;
      default:
        return kExitInternal;
    }
  }
  if (int rc = EmitReport(result->job, result->diagnosis, o.json_out, o.color, "attach"); rc != kExitOk) return rc;
  return result->exit_code;
}

}  // namespace dsd::cli
