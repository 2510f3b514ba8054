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
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "agent/client.h"
#include "agent/token.h"
#include "cli/commands.h"
#include "collectors/debug_profile.h"
#include "collectors/log_catalogue.h"
#include "collectors/log_classifier.h"
#include "collectors/proc_stat.h"
#include "collectors/python_tracer.h"
#include "collectors/rank_monitor.h"
#include "collectors/run_dir.h"
#include "collectors/stack.h"
#include "common/file.h"
#include "common/log.h"
#include "common/net.h"
#include "common/strings.h"
#include "common/subprocess.h"
#include "coordinator/launcher.h"
#include "coordinator/plan.h"
#include "diagnosis/engine.h"
#include "diagnosis/report.h"
#include "probe/dsenv.h"
#include "runtime/trace.h"
#include "tui/live.h"
#include "tui/model.h"
#include "tui/stream.h"
#include "tui/view.h"

namespace dsd::cli {
namespace {

std::atomic<int> g_stop_signal{0};
void OnSignal(int sig) { g_stop_signal = sig; }

// How long the other ranks may go on after one failed before `run` stops them.
constexpr double kFailFastGraceS = 10;

std::string FindingKey(const diagnosis::Finding& f) { return f.code + ":" + diagnosis::FormatRanks(f.ranks); }

// Whether dsdoctor ended the ranks (docs/run.md, run.json "stopped_by_dsdoctor"): `analyze` then
// describes them as they were before our signal and never blames the signal on them.
struct Stop {
  bool stopped = false;
  std::string reason;  // "hang" | "interrupt" (Ctrl-C, SIGTERM to dsdoctor) | "viewer" (q in the TUI)
  int64_t at_ns = 0;
};

void WriteManifest(const std::string& dir, const diagnosis::JobState& job, const diagnosis::Diagnosis& d,
                   const std::vector<std::string>& command, const Stop& stop = {}) {
  nlohmann::json j = diagnosis::RunJson(job, d);
  j["command"] = command;
  j["stall_after_s"] = job.stall_after_s;
  j["hang_after_s"] = job.hang_after_s;
  j["now_ns"] = job.now_ns;
  if (stop.stopped) j["stopped_by_dsdoctor"] = {{"reason", stop.reason}, {"at_ns", stop.at_ns}};
  auto st = WriteFileAtomic(dir + "/run.json", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  if (!st.ok()) log::Get("run")->warn("cannot write {}/run.json: {}", dir, st.message());
}

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

// Steps per second of the slowest traced rank since the start (0 before any trace).
double StepRate(const diagnosis::JobState& job, int64_t now, int64_t start_ns) {
  uint64_t step = UINT64_MAX;
  for (const auto& r : job.ranks)
    if (r.has_trace) step = std::min<uint64_t>(step, r.step);
  return step != UINT64_MAX && now > start_ns ? step / ((now - start_ns) / 1e9) : 0;
}

int FreeLoopbackPort() {
  int port = 0;
  auto l = net::Listen("127.0.0.1", 0, &port, 16);
  return l.ok() ? port : 29500;
}

// Where rank states come from: the agents of the nodes (the default), or children of this
// process (--direct). Tick copies the newest state of every rank into `ranks` (keeping the
// coordinator's own fields: stack) and appends each rank's new output to logs[rank].
class RankSource {
 public:
  virtual ~RankSource() = default;
  virtual void Tick(int64_t now, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) = 0;
  virtual void Signal(int sig) = 0;
  // rank → stack signature, for the given ranks (one per class).
  virtual std::map<int, std::string> Stacks(const std::vector<int>& ranks) = 0;
};

void Adopt(diagnosis::RankState& into, const diagnosis::RankState& from) {
  std::string stack = std::move(into.stack);
  into = from;
  if (into.stack.empty()) into.stack = std::move(stack);
}

using coordinator::RankLaunch;

class DirectSource final : public RankSource {
 public:
  Status Start(const std::vector<RankLaunch>& launches, const std::vector<std::string>& argv,
               const std::map<std::string, std::string>& env, const std::string& log_dir, const std::string& cwd,
               bool trace_python) {
    python_ = argv[0].find("python") != std::string::npos;
    std::optional<collectors::PythonTracer> tracer;
    if (trace_python && !(tracer = collectors::FindPythonTracer()))
      log::Get("run")->warn(
          "the Python collective tracer is not installed beside this binary; Python ranks run untraced");
    for (const auto& l : launches) {
      std::string base = log_dir + "/rank-" + std::to_string(l.rank);
      monitors_.emplace_back(l.rank, l.local_rank, l.node, base + ".log", base + ".trace");
      auto e = env;
      for (const auto& [k, v] : l.env) e[k] = v;
      if (tracer) collectors::AddPythonTracer(*tracer, &e);
      DSD_RETURN_IF_ERROR(monitors_.back().Start(argv, e, cwd));
    }
    return Status::Ok();
  }
  void Tick(int64_t now, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) override {
    for (auto& m : monitors_) {
      m.Tick(now, &logs[m.state().rank]);
      Adopt(ranks[m.state().rank], m.state());
    }
  }
  void Signal(int sig) override {
    for (auto& m : monitors_) m.Signal(sig);
  }
  std::map<int, std::string> Stacks(const std::vector<int>& want) override {
    std::map<int, std::string> out;
    for (int r : want) {
      auto& m = monitors_[r];
      if (m.state().status != diagnosis::RankStatus::kRunning) continue;
      auto st = collectors::CaptureStack(m.state().pid, python_);
      if (!st.ok()) continue;
      out[r] = st->signature;
      (void)WriteFileAtomic(m.log_path().substr(0, m.log_path().size() - 4) + ".stack",
                            "# " + st->tool + "\n" + st->text);
    }
    return out;
  }

 private:
  std::vector<collectors::RankMonitor> monitors_;
  bool python_ = false;
};

// One connection per agent, each read by its own thread; the main thread only sends.
class AgentSource final : public RankSource {
 public:
  ~AgentSource() override {
    for (auto& a : agents_) ::shutdown(a->client.fd(), SHUT_RDWR);
    for (auto& a : agents_)
      if (a->reader.joinable()) a->reader.join();
  }
  Status Start(std::vector<agent::AgentClient> clients, const std::vector<std::vector<RankLaunch>>& per_node,
               const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               const std::string& log_dir, const std::string& cwd, bool trace_python) {
    for (size_t i = 0; i < clients.size(); ++i) {
      auto a = std::make_unique<Agent>(std::move(clients[i]));
      nlohmann::json ranks = nlohmann::json::array();
      for (const auto& l : per_node[i]) {
        ranks.push_back({{"rank", l.rank}, {"local_rank", l.local_rank}, {"env", l.env}});
        a->ranks.push_back(l.rank);
      }
      nlohmann::json req = {{"type", "run"}, {"argv", argv},   {"env", env},       {"log_dir", log_dir},
                            {"cwd", cwd},    {"ranks", ranks}, {"sample_ms", 200}, {"trace_python", trace_python}};
      DSD_RETURN_IF_ERROR(net::SendFrame(a->client.fd(), req));
      auto reply = net::RecvFrame(a->client.fd(), a->client.decoder(), std::chrono::seconds(30));
      if (!reply.ok()) return Unavailable("agent " + a->client.agent_name() + ": " + reply.status().message());
      if (reply->value("type", "") != "started")
        return Unavailable("agent " + a->client.agent_name() +
                           " could not start its ranks: " + reply->value("message", reply->dump()));
      Agent* raw = a.get();
      a->reader = std::thread([this, raw] { Read(*raw); });
      agents_.push_back(std::move(a));
    }
    return Status::Ok();
  }
  void Tick(int64_t now, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [r, st] : latest_) Adopt(ranks[r], st);
    for (auto& [r, text] : pending_log_) logs[r] += text;
    pending_log_.clear();
  }
  void Signal(int sig) override {
    for (auto& a : agents_) (void)net::SendFrame(a->client.fd(), {{"type", "stop"}, {"signal", sig}});
  }
  std::map<int, std::string> Stacks(const std::vector<int>& want) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stacks_.clear();
      stack_replies_ = 0;
    }
    for (auto& a : agents_) {
      std::vector<int> mine;
      for (int r : want)
        if (std::find(a->ranks.begin(), a->ranks.end(), r) != a->ranks.end()) mine.push_back(r);
      (void)net::SendFrame(a->client.fd(), {{"type", "stacks"}, {"ranks", mine}});
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(30), [&] { return stack_replies_ + dead_ >= agents_.size(); });
    return stacks_;
  }

 private:
  struct Agent {
    explicit Agent(agent::AgentClient c) : client(std::move(c)) {}
    agent::AgentClient client;
    std::vector<int> ranks;
    std::thread reader;
  };
  void Read(Agent& a) {
    while (true) {
      auto msg = net::RecvFrame(a.client.fd(), a.client.decoder(), std::chrono::seconds(3600));
      if (!msg.ok()) {
        if (msg.status().code() == StatusCode::kTimeout) continue;
        std::lock_guard<std::mutex> lock(mu_);
        // The agent is gone (or finished): ranks it did not report as exited are lost with it.
        for (int r : a.ranks) {
          auto& st = latest_[r];
          if (st.status != diagnosis::RankStatus::kExited) {
            st.status = diagnosis::RankStatus::kExited;
            st.exit_code = 255;
            st.exit_ns = runtime::TraceNowNs();
            log::Get("run")->warn("agent {}: connection lost ({}); rank {} is lost with it", a.client.agent_name(),
                                  msg.status().message(), r);
          }
        }
        ++dead_;
        cv_.notify_all();
        return;
      }
      std::string type = msg->value("type", "");
      std::lock_guard<std::mutex> lock(mu_);
      if (type == "sample") {
        for (const auto& j : (*msg)["ranks"]) {
          auto st = diagnosis::RankStateFromJson(j);
          if (!st.ok()) continue;
          // When the agent read this state (its clock): ages are measured to it, never to ours.
          if (!st->sample_ns) st->sample_ns = msg->value("now_ns", int64_t{0});
          if (j.contains("log")) pending_log_[st->rank] += j["log"].get<std::string>();
          latest_[st->rank] = std::move(*st);
        }
      } else if (type == "stacks") {
        for (const auto& s : (*msg)["stacks"])
          if (s.contains("signature")) stacks_[s["rank"].get<int>()] = s["signature"].get<std::string>();
        ++stack_replies_;
        cv_.notify_all();
      } else if (type == "done") {
        continue;
      }
    }
  }

  std::vector<std::unique_ptr<Agent>> agents_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, diagnosis::RankState> latest_;
  std::map<int, std::string> pending_log_;
  std::map<int, std::string> stacks_;
  size_t stack_replies_ = 0;
  size_t dead_ = 0;  // agents whose connection ended (they answer no more requests)
};

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

// Ranks that moved between two looks: a new or finished trace record, a new step or exit; with
// `cpu`, also a process tree whose CPU grew past the flatness threshold (5 % of a core,
// RankMonitor) outside a blocking call (a rank spinning inside a collective's transport has not
// moved). A rank that moved is not hung, and a stack taken before describes it no more.
std::vector<int> MovedSince(const diagnosis::JobState& before, const diagnosis::JobState& after, bool cpu) {
  auto key = [](const diagnosis::RankState& r) {
    std::string k = diagnosis::RankStatusName(r.status);
    if (r.last)
      k += "|" + std::to_string(r.last->comm) + ":" + r.last->op + "#" + std::to_string(r.last->seq) + ":" +
           r.last->state;
    if (r.in_flight) k += "|" + r.in_flight->op + "#" + std::to_string(r.in_flight->seq);
    return k + "|" + std::to_string(r.step) + "|" + std::to_string(r.recent.size());
  };
  std::vector<int> moved;
  for (size_t r = 0; r < before.ranks.size() && r < after.ranks.size(); ++r) {
    const auto& b = before.ranks[r];
    const auto& a = after.ranks[r];
    bool cpu_grew = cpu && a.status == diagnosis::RankStatus::kRunning && a.proc.valid && b.proc.valid &&
                    !(a.in_flight && a.in_flight->blocking()) && a.proc.flat_for_s + 1e-9 < b.proc.flat_for_s;
    if (cpu_grew || key(b) != key(a)) moved.push_back(static_cast<int>(r));
  }
  return moved;
}

// Python ranks without py-spy get native stacks only: say once what is missing and how to get it.
template <typename Say>
void WarnOnceWithoutPySpy(const std::vector<std::string>& command, Say say, bool* said) {
  if (*said || command.empty() || Join(command, " ").find("python") == std::string::npos) return;
  if (collectors::PySpyAvailable()) return;
  *said = true;
  say("dsdoctor: py-spy is not installed, so Python ranks show native stacks only (no Python frames): "
      "`pip install py-spy`, or set DSDOCTOR_PY_SPY to its path\n");
}

}  // namespace

int RunJob(const RunOptions& o) {
  auto log = log::Get("run");
  std::vector<net::Endpoint> endpoints;
  for (const auto& part : o.agents.empty() ? std::vector<std::string>{} : Split(o.agents, ',')) {
    auto e = net::ParseEndpoint(std::string(Trim(part)));
    if (!e.ok()) {
      std::cerr << "dsdoctor run: --agents: " << e.status().message() << "\n";
      return kExitUsage;
    }
    endpoints.push_back(*e);
  }
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
    return (*nodes)[0].host;
  };
  if (o.dry_run) {
    auto ranks = coordinator::PlanRanks(plan, {}, master_for({}),
                                        o.master_port > 0 ? o.master_port
                                        : simulated       ? 0
                                                          : 29500);
    if (o.json_out == "-")
      std::cout << coordinator::PlanJson(plan, ranks, launcher_name).dump(2) << "\n";
    else
      std::cout << coordinator::PlanText(plan, ranks, launcher_name);
    return kExitOk;
  }
  for (const auto& note : plan.notes) std::cerr << "dsdoctor run: note: " << note << "\n";
  std::error_code ec;
  std::filesystem::create_directories(o.log_dir, ec);
  if (ec) {
    std::cerr << "dsdoctor run: cannot create log dir " << o.log_dir << ": " << ec.message() << "\n";
    return kExitUsage;
  }
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
    coordinator::LauncherChoice choice;
    choice.kind = launcher_name;
    choice.self_binary = SelfExe();
    choice.remote_dsdoctor = o.remote_dsdoctor;
    choice.ssh_args = SplitWhitespace(o.ssh_opts);
    choice.mpirun_args = SplitWhitespace(o.mpirun_opts);
    choice.pdsh_args = SplitWhitespace(o.pdsh_opts);
    choice.agents = endpoints;
    choice.token_file = o.token_file;
    choice.agent_port = o.agent_port;
    choice.log_level = o.log_level;
    choice.simulated = simulated;
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
  std::vector<std::vector<RankLaunch>> per_node(nnodes);
  const std::vector<RankLaunch>& all = rank_plan.ranks;
  for (const auto& l : all) per_node[l.node_index].push_back(l);

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  std::unique_ptr<tui::View> view;
  tui::Snapshot tui_snapshot;
  if (o.tui) {
    auto v = tui::View::Open();
    if (!v.ok()) {
      std::cerr << "dsdoctor run: " << v.status().message() << "\n";
      return kExitUsage;
    }
    view = std::move(*v);
  }
  std::unique_ptr<RankSource> source;
  if (o.direct) {
    auto d = std::make_unique<DirectSource>();
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
    auto a = std::make_unique<AgentSource>();
    if (Status st = a->Start(std::move(clients), per_node, o.command, env, log_dir, cwd, !o.no_trace); !st.ok()) {
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

  diagnosis::JobState job;
  job.world_size = world;
  job.stall_after_s = o.timeout_s;
  job.hang_after_s = o.hang_after_s;
  job.ranks.resize(world);
  for (const auto& l : all) {
    job.ranks[l.rank].rank = l.rank;
    job.ranks[l.rank].node = l.node;
    job.ranks[l.rank].local_rank = l.local_rank;
    job.ranks[l.rank].status = diagnosis::RankStatus::kRunning;
  }
  std::vector<collectors::LogClassifier> classifiers;
  for (int r = 0; r < world; ++r) classifiers.emplace_back(r);
  std::vector<std::string> partial(world), fresh(world);
  std::set<std::string> announced;
  bool hang_reported = false, stopped_by_us = false, suspect_said = false, said_no_py_spy = false;
  int64_t next_stacks_ns = 0, first_failure_ns = 0;
  std::string stop_reason;
  diagnosis::JobState stack_job;        // the ranks when stacks were last taken
  diagnosis::Diagnosis hang_diagnosis;  // what proved the hang we acted on
  int64_t hang_ns = 0, stop_deadline_ns = 0;
  int job_code = 0;
  std::vector<diagnosis::RankState> at_hang;
  // --tui: the screen replaces the streamed lines; a hang is shown, not acted on, until q.
  const bool tui = view != nullptr;
  const bool echo = !o.quiet && !tui;
  const std::string on_hang = !o.on_hang.empty() ? o.on_hang : tui ? "wait" : "stop";
  tui::LogTails tails, paused_tails;
  tui::ViewState view_state;
  tui::StreamEncoder encoder;
  const std::string job_text = Join(o.command, " ");
  int64_t start_ns = runtime::TraceNowNs();
  auto elapsed = [&](int64_t ns) { return ns > start_ns ? (ns - start_ns) / 1e9 : 0.0; };
  std::vector<nlohmann::json> events;  // this tick's, for the publisher
  events.push_back(tui::HeaderEvent(
      job_text, world,
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count()));
  std::vector<std::vector<std::string>> new_lines(world);
  auto take_line = [&](int r, std::string_view line) {
    tails.Append(r, line);
    if (new_lines[r].size() < tui::kMaxLogLinesPerEvent)
      new_lines[r].emplace_back(line);
    else if (new_lines[r].size() == tui::kMaxLogLinesPerEvent)
      new_lines[r].push_back("[dsdoctor: more lines in this tick are in rank-" + std::to_string(r) + ".log only]");
  };
  auto flush_lines = [&](double t) {
    for (int r = 0; r < world; ++r)
      if (!new_lines[r].empty()) {
        events.push_back(tui::LogEvent(t, r, new_lines[r]));
        new_lines[r].clear();
      }
  };
  diagnosis::Diagnosis current;  // what the live view shows
  auto say = [&](const char* fmt, auto... args) {
    if (!tui) std::printf(fmt, args...);
  };
  auto feed_logs = [&](bool final) {
    for (int r = 0; r < world; ++r) {
      partial[r] += fresh[r];
      fresh[r].clear();
      size_t start = 0;
      for (size_t nl; (nl = partial[r].find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string_view line(partial[r].data() + start, nl - start);
        if (echo) std::printf("[%d] %.*s\n", r, static_cast<int>(line.size()), line.data());
        take_line(r, line);
        for (auto& e : classifiers[r].Feed(line)) job.events.push_back(std::move(e));
      }
      partial[r].erase(0, start);
      if (final) {
        if (!partial[r].empty()) {
          take_line(r, partial[r]);
          for (auto& e : classifiers[r].Feed(partial[r])) job.events.push_back(std::move(e));
        }
        for (auto& e : classifiers[r].Finish()) job.events.push_back(std::move(e));
      }
    }
    if (echo) std::fflush(stdout);
  };
  int64_t stop_ns = 0;
  auto stop_all = [&](int sig) {
    if (!stopped_by_us) {
      stop_ns = runtime::TraceNowNs();
      at_hang = job.ranks;  // the last states before our signal: what the final report describes
      hang_ns = stop_ns;
    }
    stopped_by_us = true;
    source->Signal(sig);
  };
  while (true) {
    int64_t now = runtime::TraceNowNs();
    job.now_ns = now;
    std::vector<diagnosis::RankStatus> before;
    for (const auto& r : job.ranks) before.push_back(r.status);
    source->Tick(now, job.ranks, fresh);
    feed_logs(false);
    bool any_running = false;
    for (auto& r : job.ranks) {
      if (before[r.rank] == diagnosis::RankStatus::kRunning && r.status == diagnosis::RankStatus::kExited) {
        if (echo)
          std::printf("dsdoctor: rank %d %s\n", r.rank,
                      r.signal ? ("signal " + std::to_string(r.signal) + " (" + strsignal(r.signal) + ")").c_str()
                               : ("exit " + std::to_string(r.exit_code)).c_str());
      }
      any_running |= r.status == diagnosis::RankStatus::kRunning;
    }
    if (!any_running) break;
    // Like torchrun and the deepspeed launcher, a failed rank ends the job: the others are stopped
    // once they had kFailFastGraceS to print their own errors (their tracebacks are evidence).
    if (!stopped_by_us && !first_failure_ns)
      for (const auto& r : job.ranks)
        if (r.status == diagnosis::RankStatus::kExited && (r.signal || r.exit_code)) first_failure_ns = now;
    if (!stopped_by_us && first_failure_ns && now - first_failure_ns > static_cast<int64_t>(kFailFastGraceS * 1e9) &&
        !stop_deadline_ns) {
      say("dsdoctor: a rank failed %.0f s ago; stopping the remaining ranks (as torchrun does)\n", kFailFastGraceS);
      stop_all(SIGTERM);
      stop_reason = "failed";
      stop_deadline_ns = now + 3'000'000'000LL;
    }
    if (g_stop_signal && !stop_deadline_ns) {
      say("dsdoctor: %s: stopping every rank\n", strsignal(g_stop_signal.load()));
      stop_all(SIGTERM);
      stop_deadline_ns = now + 3'000'000'000LL;
    }
    if (stop_deadline_ns && now > stop_deadline_ns) {
      stop_all(SIGKILL);
      stop_deadline_ns = now + 3'000'000'000LL;
    }
    if (stopped_by_us) current = diagnosis::Diagnose(job);  // ranks leaving
    if (!stopped_by_us) {
      diagnosis::Diagnosis d = diagnosis::Diagnose(job);
      current = d;
      for (const auto& f : d.findings)
        if (announced.insert(FindingKey(f)).second)
          say("dsdoctor: %s %s: %s\n", diagnosis::SeverityName(f.severity), f.code.c_str(), f.summary.c_str());
      std::fflush(stdout);
      // Stacks are taken on a proven hang (for the report) and on a suspicion (they may prove it,
      // or show the rank is busy elsewhere); a suspicion never stops the job by itself.
      if ((d.hang || d.suspect || d.look) && !hang_reported && now >= next_stacks_ns) {
        // One stack per class of hung ranks (a few attaches, not one per rank).
        // Untraced ranks look alike from outside, so each gets its own stack (up to 64); traced
        // ranks are told apart by their calls, so one stack per class (up to 8) is enough.
        std::vector<int> reps;
        std::map<int, std::vector<int>> class_of;  // representative → its class
        for (const auto& cl : d.classes) {
          for (int r : cl.ranks) {
            if (job.ranks[r].status != diagnosis::RankStatus::kRunning) continue;
            bool own = !job.ranks[r].has_trace;
            if (own ? reps.size() >= 64 : (class_of.size() >= 8 || r != cl.ranks.front())) continue;
            reps.push_back(r);
            class_of[r] = own ? std::vector<int>{r} : cl.ranks;
          }
        }
        const diagnosis::JobState before_job = job;
        auto stacks = source->Stacks(reps);
        for (const auto& [rep, members] : class_of)
          if (auto it = stacks.find(rep); it != stacks.end())
            for (int r : members) job.ranks[r].stack = it->second;
        WarnOnceWithoutPySpy(o.command, say, &said_no_py_spy);
        // Samples that arrived while the stacks were taken (another node's agent may lag a tick).
        source->Tick(runtime::TraceNowNs(), job.ranks, fresh);
        feed_logs(false);
        // Before acting, check that nothing moved while we looked: a new or finished call, CPU
        // growth anywhere in a rank's process tree. A rank that moved is not hung.
        // CPU growth matters to proofs that rest on stacks; trace proofs only need the records still.
        bool trace_proof_only =
            d.hang && std::none_of(d.findings.begin(), d.findings.end(), [](const diagnosis::Finding& f) {
              return f.proof == diagnosis::proof::kStacks || f.proof == diagnosis::proof::kHeuristic;
            });
        std::vector<int> moved = MovedSince(before_job, job, /*cpu=*/!trace_proof_only);
        for (int r : moved) job.ranks[r].stack.clear();
        int64_t t = runtime::TraceNowNs();
        job.now_ns = t;
        // The stacks may say more (Python ranks inside different collectives, a blocked rank's frame).
        diagnosis::Diagnosis with_stacks = diagnosis::Diagnose(job);
        for (const auto& f : with_stacks.findings)
          if (announced.insert(FindingKey(f)).second)
            say("dsdoctor: %s %s: %s\n", diagnosis::SeverityName(f.severity), f.code.c_str(), f.summary.c_str());
        current = with_stacks;
        stack_job = job;
        if (with_stacks.hang && moved.empty()) {
          hang_reported = true;
          hang_ns = t;
          at_hang = job.ranks;
          hang_diagnosis = with_stacks;
          WriteManifest(log_dir, job, with_stacks, o.command);
          say("dsdoctor: the job is hung%s\n",
              on_hang == "stop" ? "; stopping every rank (report below)" : "; watching on (--on-hang wait)");
          if (on_hang == "stop") {
            stop_all(SIGTERM);
            stop_deadline_ns = now + 3'000'000'000LL;
          }
        } else {
          if (!moved.empty()) {
            // debug, not info: under --tui a log line on stderr would tear the screen
            log->debug("{} moved while their stacks were taken: not hung; watching on", diagnosis::FormatRanks(moved));
          } else if (!suspect_said && with_stacks.suspect) {
            say("dsdoctor: a rank may be stuck (a suspicion, not proof: the job goes on)\n");
            suspect_said = true;
          }
          // Look again in a while, sooner when something moved.
          next_stacks_ns = runtime::TraceNowNs() + (moved.empty() ? 15'000'000'000LL : 3'000'000'000LL);
        }
      }
      // Stacks describe a rank only while it stays where it was.
      if (!stack_job.ranks.empty())
        for (int r : MovedSince(stack_job, job, /*cpu=*/true)) job.ranks[r].stack.clear();
    }
    // The live view: this tick's log lines, then the snapshot; to viewers, the recording, the screen.
    tui::Snapshot snap = tui::BuildSnapshot(job, current, {job_text, start_ns, StepRate(job, now, start_ns)});
    flush_lines(snap.elapsed_s);
    events.push_back(encoder.Tick(snap));
    publisher->Publish(events);
    events.clear();
    if (!tui) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    // Draw, then wait for keys until the next tick. Paused: the screen keeps its snapshot and logs.
    bool was_paused = view_state.paused;
    if (!was_paused) tui_snapshot = std::move(snap);
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    if (tui::Interact(*view, tui_snapshot, was_paused ? &paused_tails : &tails, view_state, {}, until, log_dir) &&
        !stop_deadline_ns) {
      stop_all(SIGTERM);  // q: the person is done with this job
      stop_deadline_ns = runtime::TraceNowNs() + 3'000'000'000LL;
    }
    if (view_state.paused && !was_paused) paused_tails = tails;
  }
  view.reset();  // the terminal is ours again for the report
  // Final report: everything the logs said, through to their last line, and whole trace rings (a
  // completed mismatch, such as a different reduce op, may lie far back).
  source->Tick(runtime::TraceNowNs(), job.ranks, fresh);
  feed_logs(true);
  for (auto& r : job.ranks)
    if (auto t = runtime::ReadTrace(log_dir + "/rank-" + std::to_string(r.rank) + ".trace"); t.ok())
      collectors::ApplyTrace(*t, &r, t->records.size());
  job.now_ns = runtime::TraceNowNs();
  job.job_ended = true;
  // The job's code is the first failure's (torchrun's "first observed failure"). Nodes report
  // exits on their own ticks, so a rank killed by a signal within 0.5 s of the first exit counts
  // as first: its peers failed because it vanished (SIGPIPE is such a peer: it wrote to the dead
  // rank's connection). Exits we caused by stopping do not count.
  {
    const diagnosis::RankState* first = nullptr;
    for (const auto& r : job.ranks) {
      bool failed = r.status == diagnosis::RankStatus::kExited && (r.signal || r.exit_code) &&
                    (!stopped_by_us || r.exit_ns < stop_ns);
      if (failed && (!first || r.exit_ns < first->exit_ns)) first = &r;
    }
    if (first) {
      for (const auto& r : job.ranks)
        if (r.status == diagnosis::RankStatus::kExited && r.signal && r.signal != SIGPIPE &&
            (!first->signal || first->signal == SIGPIPE) && r.exit_ns <= first->exit_ns + 500'000'000LL &&
            (!stopped_by_us || r.exit_ns < stop_ns))
          first = &r;
      job_code = first->signal ? 128 + first->signal : first->exit_code;
    }
  }
  if (stopped_by_us && !at_hang.empty()) {
    // We ended the hung ranks: diagnose them as they were, not the exits we caused.
    for (auto& r : job.ranks)
      if (at_hang[r.rank].status == diagnosis::RankStatus::kRunning) r = at_hang[r.rank];
    job.now_ns = hang_ns;
    job.job_ended = false;
  }
  diagnosis::Diagnosis final_d = diagnosis::Diagnose(job);
  if (hang_reported) {
    // The report says what the live output said: the proven findings we acted on stay, even if
    // the final look (stacks gone, logs of the ranks' ends) would rank them differently.
    std::set<std::string> have;
    for (const auto& f : final_d.findings) have.insert(FindingKey(f));
    for (const auto& f : hang_diagnosis.findings)
      if (!have.count(FindingKey(f)) && f.proof != diagnosis::proof::kHeuristic) final_d.findings.push_back(f);
    final_d.hang = true;
    diagnosis::SortBySeverity(final_d.findings);
  }
  Stop stop;
  if (stopped_by_us)
    stop = {true,
            g_stop_signal          ? "interrupt"
            : hang_reported        ? "hang"
            : !stop_reason.empty() ? stop_reason
                                   : "viewer",
            stop_ns};
  WriteManifest(log_dir, job, final_d, o.command, stop);
  const int code = g_stop_signal                   ? 128 + g_stop_signal
                   : final_d.hang || hang_reported ? (job_code ? job_code : kExitProblems)
                                                   : job_code;
  {
    // The recording ends with what the report says (rank times as the report has them).
    tui::Snapshot snap = tui::BuildSnapshot(job, final_d, {job_text, start_ns, StepRate(job, job.now_ns, start_ns)});
    snap.elapsed_s = elapsed(runtime::TraceNowNs());
    flush_lines(snap.elapsed_s);
    events.push_back(encoder.Tick(snap, /*last=*/true));
    events.push_back(tui::EndEvent(snap.elapsed_s, code));
    publisher->Publish(events);
    publisher.reset();
  }
  source.reset();
  if (launcher) launcher->Stop();
  int rc = EmitReport(job, final_d, o.json_out, o.color);
  if (rc != kExitOk) return rc;
  return code;
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
