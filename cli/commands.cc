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

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "dsdoctor";
}

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
  agent_cmd->add_option("--token-file", agent_opts.token_file, "File with the job token (mode 0600), or - for stdin")
      ->required();
  agent_cmd->add_option("--name", agent_opts.name, "Node name in reports (default: hostname)");
  agent_cmd->add_flag("--exit-with-coordinator", agent_opts.exit_with_coordinator,
                      "Exit when stdin closes (the launching coordinator is gone)");
  agent_cmd->add_flag("--exit-with-parent", agent_opts.exit_with_parent, "Exit when the parent process dies (mpirun)");
  agent_cmd->add_option(
      "--mpi-nodes", agent_opts.mpi_nodes,
      "name=addr,…: the entry named SLURMD_NODENAME under srun, or at OMPI_COMM_WORLD_RANK under mpirun, gives this "
      "agent's name and address");

  RankExecCmdOptions rank_exec;
  auto* rank_exec_cmd = app.add_subcommand(
      "rank-exec", "(run's MPI mode) Run one MPI rank's program and hand it to its node's agent; mpirun starts it");
  rank_exec_cmd->add_option("--nodes", rank_exec.nodes, "SLOTS:SOCKET,… of every node, in rank order")->required();
  rank_exec_cmd->add_option("command", rank_exec.command, "The program and its arguments (after --)")->required();

  CheckOptions check;
  auto* check_cmd = app.add_subcommand("check", "Pre-flight check of a cluster: agents, NCCL, env, connectivity");
  check_cmd->add_option("--hostfile", check.hostfile,
                        "DeepSpeed/OpenMPI hostfile (default: /job/hostfile, else this node)");
  check_cmd->add_option("--local", check.local, "Simulate N nodes on this machine (127.0.0.2…)")
      ->check(CLI::Range(1, 250));
  check_cmd->add_option("--include", check.include, "host[:slot,slot][@host…]");
  check_cmd->add_option("--exclude", check.exclude, "host[:slot,slot][@host…]");
  check_cmd->add_option("--num_nodes", check.num_nodes, "Use the first N nodes");
  check_cmd->add_option("--num_gpus", check.num_gpus, "Use the first N slots of each node");
  check_cmd
      ->add_option("--launcher", check.launcher,
                   "local | ssh | pdsh | mpirun | attach (default: local, or attach with --agents)")
      ->check(CLI::IsMember({"local", "attach", "ssh", "pdsh", "mpirun", "slurm"}));
  check_cmd->add_flag(
      "--plan", check.plan,
      "Print the plan (nodes, slot ids, ranks, CUDA_VISIBLE_DEVICES, master) and start nothing; with --json - as JSON");
  check_cmd->add_option("--pdsh-opts", check.pdsh_opts, "Extra pdsh arguments");
  check_cmd->add_option("--slurm-opts", check.slurm_opts, "Extra srun arguments for the agents' step, e.g. \"-p gpu\"");
  check_cmd->add_option(
      "--slurm-args", check.slurm_args,
      "Outside an allocation: ask Slurm for one (salloc ARGS, e.g. \"-p gpu -N 4\") and check its nodes");
  check_cmd->add_option("--slurm-wait", check.slurm_wait_s, "Seconds to wait for that allocation (default 300)")
      ->check(CLI::Range(1, 86400));
  check_cmd->add_option("--agents", check.agents, "Running agents to attach to: host:port,… or @FILE (one a line)");
  check_cmd->add_option("--token-file", check.token_file, "Token of attached agents");
  check_cmd->add_option("--ssh-opts", check.ssh_opts, "Extra ssh arguments, e.g. \"-p 2222 -i ~/.ssh/cluster\"");
  check_cmd->add_option("--mpirun-opts", check.mpirun_opts,
                        "Extra mpirun arguments, e.g. \"--mca btl_tcp_if_include eth0\"");
  check_cmd->add_option("--remote-dsdoctor", check.remote_dsdoctor,
                        "dsdoctor's path on the nodes (default: this one's)");
  check_cmd->add_option("--master_port", check.master_port, "Rendezvous port (MASTER_PORT)")
      ->check(CLI::Range(1, 65535));
  check_cmd->add_option("--agent-port", check.agent_port, "Port for started agents (0: any free port)")
      ->check(CLI::Range(0, 65535));
  check_cmd->add_option("--connect-timeout-ms", check.connect_timeout_ms, "Connect timeout per pair (DROP detection)")
      ->check(CLI::Range(100, 60000));
  check_cmd->add_flag("--no-bandwidth", check.no_bandwidth, "Skip bandwidth probes");
  check_cmd->add_option("--sizes", check.sizes, "All-reduce sizes: MIN-MAX (doubling) or a list, e.g. 8-64M, 1M,16M");
  check_cmd->add_option("--min-busbw", check.min_busbw, "Fail when the all-reduce's average busbw (GB/s) is below this")
      ->check(CLI::NonNegativeNumber);
  check_cmd->add_option("--min-p2p-gbit", check.min_p2p_gbit, "Fail p2p pairs below this many Gbit/s")
      ->check(CLI::NonNegativeNumber);
  check_cmd->add_option("--p2p-seconds", check.p2p_seconds, "Duration of each p2p transfer")
      ->check(CLI::Range(0.05, 30.0));
  check_cmd->add_option("--json", check.json_out, "Write the JSON document to FILE (- for stdout instead of text)");
  check_cmd->add_option("--junit", check.junit_out, "Write a JUnit XML report to FILE");
  check_cmd->add_flag("--no-color", no_color, "Plain marks even on a terminal");

  RunOptions run;
  auto* run_cmd =
      app.add_subcommand("run", "Start a training job's ranks, keep their logs, diagnose hangs and errors live");
  run_cmd->add_option("--hostfile", run.hostfile, "DeepSpeed/OpenMPI hostfile");
  run_cmd->add_option("--local", run.local, "Simulate N nodes on this machine")->check(CLI::Range(1, 250));
  run_cmd->add_option("--slots", run.slots, "Ranks per simulated node (--local)")->check(CLI::Range(1, 512));
  run_cmd->add_option("--log-dir", run.log_dir, "Folder for rank-<r>.log, rank-<r>.trace, run.json");
  run_cmd->add_option("--timeout", run.timeout_s, "Seconds before a consistent collective counts as stalled")
      ->check(CLI::Range(0.5, 86400.0));
  run_cmd
      ->add_option("--hang-after", run.hang_after_s,
                   "Seconds a rank may stay away from a collective the others wait in")
      ->check(CLI::Range(0.2, 86400.0));
  run_cmd
      ->add_option("--on-hang", run.on_hang,
                   "stop: report, capture stacks, end the job; wait: keep watching (default: stop; wait with --tui)")
      ->check(CLI::IsMember({"stop", "wait"}));
  run_cmd->add_option("--json", run.json_out, "Write the final report as JSON to FILE (- for stdout)");
  run_cmd->add_flag("--quiet", run.quiet, "Do not stream the ranks' output");
  run_cmd->add_flag("--tui", run.tui, "Live terminal view (ranks, findings, logs); q stops the job");
  run_cmd->add_flag(
      "--no-trace", run.no_trace,
      "Do not inject the collective tracers (Python, NCCL's profiler plugin) into the ranks (docs/run.md)");
  run_cmd->add_flag("--no-nccl-profiler", run.no_nccl_profiler,
                    "Leave NCCL_PROFILER_PLUGIN alone: NCCL's calls are not traced below Python (docs/run.md)");
  auto* trace_mpi_flag = run_cmd->add_flag(
      "--trace-mpi", run.trace_mpi,
      "An MPI program (found by itself when it links libmpi or imports mpi4py): mpirun starts the ranks, "
      "each handed to its node's agent, traced through MPI's profiling interface (docs/run.md)");
  run_cmd->add_flag("--no-mpi", run.no_mpi, "Not an MPI program: the agents start the ranks, whatever they link")
      ->excludes(trace_mpi_flag);
  run_cmd->add_flag("--direct", run.direct, "Start the ranks as children of dsdoctor, without agents (this node only)");
  run_cmd->add_option("--include,-i", run.include, "Like deepspeed: host[:slot,slot][@host…] to use");
  run_cmd->add_option("--exclude,-e", run.exclude, "Like deepspeed: host[:slot,slot][@host…] not to use");
  run_cmd->add_option("--num_nodes", run.num_nodes, "Like deepspeed: the first N nodes of the hostfile");
  run_cmd->add_option("--num_gpus,--num_accelerators", run.num_gpus, "Like deepspeed: slots 0..N-1 of every node");
  run_cmd
      ->add_option("--launcher", run.launcher,
                   "How agents start: local | ssh | pdsh | mpirun | slurm | attach (default: local for simulated "
                   "nodes, slurm inside a Slurm allocation, ssh for a hostfile)")
      ->check(CLI::IsMember({"local", "ssh", "pdsh", "mpirun", "slurm", "attach"}));
  run_cmd->add_option("--ssh-opts", run.ssh_opts, "Extra ssh arguments (ssh and pdsh launchers)");
  run_cmd->add_option("--mpirun-opts", run.mpirun_opts, "Extra mpirun arguments");
  run_cmd->add_option("--pdsh-opts", run.pdsh_opts, "Extra pdsh arguments");
  run_cmd->add_option("--slurm-opts", run.slurm_opts, "Extra srun arguments for the agents' step, e.g. \"-p gpu\"");
  run_cmd->add_option("--slurm-args", run.slurm_args,
                      "Outside an allocation: ask Slurm for one (salloc ARGS, e.g. \"-p gpu -N 4\") and run there");
  run_cmd->add_option("--slurm-wait", run.slurm_wait_s, "Seconds to wait for that allocation (default 300)")
      ->check(CLI::Range(1, 86400));
  run_cmd->add_option("--remote-dsdoctor", run.remote_dsdoctor, "dsdoctor's path on the nodes (default: this one's)");
  run_cmd->add_option("--agents", run.agents, "--launcher attach: running agents host:port,… or @FILE (one a line)");
  run_cmd->add_option("--token-file", run.token_file, "--launcher attach: the agents' token");
  run_cmd->add_option("--agent-port", run.agent_port, "Port for started agents (0: any free port)")
      ->check(CLI::Range(0, 65535));
  run_cmd->add_option("--master_addr", run.master_addr, "MASTER_ADDR for the ranks (default: the first node)");
  run_cmd->add_option("--master_port", run.master_port, "MASTER_PORT for the ranks")->check(CLI::Range(1, 65535));
  run_cmd->add_flag("--share-group", run.share_group,
                    "Let the group read the log dir (0750, files 0640); by default it is private (0700, files 0600)");
  run_cmd->add_flag(
      "--dry-run", run.dry_run,
      "Print the plan (nodes, slot ids, ranks, CUDA_VISIBLE_DEVICES, master) and start nothing; with --json - as JSON");
  run_cmd->add_option("--serve", run.serve,
                      "ADDR:PORT for `dsdoctor tui --attach` viewers (default 127.0.0.1:0, any free port; off: none)");
  run_cmd
      ->add_option("--reattach-window", run.reattach_window_s,
                   "If this coordinator goes (killed, its ssh session lost), the agents keep the ranks running and, "
                   "once they end, wait this many seconds for `dsdoctor attach` (default 600)")
      ->check(CLI::Range(0.0, 7 * 86400.0));
  run_cmd->add_flag("--no-color", no_color, "Plain output even on a terminal");
  run_cmd->add_option("command", run.command, "The program and its arguments (after --)")->required();

  AttachCmdOptions attach;
  auto* attach_cmd = app.add_subcommand(
      "attach", "Take over a running job whose `dsdoctor run` is gone: its report and exit code, as run's");
  attach_cmd->add_option("run_dir", attach.run_dir, "The run's log dir (it holds agents.json)")->required();
  attach_cmd->add_option("--json", attach.json_out, "Also write the final report as JSON to FILE (- for stdout)");
  attach_cmd->add_flag("--quiet", attach.quiet, "Do not stream the ranks' output");
  attach_cmd->add_option("--on-hang", attach.on_hang, "stop (default): report and end the job; wait: keep watching")
      ->check(CLI::IsMember({"stop", "wait"}));
  attach_cmd->add_option("--timeout", attach.timeout_s, "Stall threshold in seconds (default: the run's)")
      ->check(CLI::Range(0.5, 86400.0));
  attach_cmd->add_option("--hang-after", attach.hang_after_s, "Missing-rank threshold in seconds (default: the run's)")
      ->check(CLI::Range(0.2, 86400.0));
  attach_cmd->add_flag("--no-color", no_color, "Plain output even on a terminal");

  TuiOptions tui;
  auto* tui_cmd = app.add_subcommand("tui", "Live view of a running job (--attach) or of a recorded one (--replay)");
  auto* attach_opt = tui_cmd->add_option("--attach", tui.attach,
                                         "HOST:PORT of a running `dsdoctor run` (see its viewer.addr), or its log dir");
  tui_cmd->add_option("--token-file", tui.token_file,
                      "The run's viewer.token (default: in the log dir given to --attach)");
  auto* replay_opt = tui_cmd->add_option("--replay", tui.replay, "A run's events.jsonl, or its log dir");
  attach_opt->excludes(replay_opt);
  tui_cmd->add_flag("--dump", tui.dump,
                    "Print one frame as text (no terminal needed): the end of a replay, or the attached job now");
  tui_cmd->add_option("--at", tui.at, "--replay: the moment to start at (or to dump), seconds since the job started")
      ->check(CLI::NonNegativeNumber);
  tui_cmd->add_option("--speed", tui.speed, "--replay: playback speed (keys < and > change it)")
      ->check(CLI::Range(0.01, 1000.0));
  tui_cmd->add_option("--size", tui.size, "--dump: COLSxROWS (default 100x30)");

  AnalyzeOptions analyze;
  auto* analyze_cmd = app.add_subcommand("analyze",
                                         "Post-mortem diagnosis of a run's log dir, or of log files of any launcher "
                                         "(torchrun, deepspeed/pdsh, mpirun, srun, kubectl)");
  analyze_cmd->add_option("path", analyze.paths, "A run dir, or one or more log files; - reads standard input");
  analyze_cmd->add_flag("--list-patterns", analyze.list_patterns,
                        "Print the log pattern catalogue (Markdown) and exit");
  analyze_cmd->add_flag("--coverage", analyze.coverage,
                        "Print how many of the error formats NCCL and PyTorch print the catalogue explains "
                        "(Markdown) and exit");
  analyze_cmd->add_option("--explain", analyze.explain,
                          "Print every pattern behind a finding code (NCCL_ERROR) or a kind (nccl_ib_retry_exceeded, "
                          "nccl_src_ib): its source, expression, an example line, cause and remedy; \"all\" lists "
                          "every one");
  analyze_cmd->add_flag("--json", analyze.json, "Print the JSON report (docs/run.md)");
  analyze_cmd->add_option("--timeout", analyze.timeout_s, "Stall threshold in seconds")
      ->check(CLI::Range(0.5, 86400.0));
  analyze_cmd->add_option("--hang-after", analyze.hang_after_s, "Missing-rank threshold in seconds")
      ->check(CLI::Range(0.2, 86400.0));
  analyze_cmd->add_option("--slurm-job", analyze.slurm_job,
                          "Add what Slurm recorded of this job (sacct: OOM kill, node failure, time limit) and read "
                          "its output file; with no path, that file is the log");

  try {
    app.parse(argc, argv);
    check.self_args.assign(argv + 1, argv + argc);
    run.self_args.assign(argv + 1, argv + argc);
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
    if (*rank_exec_cmd) return RunRankExecCommand(rank_exec);
    if (*check_cmd) {
      check.color = !no_color && ::isatty(1) && !std::getenv("NO_COLOR");
      check.log_level = log_level;
      return RunCheck(check);
    }
    if (*run_cmd) {
      run.color = !no_color && ::isatty(1) && !std::getenv("NO_COLOR");
      run.log_level = log_level;
      return RunJob(run);
    }
    if (*analyze_cmd) return RunAnalyze(analyze);
    if (*attach_cmd) {
      attach.color = !no_color && ::isatty(1) && !std::getenv("NO_COLOR");
      return RunAttach(attach);
    }
    if (*tui_cmd) {
      if (tui.attach.empty() == tui.replay.empty()) {
        std::cerr << "dsdoctor tui: give --attach HOST:PORT|DIR or --replay FILE|DIR\n";
        return kExitUsage;
      }
      return RunTui(tui);
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
