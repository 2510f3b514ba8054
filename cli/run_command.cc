// `dsdoctor run` and `dsdoctor analyze` (docs/run.md).
//
// run: starts every rank as a child process with the rank environment of DESIGN.md, its
// stdout+stderr appended to <log-dir>/rank-<r>.log by the kernel (complete whatever happens to
// us), and streams the new lines with a "[r] " prefix. Every 200 ms it samples each rank (exit,
// trace ring, /proc, new log lines through the classifiers), runs the pure diagnosis engine and
// prints findings as they appear. On a hang it captures stacks, prints the report and (with
// --on-hang stop) ends the job; when the job ends by itself it prints the report and returns the
// job's exit code. Ranks die with us (PR_SET_PDEATHSIG) and Ctrl-C stops them all.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "agent/client.h"
#include "agent/token.h"
#include "cli/commands.h"
#include "cli/launch_flags.h"
#include "collectors/debug_profile.h"
#include "collectors/log_catalogue.h"
#include "collectors/run_dir.h"
#include "common/file.h"
#include "common/log.h"
#include "common/net.h"
#include "common/strings.h"
#include "coordinator/job_coordinator.h"
#include "coordinator/launcher.h"
#include "coordinator/observers.h"
#include "coordinator/plan.h"
#include "coordinator/rank_source.h"
#include "diagnosis/engine.h"
#include "diagnosis/report.h"
#include "probe/dsenv.h"
#include "tui/live.h"
#include "tui/view.h"

namespace dsd::cli {
namespace {

std::atomic<int> g_stop_signal{0};
void OnSignal(int sig) { g_stop_signal = sig; }

int EmitReport(const diagnosis::JobState& job, const diagnosis::Diagnosis& d, const std::string& json_out, bool color) {
  if (json_out == "-") {
    std::cout << diagnosis::RunJson(job, d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "\n" << diagnosis::RenderRunText(job, d, color);
    if (!json_out.empty()) {
      auto st = WriteFileAtomic(
          json_out, diagnosis::RunJson(job, d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
      if (!st.ok()) {
        std::cerr << "dsdoctor run: cannot write " << json_out << ": " << st.message() << "\n";
        return kExitInternal;
      }
    }
  }
  std::cout.flush();
  return kExitOk;
}

int FreeLoopbackPort() {
  int port = 0;
  auto l = net::Listen("127.0.0.1", 0, &port, 16);
  return l.ok() ? port : 29500;
}

// What every rank inherits from the launch: .deepspeed_env, NCCL_*/GLOO_*/TORCH_* and the log level.
std::map<std::string, std::string> JobEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string k = kv.substr(0, eq);
    if (StartsWith(k, "NCCL_") || StartsWith(k, "GLOO_") || StartsWith(k, "TORCH_") || k == "DSDOCTOR_LOG_LEVEL" ||
        k == "DSDOCTOR_TIMEOUT" || k == "DSDOCTOR_WATCHDOG_POLICY" || k == "DSDOCTOR_BACKEND")
      env[k] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : probe::MergeDsEnv(probe::FindDsEnvFiles())) env[k] = v;
  return env;
}

}  // namespace

int RunJob(const RunOptions& o) {
  auto log = log::Get("run");
  auto agent_list = coordinator::ParseAgentList(o.agents);
  if (!agent_list.ok()) {
    std::cerr << "dsdoctor run: " << agent_list.status().message() << "\n";
    return kExitUsage;
  }
  const std::vector<net::Endpoint>& endpoints = *agent_list;
  // Nodes: --local N simulated nodes with --slots each, the hostfile's (filtered like deepspeed's), or this node.
  coordinator::NodeSourceOptions node_source;
  node_source.hostfile = o.hostfile;
  node_source.local = o.local;
  node_source.local_slots = o.slots;
  node_source.attach_agents = endpoints.size();
  node_source.this_node_slots = o.slots;
  node_source.filters = {o.include, o.exclude, o.num_nodes, o.num_gpus};
  auto planned = coordinator::PlanJobNodes(node_source);
  if (!planned.ok()) {
    std::cerr << "dsdoctor run: " << planned.status().message() << "\n";
    return kExitUsage;
  }
  const coordinator::JobNodes& plan = *planned;
  const std::vector<coordinator::NodePlan>* nodes = &plan.nodes;
  const bool simulated = plan.simulated || o.launcher == "local";
  const std::string launcher_name = o.direct              ? "direct"
                                    : !o.launcher.empty() ? o.launcher
                                    : !endpoints.empty()  ? "attach"
                                    : simulated           ? "local"
                                                          : "ssh";
  if (o.direct && !simulated) {
    std::cerr << "dsdoctor run: --direct starts ranks on this machine only; a hostfile's nodes need agents\n";
    return kExitUsage;
  }
  // MASTER_ADDR like deepspeed's: --master_addr, else the first node (its agent's address when
  // simulated: local agents listen on 127.0.0.2, …).
  auto master_for = [&](const std::vector<std::string>& agent_addrs) {
    if (!o.master_addr.empty()) return o.master_addr;
    if (o.direct) return std::string("127.0.0.1");
    if (simulated) return agent_addrs.empty() ? std::string("127.0.0.2") : agent_addrs[0];
    // Attached agents without a hostfile: nodes are only named node-<i>; the first agent's address
    // is where rank 0 runs.
    if (plan.source == "--agents") return agent_addrs.empty() ? endpoints[0].host : agent_addrs[0];
    return (*nodes)[0].host;
  };
  if (o.dry_run) {
    auto ranks = coordinator::PlanRanks(plan, {}, master_for({}),
                                        o.master_port > 0 ? o.master_port
                                        : simulated       ? 0
                                                          : 29500);
    if (o.json_out == "-")
      std::cout << coordinator::PlanJson(plan, ranks, launcher_name)
                       .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    else
      std::cout << coordinator::PlanText(plan, ranks, launcher_name);
    return kExitOk;
  }
  for (const auto& note : plan.notes) std::cerr << "dsdoctor run: note: " << note << "\n";
  // Logs may hold secrets (tokens in a traceback, data paths): what we create is private.
  UsePrivateUmask(o.share_group);
  std::error_code ec;
  std::filesystem::create_directories(o.log_dir, ec);
  if (ec) {
    std::cerr << "dsdoctor run: cannot create log dir " << o.log_dir << ": " << ec.message() << "\n";
    return kExitUsage;
  }
  if (struct stat st; ::stat(o.log_dir.c_str(), &st) == 0 && (st.st_mode & 0007))
    std::cerr << "dsdoctor run: warning: log dir " << o.log_dir << " is open to other users (mode " << std::oct
              << (st.st_mode & 0777) << std::dec << "): chmod 700 " << o.log_dir << "\n";
  std::string log_dir = std::filesystem::absolute(o.log_dir).string();
  std::string cwd = std::filesystem::current_path().string();

  // The live view's event stream: recorded in events.jsonl (dsdoctor tui --replay) and served to
  // viewers (dsdoctor tui --attach) with a token of their own: a viewer only watches, so it must
  // not hold the agents' token, which runs commands.
  std::unique_ptr<tui::Publisher> publisher;
  {
    auto viewer_token = agent::GenerateToken();
    if (!viewer_token.ok()) {
      std::cerr << "dsdoctor run: " << viewer_token.status().message() << "\n";
      return kExitInternal;
    }
    tui::Publisher::Options po{log_dir + "/events.jsonl", o.serve == "off" ? "" : o.serve, *viewer_token};
    auto p = tui::Publisher::Start(po);
    if (!p.ok()) {
      std::cerr << "dsdoctor run: " << p.status().message() << "\n";
      return p.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitInternal;
    }
    publisher = std::move(*p);
    if (publisher->endpoint().port > 0) {
      Status st = agent::WriteTokenFile(log_dir + "/viewer.token", *viewer_token);
      if (st.ok()) st = WriteFileAtomic(log_dir + "/viewer.addr", publisher->endpoint().ToString() + "\n");
      if (!st.ok()) {
        std::cerr << "dsdoctor run: " << st.message() << "\n";
        return kExitInternal;
      }
    }
  }

  // Agents first (their addresses give MASTER_ADDR), unless --direct.
  std::unique_ptr<coordinator::Launcher> launcher;
  std::vector<coordinator::AgentHandle> handles;
  std::string token;
  if (!o.direct) {
    coordinator::LauncherChoice choice = LauncherChoiceFrom(o, launcher_name, endpoints, simulated);
    auto setup = coordinator::MakeLauncher(choice, nodes->size());
    if (!setup.ok()) {
      std::cerr << "dsdoctor run: " << setup.status().message() << "\n";
      return setup.status().code() == StatusCode::kInternal ? kExitInternal : kExitUsage;
    }
    launcher = std::move(setup->launcher);
    token = setup->token;
    handles = launcher->Start(*nodes, token);
    for (const auto& h : handles) {
      if (!h.error.empty()) {
        std::cerr << "dsdoctor run: agent on " << h.name << " did not start: " << h.error << "\n";
        return kExitProblems;
      }
    }
  }
  const int nnodes = static_cast<int>(nodes->size());
  const int world = plan.world_size();
  std::vector<std::string> agent_addrs, node_names;
  for (const auto& h : handles) {
    agent_addrs.push_back(h.endpoint.host);
    node_names.push_back(h.name);
  }
  if (handles.empty())
    for (int n = 0; n < nnodes; ++n) node_names.push_back("node-" + std::to_string(n));
  int master_port = o.master_port > 0 ? o.master_port : simulated ? FreeLoopbackPort() : 29500;
  coordinator::RankPlan rank_plan = coordinator::PlanRanks(plan, node_names, master_for(agent_addrs), master_port);
  char timeout_buf[32];
  std::snprintf(timeout_buf, sizeof timeout_buf, "%g", o.timeout_s);
  std::map<std::string, std::string> env = JobEnvironment();
  // NCCL's WARN lines always; every library's debug output at --log-level/DSDOCTOR_LOG_LEVEL debug.
  collectors::ApplyDiagnosticProfile(spdlog::get_level() <= spdlog::level::debug, &env);
  if (!env.count("DSDOCTOR_TIMEOUT")) env["DSDOCTOR_TIMEOUT"] = timeout_buf;
  env["PYTHONUNBUFFERED"] = "1";  // tracebacks and prints reach the log as they happen
  if (o.share_group) env["DSDOCTOR_TRACE_MODE"] = "0640";
  std::vector<std::vector<coordinator::RankLaunch>> per_node(nnodes);
  const std::vector<coordinator::RankLaunch>& all = rank_plan.ranks;
  for (const auto& l : all) per_node[l.node_index].push_back(l);

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  std::unique_ptr<tui::View> view;
  if (o.tui) {
    auto v = tui::View::Open();
    if (!v.ok()) {
      std::cerr << "dsdoctor run: " << v.status().message() << "\n";
      return kExitUsage;
    }
    view = std::move(*v);
  }
  std::unique_ptr<coordinator::RankSource> source;
  if (o.direct) {
    auto d = std::make_unique<coordinator::DirectSource>();
    if (Status st = d->Start(all, o.command, env, log_dir, cwd, !o.no_trace); !st.ok()) {
      std::cerr << "dsdoctor run: cannot start the ranks: " << st.message() << "\n";
      d->Signal(SIGKILL);
      return kExitInternal;
    }
    source = std::move(d);
  } else {
    std::vector<agent::AgentClient> clients;
    for (const auto& h : handles) {
      auto c = agent::AgentClient::Connect(h.endpoint, token, std::chrono::seconds(10));
      if (!c.ok()) {
        std::cerr << "dsdoctor run: agent " << h.name << " at " << h.endpoint.host << ":" << h.endpoint.port << ": "
                  << c.status().message() << "\n";
        return kExitProblems;
      }
      clients.push_back(std::move(*c));
    }
    auto a = std::make_unique<coordinator::AgentSource>(coordinator::AgentSourceOptions{}, &RealClock::Instance());
    if (Status st = a->Start(std::move(clients), per_node, o.command, env, log_dir, cwd, !o.no_trace, o.share_group);
        !st.ok()) {
      std::cerr << "dsdoctor run: " << st.message() << "\n";
      return kExitProblems;
    }
    source = std::move(a);
  }
  log->info("started {} ranks on {} nodes, logs in {}", world, nnodes, log_dir);
  if (!o.quiet && !o.tui) {
    std::printf("dsdoctor: %d ranks on %d nodes%s, logs and traces in %s\n", world, nnodes,
                o.direct ? " (direct)" : " (agents)", log_dir.c_str());
    if (publisher->endpoint().port > 0)
      std::printf("dsdoctor: live view: dsdoctor tui --attach %s\n", o.log_dir.c_str());
  }

  // --tui: the screen replaces the streamed lines; a hang is shown, not acted on, until q.
  const bool tui = view != nullptr;
  coordinator::JobOptions jo;
  jo.command = o.command;
  jo.log_dir = log_dir;
  jo.timeout_s = o.timeout_s;
  jo.hang_after_s = o.hang_after_s;
  jo.stop_on_hang = (!o.on_hang.empty() ? o.on_hang : tui ? "wait" : "stop") == "stop";
  coordinator::LiveStream live(
      std::move(publisher), Join(o.command, " "), world,
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  coordinator::TextPrinter printer(stdout, /*echo=*/!o.quiet && !tui);
  std::vector<coordinator::JobObserver*> observers = {&live};
  if (!tui) observers.push_back(&printer);  // under --tui a printed line would tear the screen
  coordinator::FanOut fan_out(observers);
  coordinator::JobCoordinator job(jo, all, source.get(), &RealClock::Instance(), &fan_out);
  tui::ViewState view_state;
  tui::LogTails paused_tails;
  tui::Snapshot tui_snapshot;
  while (job.Tick()) {
    if (g_stop_signal) job.RequestStop("interrupt", g_stop_signal);
    if (!tui) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    // Draw, then wait for keys until the next tick. Paused: the screen keeps its snapshot and logs.
    bool was_paused = view_state.paused;
    if (!was_paused) tui_snapshot = live.snapshot();
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    if (tui::Interact(*view, tui_snapshot, was_paused ? &paused_tails : &live.tails(), view_state, {}, until,
                      log_dir) &&
        !job.stopping())
      job.RequestStop("viewer");  // q: the person is done with this job
    if (view_state.paused && !was_paused) paused_tails = live.tails();
  }
  view.reset();                      // the terminal is ours again for the report
  job.NoteInterrupt(g_stop_signal);  // Ctrl-C during the last tick still counts
  coordinator::JobResult result = job.Finish();
  source.reset();
  if (launcher) launcher->Stop();
  int rc = EmitReport(result.job, result.diagnosis, o.json_out, o.color);
  if (rc != kExitOk) return rc;
  return result.exit_code;
}

int RunAnalyze(const AnalyzeOptions& o) {
  if (o.list_patterns) {
    std::cout << collectors::CatalogueMarkdown();
    return kExitOk;
  }
  if (o.paths.empty()) {
    std::cerr << "dsdoctor analyze: give a run dir, one or more log files, or - for standard input\n";
    return kExitUsage;
  }
  std::vector<std::string> warnings;
  collectors::RunDirOptions opts{o.timeout_s, o.hang_after_s};
  auto job = collectors::LoadLogs(o.paths, opts, &warnings);
  if (!job.ok()) {
    std::cerr << "dsdoctor analyze: " << job.status().message() << "\n";
    return kExitUsage;
  }
  for (const auto& w : warnings) std::cerr << "dsdoctor analyze: warning: " << w << "\n";
  diagnosis::Diagnosis d = diagnosis::Diagnose(*job);
  if (o.json) {
    nlohmann::json j = diagnosis::RunJson(*job, d);
    // The classified lines behind the findings, each with its file:line (docs/run.md).
    j["events"] = nlohmann::json::array();
    for (const auto& e : job->events) j["events"].push_back(diagnosis::ToJson(e));
    j["warnings"] = warnings;
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << diagnosis::RenderRunText(*job, d);
  }
  bool errors = std::any_of(d.findings.begin(), d.findings.end(),
                            [](auto& f) { return f.severity == diagnosis::Severity::kError; });
  return errors || d.hang ? kExitProblems : kExitOk;
}

}  // namespace dsd::cli
