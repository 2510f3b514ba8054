#include "coordinator/run_session.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "agent/client.h"
#include "agent/token.h"
#include "common/file.h"
#include "common/log.h"
#include "common/stderr_redirect.h"
#include "common/strings.h"
#include "coordinator/mpi_ranks.h"
#include "coordinator/observers.h"
#include "coordinator/rank_source.h"
#include "coordinator/takeover.h"
#include "tui/live.h"
#include "tui/view.h"

namespace dsd::coordinator {

namespace {

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The run dir, private by default (docs/run.md "Log dir"), with the run's id in run.id before any
// agent is asked to start: a node that finds it there shares this file system.
Status MakeRunDir(const RunSpec& spec, std::FILE* err) {
  // Logs may hold secrets (tokens in a traceback, data paths): what we create is private.
  UsePrivateUmask(spec.share_group);
  std::error_code ec;
  std::filesystem::create_directories(spec.run_dir.path(), ec);
  if (ec) return InvalidArgument("cannot create log dir " + spec.run_dir.path() + ": " + ec.message());
  if (struct stat st; ::stat(spec.run_dir.path().c_str(), &st) == 0 && (st.st_mode & 0007))
    std::fprintf(err, "dsdoctor run: warning: log dir %s is open to other users (mode %o): chmod 700 %s\n",
                 spec.run_dir.path().c_str(), st.st_mode & 0777, spec.run_dir.path().c_str());
  if (Status st = WriteFileAtomic(spec.run_dir.RunId(), spec.run_id + "\n"); !st.ok())
    return InvalidArgument("cannot write in log dir " + spec.run_dir.path() + ": " + st.message());
  return Status::Ok();
}

// The live view's event stream: recorded in events.jsonl (dsdoctor tui --replay) and served to
// viewers (dsdoctor tui --attach) with a token of their own: a viewer only watches, so it must not
// hold the agents' token, which runs commands.
Result<std::unique_ptr<tui::Publisher>> StartPublisher(const RunSpec& spec) {
  DSD_ASSIGN_OR_RETURN(std::string viewer_token, agent::GenerateToken());
  tui::Publisher::Options po{spec.run_dir.Events(), spec.serve == "off" ? "" : spec.serve, viewer_token};
  DSD_ASSIGN_OR_RETURN(auto publisher, tui::Publisher::Start(po));
  if (publisher->endpoint().port > 0) {
    DSD_RETURN_IF_ERROR(agent::WriteTokenFile(spec.run_dir.ViewerToken(), viewer_token));
    DSD_RETURN_IF_ERROR(WriteFileAtomic(spec.run_dir.ViewerAddr(), publisher->endpoint().ToString() + "\n"));
  }
  return publisher;
}

// The built-in ncurses view, one more observer: it takes the live stream's snapshot each tick, and
// between ticks it draws and reads keys. Paused, the screen keeps its snapshot and logs.
class ViewObserver final : public JobObserver {
 public:
  ViewObserver(std::unique_ptr<tui::View> view, const LiveStream& live, std::string log_dir)
      : view_(std::move(view)), live_(live), log_dir_(std::move(log_dir)) {}

  void OnTick(const diagnosis::JobState&, const diagnosis::Diagnosis&, int64_t) override {
    if (!state_.paused) snapshot_ = live_.snapshot();
  }
  // The terminal goes back to the caller (the view ends; the observer stays for OnEnd).
  void Close() { view_.reset(); }
  // Until `until`; true when the person pressed q.
  bool WaitUntil(std::chrono::steady_clock::time_point until) {
    const bool was_paused = state_.paused;
    const bool quit =
        tui::Interact(*view_, snapshot_, was_paused ? &paused_tails_ : &live_.tails(), state_, {}, until, log_dir_);
    if (state_.paused && !was_paused) paused_tails_ = live_.tails();
    return quit;
  }

 private:
  std::unique_ptr<tui::View> view_;
  const LiveStream& live_;
  std::string log_dir_;
  tui::ViewState state_;
  tui::Snapshot snapshot_;
  tui::LogTails paused_tails_;
};

AgentSourceOptions SourceOptions(const RunSpec& spec, const std::string& token) {
  AgentSourceOptions o;
  o.sample_period = spec.sample_period;
  o.token = token;
  return o;
}

// Agents first, one per node; their failures name the node and the launcher's own error. Once they
// are up, agents.json and the token let a new coordinator take the run over if this one goes.
Result<std::unique_ptr<AgentSource>> StartAgents(const RunSpec& spec, Launcher& launcher, const std::string& token,
                                                 const std::function<void()>& before_ranks_start) {
  std::vector<AgentHandle> handles = launcher.Start(spec.nodes.nodes, token);
  for (const auto& h : handles)
    if (!h.error.empty()) return Unavailable("agent on " + h.name + " did not start: " + h.error);
  std::vector<agent::AgentClient> clients;
  std::vector<std::string> names;
  std::vector<net::Endpoint> endpoints;
  for (const auto& h : handles) {
    auto c = agent::AgentClient::Connect(h.endpoint, token, std::chrono::seconds(10));
    if (!c.ok())
      return Unavailable("agent " + h.name + " at " + h.endpoint.host + ":" + std::to_string(h.endpoint.port) + ": " +
                         c.status().message());
    names.push_back(c->agent_name());
    endpoints.push_back(h.endpoint);
    clients.push_back(std::move(*c));
  }
  if (Status st = agent::WriteTokenFile(spec.run_dir.AgentsToken(), token); !st.ok())
    log::Get("run")->warn("cannot keep the agents' token for a takeover: {}", st.message());
  else if (Status st =
               WriteFileAtomic(spec.run_dir.Agents(), TakeoverJson(TakeoverOf(spec, names, endpoints)).dump(1) + "\n");
           !st.ok())
    log::Get("run")->warn("cannot write {}: {} (dsdoctor attach will not find the agents)", spec.run_dir.Agents(),
                          st.message());
  auto source = std::make_unique<AgentSource>(SourceOptions(spec, token), &RealClock::Instance());
  if (before_ranks_start) before_ranks_start();
  if (Status st = source->Start(std::move(clients), spec); !st.ok()) return Unavailable(st.message());
  return source;
}

// Ticks the JobCoordinator over `source` until the job is over: the loop `run` and `attach` share.
JobResult Watch(const RunSpec& spec, RankSource& source, std::unique_ptr<tui::Publisher> publisher,
                std::unique_ptr<tui::View> view, std::unique_ptr<StderrToFile> stderr_file, const RunSessionIo& io) {
  JobOptions jo;
  jo.command = spec.command;
  jo.python = spec.python;
  jo.flight_recorder = spec.python && spec.trace_python && !spec.mpi;
  jo.run_dir = spec.run_dir;
  jo.timeout_s = spec.timeout_s;
  jo.hang_after_s = spec.hang_after_s;
  jo.stop_on_hang = spec.stop_on_hang;
  jo.stop_escalation = spec.stop_escalation;
  jo.launcher_teardown = spec.mpi;
  const int world = spec.nodes.world_size();
  LiveStream live(std::move(publisher), Join(spec.command, " "), world, WallMs());
  TextPrinter printer(io.out, /*echo=*/!spec.quiet && !view);
  std::unique_ptr<ViewObserver> viewer;
  std::vector<JobObserver*> observers = {&live};
  if (view) {
    viewer = std::make_unique<ViewObserver>(std::move(view), live, spec.run_dir.path());
    observers.push_back(viewer.get());  // after the live stream: it shows the stream's snapshot
  } else {
    observers.push_back(&printer);  // under --tui a printed line would tear the screen
  }
  FanOut fan_out(observers);
  JobCoordinator job(jo, spec.ranks.ranks, &source, &RealClock::Instance(), &fan_out);
  auto interrupted = [&] { return io.interrupt ? io.interrupt->load() : 0; };
  while (job.Tick()) {
    if (int sig = interrupted()) job.RequestStop("interrupt", sig);
    const auto next_tick = std::chrono::steady_clock::now() + spec.sample_period;
    if (!viewer)
      std::this_thread::sleep_until(next_tick);
    else if (viewer->WaitUntil(next_tick) && !job.stopping())
      job.RequestStop("viewer");  // q: the person is done with this job
  }
  if (viewer) viewer->Close();  // the terminal is ours again for the report
  if (stderr_file) {
    const uint64_t logged = stderr_file->BytesWritten();
    const std::string path = stderr_file->path();
    stderr_file.reset();
    if (logged > 0)
      std::fprintf(io.err, "dsdoctor run: %s logged while the view was open: %s\n",
                   FormatBytes(static_cast<double>(logged)).c_str(), path.c_str());
  }
  job.NoteInterrupt(interrupted());  // Ctrl-C during the last tick still counts
  return job.Finish();
}

}  // namespace

Result<JobResult> RunJobSession(const RunSpec& spec, const LauncherChoice& launcher_choice, const RunSessionIo& io) {
  auto log = log::Get("run");
  for (const auto& note : spec.nodes.notes) std::fprintf(io.err, "dsdoctor run: note: %s\n", note.c_str());
  DSD_RETURN_IF_ERROR(MakeRunDir(spec, io.err));
  DSD_ASSIGN_OR_RETURN(std::unique_ptr<tui::Publisher> publisher, StartPublisher(spec));
  const bool serving = publisher->endpoint().port > 0;

  std::unique_ptr<Launcher> launcher;
  std::string token;
  if (spec.launcher != "direct") {
    LauncherChoice choice = launcher_choice;
    choice.output_file = spec.run_dir.LauncherLog();
    auto setup = MakeLauncher(choice, spec.nodes.nodes.size());
    if (!setup.ok())
      return setup.status().code() == StatusCode::kInternal ? setup.status()
                                                            : InvalidArgument(setup.status().message());
    launcher = std::move(setup->launcher);
    token = setup->token;
  }
  // The agents' ranks are started once the view (if any) has the terminal. While it has it, fd 2
  // (dsdoctor's log, and that of the agents and launchers it starts) goes to dsdoctor.log.
  std::unique_ptr<StderrToFile> stderr_file;
  std::unique_ptr<tui::View> view;
  if (spec.tui) {
    auto to_file = StderrToFile::Open(spec.run_dir.CoordinatorLog());
    if (!to_file.ok()) return to_file.status();
    stderr_file = std::move(*to_file);
    auto v = tui::View::Open();
    if (!v.ok()) return InvalidArgument(v.status().message());
    view = std::move(*v);
  }
  std::unique_ptr<RankSource> source;
  if (launcher) {
    DSD_ASSIGN_OR_RETURN(source, StartAgents(spec, *launcher, token, io.before_ranks_start));
    if (spec.mpi) {
      // Every agent listens for its ranks now: mpirun starts them (coordinator/mpi_ranks.h).
      auto mpi = std::make_unique<MpiRankSource>(std::move(source));
      if (Status st = mpi->Start(spec, MpiRanksOptionsFor(spec, launcher_choice)); !st.ok()) return st;
      source = std::move(mpi);
    }
  } else {
    auto direct = std::make_unique<DirectSource>(&RealClock::Instance());
    if (io.before_ranks_start) io.before_ranks_start();
    if (Status st = direct->Start(spec); !st.ok()) return Internal("cannot start the ranks: " + st.message());
    source = std::move(direct);
  }
  const int world = spec.nodes.world_size();
  const int nnodes = static_cast<int>(spec.nodes.nodes.size());
  log->info("started {} ranks on {} nodes, logs in {}", world, nnodes, spec.run_dir.path());
  if (!spec.quiet && !spec.tui) {
    std::fprintf(io.out, "dsdoctor: %d ranks on %d nodes%s, logs and traces in %s\n", world, nnodes,
                 launcher ? " (agents)" : " (direct)", spec.run_dir.path().c_str());
    if (serving) std::fprintf(io.out, "dsdoctor: live view: dsdoctor tui --attach %s\n", spec.run_dir.path().c_str());
  }

  JobResult result = Watch(spec, *source, std::move(publisher), std::move(view), std::move(stderr_file), io);
  source.reset();
  if (launcher) launcher->Stop();
  // The run is over: nothing is left to take over, and the token that starts commands goes.
  ::unlink(spec.run_dir.AgentsToken().c_str());
  return result;
}

Result<JobResult> AttachJobSession(const RunDir& dir, const AttachOptions& options, const RunSessionIo& io) {
  DSD_ASSIGN_OR_RETURN(Takeover takeover, ReadTakeover(dir));
  if (auto id = ReadFile(dir.RunId(), 4096); id.ok() && Trim(*id) != takeover.run_id)
    return InvalidArgument(dir.Agents() + " belongs to run " + takeover.run_id + ", but " + dir.RunId() + " says " +
                           std::string(Trim(*id)) + ": the run dir was reused; its agents.json is stale");
  // Its coordinator still alive (on this host): taking over would only fight it for the agents.
  if (char host[256] = {}; takeover.coordinator_pid > 0 && ::gethostname(host, sizeof host - 1) == 0 &&
                           takeover.coordinator_host == host && ::kill(takeover.coordinator_pid, 0) == 0) {
    const std::string cmdline =
        ReadFile("/proc/" + std::to_string(takeover.coordinator_pid) + "/cmdline", 1 << 16).value_or("");
    if (cmdline.find("dsdoctor") != std::string::npos)
      return InvalidArgument("the run's coordinator (pid " + std::to_string(takeover.coordinator_pid) +
                             " on this host) is alive: watch it with `dsdoctor tui --attach " + dir.path() +
                             "`; attach takes over a run whose coordinator is gone");
  }
  if (!FileExists(dir.AgentsToken()))
    return InvalidArgument("the run in " + dir.path() +
                           " is over: the coordinator that watched it to its end removed agents.token. Its report is "
                           "in " +
                           dir.Manifest() + "; `dsdoctor analyze " + dir.path() + "` reads the run dir again");
  auto token = agent::LoadTokenFile(dir.AgentsToken());
  if (!token.ok())
    return InvalidArgument("cannot take the run over without the agents' token: " + token.status().message());
  RunSpec spec = SpecOfTakeover(takeover, dir);
  spec.quiet = options.quiet;
  spec.stop_on_hang = options.on_hang != "wait";
  if (options.timeout_s > 0) spec.timeout_s = options.timeout_s;
  if (options.hang_after_s > 0) spec.hang_after_s = options.hang_after_s;
  std::vector<agent::AgentClient> clients;
  for (const auto& node : takeover.nodes) {
    auto c = agent::AgentClient::Connect(node.endpoint, *token, std::chrono::seconds(10));
    if (!c.ok())
      return Unavailable("agent of " + node.name + " at " + node.endpoint.ToString() + ": " + c.status().message() +
                         ": it has exited (its ranks ended and no coordinator came within its wait), or cannot be "
                         "reached; what is on disk is read by `dsdoctor analyze " +
                         dir.path() + "`");
    clients.push_back(std::move(*c));
  }
  auto source = std::make_unique<AgentSource>(SourceOptions(spec, *token), &RealClock::Instance());
  if (Status st = source->Reattach(std::move(clients), spec); !st.ok())
    return Unavailable(st.message() + "; what is on disk is read by `dsdoctor analyze " + dir.path() + "`");
  if (io.before_ranks_start) io.before_ranks_start();
  if (!spec.quiet)
    std::fprintf(io.out, "dsdoctor: took over run %s: %d ranks on %zu nodes, logs and traces in %s\n",
                 spec.run_id.c_str(), spec.nodes.world_size(), spec.nodes.nodes.size(), dir.path().c_str());
  // No viewers and no recording: the first coordinator's events.jsonl stays as it left it.
  DSD_ASSIGN_OR_RETURN(auto publisher, tui::Publisher::Start({"", "", ""}));
  JobResult result = Watch(spec, *source, std::move(publisher), nullptr, nullptr, io);
  source.reset();
  ::unlink(dir.AgentsToken().c_str());
  return result;
}

}  // namespace dsd::coordinator
