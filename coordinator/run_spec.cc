#include "coordinator/run_spec.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "agent/token.h"
#include "collectors/debug_profile.h"
#include "common/file.h"
#include "common/strings.h"
#include "coordinator/launcher.h"

namespace dsd::coordinator {

namespace {

std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool PythonName(std::string_view path) {
  const std::string_view name = BaseName(path);
  return StartsWith(name, "python") || StartsWith(name, "pypy") || StartsWith(name, "ipython");
}

// argv[0] as exec would find it: itself when it has a slash, else the first match on PATH.
std::string Resolve(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  for (const auto& dir : Split(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return program;
}

}  // namespace

bool IsPythonCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return false;
  if (BaseName(argv[0]) == "env") {  // env [-i] [-u NAME] [NAME=VALUE …] PROGRAM …
    size_t i = 1;
    while (i < argv.size() && (StartsWith(argv[i], "-") || argv[i].find('=') != std::string::npos))
      i += argv[i] == "-u" || argv[i] == "--unset" ? 2 : 1;
    return i < argv.size() && IsPythonCommand(std::vector<std::string>(argv.begin() + i, argv.end()));
  }
  if (PythonName(argv[0])) return true;
  // A script run directly (./train.py): its interpreter line says, `#!/usr/bin/env python3` included.
  auto head = ReadFile(Resolve(argv[0]), 1u << 20);
  if (!head.ok() || !StartsWith(*head, "#!")) return false;
  const std::string_view line = std::string_view(*head).substr(0, head->find('\n'));
  for (const auto& word : SplitWhitespace(line.substr(2)))
    if (PythonName(word)) return true;
  return false;
}

std::vector<RankLaunch> RunSpec::NodeRanks(size_t index) const {
  std::vector<RankLaunch> out;
  for (const auto& l : ranks.ranks)
    if (static_cast<size_t>(l.node_index) == index) out.push_back(l);
  return out;
}

Result<RunSpec> PlanRun(const RunPlanOptions& o) {
  DSD_ASSIGN_OR_RETURN(JobNodes nodes, PlanJobNodes(o.nodes));
  RunSpec s;
  s.simulated = nodes.simulated || o.launcher == "local";
  s.launcher = o.direct              ? "direct"
               : !o.launcher.empty() ? o.launcher
                                     : DefaultLauncher(!o.agents.empty(), s.simulated, nodes.slurm);
  if (o.direct && !s.simulated)
    return InvalidArgument("--direct starts ranks on this machine only; a hostfile's nodes need agents");
  s.command = o.command;
  s.python = IsPythonCommand(o.command);
  std::error_code ec;
  s.cwd = std::filesystem::current_path(ec).string();
  s.run_dir = RunDir(std::filesystem::absolute(o.log_dir, ec).lexically_normal().string());
  if (!o.dry_run) {
    DSD_ASSIGN_OR_RETURN(s.run_id, agent::GenerateToken());
    s.run_id.resize(32);  // 128 bits tell two runs apart
  }
  s.trace_python = o.trace;
  s.share_group = o.share_group;
  s.timeout_s = o.timeout_s;
  s.hang_after_s = o.hang_after_s;
  // --tui: a hang is shown, not acted on, until the person presses q.
  s.stop_on_hang = (!o.on_hang.empty() ? o.on_hang : o.tui ? "wait" : "stop") == "stop";
  s.tui = o.tui;
  s.quiet = o.quiet;
  s.serve = o.serve;
  s.reattach_window = std::chrono::milliseconds(static_cast<int64_t>(o.reattach_window_s * 1000));
  // MASTER_ADDR as deepspeed picks it: --master_addr, else the first node, which is its agent's
  // address when simulated (local agents listen on 127.0.0.2, …) or attached without a hostfile.
  s.master_addr = !o.master_addr.empty()       ? o.master_addr
                  : o.direct                   ? "127.0.0.1"
                  : s.simulated                ? LocalLauncherOptions{}.first_address
                  : nodes.source == "--agents" ? o.agents.at(0).host
                                               : nodes.nodes.at(0).host;
  s.master_port = o.master_port > 0 ? o.master_port : !s.simulated ? 29500 : o.dry_run ? 0 : net::PickUnusedPort();
  s.ranks = PlanRanks(nodes, {}, s.master_addr, s.master_port);
  s.nodes = std::move(nodes);
  // Every rank's environment: what travels from this shell (job_env.h), the diagnostic profile
  // (NCCL's WARN lines always; every library's debug output at the debug level; a variable the
  // user set wins), and what run itself sets.
  s.env = JobEnvironment();
  collectors::ApplyDiagnosticProfile(o.debug, &s.env);
  if (!s.env.count("DSDOCTOR_TIMEOUT")) {
    char timeout[32];
    std::snprintf(timeout, sizeof timeout, "%g", o.timeout_s);
    s.env["DSDOCTOR_TIMEOUT"] = timeout;  // the bundled runtime's watchdog
  }
  s.env["PYTHONUNBUFFERED"] = "1";  // tracebacks and prints reach the log as they happen
  // The agents add NCCL's profiler plugin to traced ranks (collectors/python_tracer.h) unless told.
  if (!o.nccl_profiler) s.env["DSDOCTOR_NCCL_PROFILER"] = "off";
  if (o.share_group) s.env["DSDOCTOR_TRACE_MODE"] = "0640";
  return s;
}

}  // namespace dsd::coordinator
