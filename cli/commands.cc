#include "cli/commands.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "common/log.h"

#ifndef DSDOCTOR_VERSION
#define DSDOCTOR_VERSION "0.0.0"
#endif

namespace dsd::cli {

int Main(int argc, char** argv) {
  CLI::App app{"dsdoctor: diagnose distributed deep-learning training (pre-flight checks, hang debugging)"};
  app.set_version_flag("--version", std::string("dsdoctor ") + DSDOCTOR_VERSION);
  app.require_subcommand(1);
  std::string log_level;
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off (overrides DSDOCTOR_LOG_LEVEL)");

  ReportOptions report;
  bool no_color = false;
  auto* report_cmd = app.add_subcommand("report", "This node's inventory: NICs, /dev/shm, NCCL, CUDA, GPUs, env");
  report_cmd->add_flag("--json", report.json, "Print the JSON document (docs/report-json.md)");
  report_cmd->add_flag("--no-color", no_color, "Plain marks even on a terminal");

  AgentCommandOptions agent_opts;
  auto* agent_cmd = app.add_subcommand("agent", "Serve checks and job launches for a coordinator (authenticated)");
  agent_cmd->add_option("--listen", agent_opts.listen, "ADDR:PORT to bind (port 0: any free port)")->required();
  agent_cmd->add_option("--token-file", agent_opts.token_file, "File with the job token (mode 0600), or - for stdin")->required();
  agent_cmd->add_option("--name", agent_opts.name, "Node name in reports (default: hostname)");
  agent_cmd->add_flag("--exit-with-coordinator", agent_opts.exit_with_coordinator,
                      "Exit when stdin closes (the launching coordinator is gone)");
  agent_cmd->add_flag("--exit-with-parent", agent_opts.exit_with_parent, "Exit when the parent process dies (mpirun)");
  agent_cmd->add_option("--mpi-nodes", agent_opts.mpi_nodes,
                        "name=addr,…: under mpirun, the entry at OMPI_COMM_WORLD_RANK gives this agent's name and address");

  CheckOptions check;
  auto* check_cmd = app.add_subcommand("check", "Pre-flight check of a cluster: agents, NCCL, env, connectivity");
  check_cmd->add_option("--hostfile", check.hostfile, "DeepSpeed/OpenMPI hostfile (default: /job/hostfile, else this node)");
  check_cmd->add_option("--local", check.local, "Simulate N nodes on this machine (127.0.0.2…)")->check(CLI::Range(1, 250));
  check_cmd->add_option("--include", check.include, "host[:slot,slot][@host…]");
  check_cmd->add_option("--exclude", check.exclude, "host[:slot,slot][@host…]");
  check_cmd->add_option("--num_nodes", check.num_nodes, "Use the first N nodes");
  check_cmd->add_option("--num_gpus", check.num_gpus, "Use the first N slots of each node");
  check_cmd->add_option("--launcher", check.launcher, "local | ssh | mpirun | attach (default: local, or attach with --agents)")->check(CLI::IsMember({"local", "attach", "ssh", "mpirun"}));
  check_cmd->add_option("--agents", check.agents, "Running agents to attach to: host:port,…");
  check_cmd->add_option("--token-file", check.token_file, "Token of attached agents");
  check_cmd->add_option("--ssh-opts", check.ssh_opts, "Extra ssh arguments, e.g. \"-p 2222 -i ~/.ssh/cluster\"");
  check_cmd->add_option("--mpirun-opts", check.mpirun_opts, "Extra mpirun arguments, e.g. \"--mca btl_tcp_if_include eth0\"");
  check_cmd->add_option("--remote-dsdoctor", check.remote_dsdoctor, "dsdoctor's path on the nodes (default: this one's)");
  check_cmd->add_option("--master_port", check.master_port, "Rendezvous port (MASTER_PORT)")->check(CLI::Range(1, 65535));
  check_cmd->add_option("--agent-port", check.agent_port, "Port for started agents (0: any free port)")->check(CLI::Range(0, 65535));
  check_cmd->add_option("--connect-timeout-ms", check.connect_timeout_ms, "Connect timeout per pair (DROP detection)")
      ->check(CLI::Range(100, 60000));
  check_cmd->add_flag("--no-bandwidth", check.no_bandwidth, "Skip bandwidth probes");
  check_cmd->add_option("--sizes", check.sizes, "All-reduce sizes: MIN-MAX (doubling) or a list, e.g. 8-64M, 1M,16M");
  check_cmd->add_option("--min-busbw", check.min_busbw, "Fail when the all-reduce's average busbw (GB/s) is below this")
      ->check(CLI::NonNegativeNumber);
  check_cmd->add_option("--min-p2p-gbit", check.min_p2p_gbit, "Fail p2p pairs below this many Gbit/s")
      ->check(CLI::NonNegativeNumber);
  check_cmd->add_option("--p2p-seconds", check.p2p_seconds, "Duration of each p2p transfer")->check(CLI::Range(0.05, 30.0));
  check_cmd->add_option("--json", check.json_out, "Write the JSON document to FILE (- for stdout instead of text)");
  check_cmd->add_option("--junit", check.junit_out, "Write a JUnit XML report to FILE");
  check_cmd->add_flag("--no-color", no_color, "Plain marks even on a terminal");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  log::Init(log_level.empty() ? std::nullopt : std::optional<std::string>(log_level));
  auto log = log::Get("cli");
  try {
    if (*agent_cmd) return RunAgent(agent_opts);
    if (*check_cmd) {
      check.color = !no_color && ::isatty(1) && !std::getenv("NO_COLOR");
      check.log_level = log_level;
      return RunCheck(check);
    }
    if (*report_cmd) {
      report.color = !no_color && ::isatty(1) && !std::getenv("NO_COLOR");
      return RunReport(report);
    }
  } catch (const std::exception& e) {
    log->error("internal error: {}", e.what());
    return kExitInternal;
  }
  return kExitUsage;
}

}  // namespace dsd::cli
