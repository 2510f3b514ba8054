#include "collectors/node_ranks.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "collectors/python_tracer.h"
#include "common/file.h"
#include "common/log.h"

namespace dsd::collectors {

namespace {

class RealStacks final : public StackTaker {
 public:
  Result<StackCapture> Take(pid_t pid, bool python) override { return CaptureStack(pid, python); }
};

int64_t WallNs(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock.WallNow().time_since_epoch()).count();
}

}  // namespace

StackTaker& RealStackTaker() {
  static RealStacks taker;
  return taker;
}

NodeRanks::NodeRanks(NodeRanksOptions options, Clock* clock, StackTaker* stacks)
    : options_(std::move(options)),
      clock_(clock),
      stacks_(stacks),
      log_dir_monitor_(options_.run_dir.path(), options_.node) {}

NodeRanks::~NodeRanks() {
  for (auto& m : monitors_) m.Signal(SIGKILL);
}

std::map<std::string, std::string> NodeRanks::RankEnv(const RankToStart& rank,
                                                      const std::optional<PythonTracer>& tracer,
                                                      const std::optional<std::string>& nccl_profiler) const {
  auto env = options_.env;
  for (const auto& [k, v] : rank.env) env[k] = v;
  if (tracer) AddPythonTracer(*tracer, &env);
  if (tracer && options_.python) AddFlightRecorder(options_.run_dir, &env);
  if (nccl_profiler) AddNcclProfiler(*nccl_profiler, &env);
  return env;
}

Status NodeRanks::Start(const std::vector<RankToStart>& ranks) {
  auto log = log::Get("run");
  // A node of hundreds of ranks needs more than the usual 1,024 descriptors.
  if (std::string low = RaiseOpenFileLimitFor(ranks.size()); !low.empty()) log->warn("{}", low);
  std::optional<PythonTracer> tracer;
  if (options_.trace_python && !(tracer = FindPythonTracer()))
    log->warn("the Python collective tracer is not installed beside this binary; Python ranks run untraced");
  // NCCL programs (DDP's reducer, FSDP, C++ trainers) are traced below Python through NCCL's profiler
  // plugin; programs without NCCL never read the variable.
  std::optional<std::string> nccl_profiler = options_.trace_python ? FindNcclProfiler() : std::nullopt;
  monitors_.reserve(ranks.size());
  for (const auto& r : ranks) monitors_.emplace_back(r.rank, r.local_rank, options_.node, options_.run_dir);
  sample_.fresh.assign(monitors_.size(), {});
  if (!options_.rank_exec_socket.empty()) {
    // MPI programs: mpirun starts them; each rank's shim hands it over here (AdoptHandedOver).
    std::optional<std::string> pmpi = options_.trace_python ? FindPmpiTracer() : std::nullopt;
    if (options_.trace_python && !pmpi)
      log->warn("the MPI tracer (libdsdoctor-pmpi.so) is not installed beside this binary; MPI ranks run untraced");
    DSD_ASSIGN_OR_RETURN(rank_exec_, RankExecListener::Listen(options_.rank_exec_socket, ranks.size()));
    for (size_t i = 0; i < ranks.size(); ++i) {
      monitors_[i].ClearFiles();
      auto env = RankEnv(ranks[i], tracer, nccl_profiler);
      env["DSDOCTOR_TRACE_FILE"] = options_.run_dir.RankTrace(ranks[i].rank);
      if (pmpi) AddPmpiTracer(*pmpi, &env);
      rank_exec_env_.push_back(std::move(env));
    }
    return Status::Ok();
  }
  // An agent that mpirun started (--launcher mpirun) holds its own MPI identity: rank i of the
  // agents' world, its daemon's address. A rank inheriting it would join that world as the agent (an
  // MPI program) or take it for its own rank (DeepSpeed's MPI discovery): it is not passed on.
  std::map<std::string, std::string> unset_launcher_identity;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    const std::string name(kv.substr(0, kv.find('=')));
    if (MpiLauncherVariable(name) && !options_.env.count(name)) unset_launcher_identity[name] = "";
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto env = unset_launcher_identity;  // "": unset (SubprocessOptions::env)
    for (auto& [k, v] : RankEnv(ranks[i], tracer, nccl_profiler)) env[k] = std::move(v);
    if (Status st =
            monitors_[i].Start(options_.argv, env, options_.cwd, &pump_, OutputPump::PipeBytesFor(ranks.size()));
        !st.ok()) {
      for (auto& m : monitors_) m.Signal(SIGKILL);
      return Status(st.code(), "rank " + std::to_string(ranks[i].rank) + ": " + st.message());
    }
  }
  return Status::Ok();
}

void NodeRanks::AdoptHandedOver() {
  auto index_of = [&](int rank) -> std::optional<size_t> {
    for (size_t i = 0; i < monitors_.size(); ++i)
      if (monitors_[i].state().rank == rank) return i;
    return std::nullopt;
  };
  auto grant = [&](int rank) -> Result<RankExecListener::Grant> {
    auto i = index_of(rank);
    if (!i) return InvalidArgument("rank " + std::to_string(rank) + " is not one of " + options_.node + "'s ranks");
    if (stopping_) return Unavailable("the run is stopping");
    RankExecListener::Grant g;
    DSD_ASSIGN_OR_RETURN(g.output, monitors_[*i].AdoptOutput(&pump_, OutputPump::PipeBytesFor(monitors_.size())));
    g.env = rank_exec_env_[*i];
    return g;
  };
  for (const auto& e : rank_exec_->Poll(grant)) {
    auto i = index_of(e.rank);
    if (!i) continue;
    auto log = log::Get("run");
    switch (e.kind) {
      case RankExecListener::Event::Kind::kStarted:
        monitors_[*i].Adopted(e.pid, e.shim_pid);
        log->debug("rank {} handed over: pid {}", e.rank, e.pid);
        // Handed over after a stop (granted before it): it gets the stop too.
        if (stop_signal_) monitors_[*i].Signal(stop_signal_);
        break;
      case RankExecListener::Event::Kind::kExited:
        monitors_[*i].AdoptedExit(e.exit_code, e.signal, e.exit_ns);
        break;
      case RankExecListener::Event::Kind::kLost:
        if (e.started) {
          // The shim was killed (mpirun tore the job down): its program died with it (SIGKILL as
          // its parent-death signal).
          log->warn("rank {}: its rank-exec shim ended without telling the program's exit; it was killed", e.rank);
          monitors_[*i].AdoptedExit(0, SIGKILL);
        } else {
          // The hand-over failed half-way: the shim runs the program unwatched, or died. Not
          // started, as far as we know; not awaited.
          log->warn("rank {}: its hand-over from rank-exec failed; the rank runs unwatched, if at all", e.rank);
          unwatched_.insert(*i);
        }
        break;
    }
  }
}

const NodeSample& NodeRanks::Tick() {
  const int64_t now = WallNs(*clock_);
  sample_.now_ns = now;
  sample_.exited.clear();
  sample_.fresh.resize(monitors_.size());
  if (rank_exec_) AdoptHandedOver();
  for (size_t i = 0; i < monitors_.size(); ++i) {
    sample_.fresh[i].clear();
    if (monitors_[i].Tick(now, &sample_.fresh[i], options_.recent)) sample_.exited.push_back(i);
    if (!monitors_[i].write_error().empty()) log_dir_monitor_.NoteWriteError(monitors_[i].write_error());
    const OutputPump::Stats out = monitors_[i].output();
    log_dir_monitor_.NoteOutput(monitors_[i].state().rank, out.held, out.lost, out.error);
  }
  if (kill_at_ && clock_->Now() >= *kill_at_) {
    kill_at_.reset();
    if (!AllExited()) {
      log::Get("run")->info("ranks still running {:.1f} s after the stop: SIGKILL",
                            std::chrono::duration<double>(options_.stop_escalation).count());
      for (auto& m : monitors_) m.Signal(SIGKILL);
    }
  }
  // The run dir's file system: a full disk is named, not guessed from silence.
  sample_.log_dir = log_dir_monitor_.Poll(now);
  return sample_;
}

void NodeRanks::Signal(int sig) {
  stopping_ = true;
  stop_signal_ = sig;
  if (rank_exec_) rank_exec_->Close();
  for (auto& m : monitors_) m.Signal(sig);
  if (sig != SIGKILL && !kill_at_) kill_at_ = clock_->Now() + options_.stop_escalation;
}

std::vector<NodeStack> NodeRanks::Stacks(const std::vector<int>& ranks, const std::function<void()>& between) {
  std::vector<NodeStack> out;
  std::set<int> asked;  // each rank once, however often the request names it
  for (int want : ranks) {
    if (!asked.insert(want).second) continue;
    for (auto& m : monitors_) {
      if (m.state().rank != want || m.state().status != diagnosis::RankStatus::kRunning) continue;
      if (!out.empty() && between) between();
      NodeStack s;
      s.rank = want;
      auto st = stacks_->Take(m.state().pid, options_.python);
      if (st.ok()) {
        s.tool = st->tool;
        s.signature = st->signature;
        s.text = "# " + st->tool + "\n" + st->text;
        if (Status w = WriteFileAtomic(options_.run_dir.RankStack(want), s.text); !w.ok())
          log_dir_monitor_.NoteWriteError(RankFileName(want, RankFile::kStack) + ": " + w.message());
      } else {
        s.error = st.status().message();
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

Status NodeRanks::RequestFlightRecorder(int incident) {
  // The tracers make the incident's folder when they dump: a torch without a recorder leaves none.
  std::error_code ec;
  std::filesystem::create_directories(options_.run_dir.FlightRecorderDir(), ec);
  if (ec) return Internal(options_.run_dir.FlightRecorderDir() + ": " + ec.message());
  return WriteFileAtomic(options_.run_dir.FlightRecorderRequest(), std::to_string(incident) + "\n");
}

std::vector<NodeRanks::FlightRecorderFile> NodeRanks::FlightRecorderDumps(int incident, Duration wait,
                                                                          const std::function<void()>& between) {
  const MonoTime until = clock_->Now() + wait;
  std::vector<FlightRecorderFile> out;
  for (;;) {
    out.clear();
    bool all = true;
    for (const auto& m : monitors_) {
      const auto& st = m.state();
      std::string path = options_.run_dir.FlightRecorderDump(incident, st.rank);
      std::error_code ec;
      if (std::filesystem::is_regular_file(path, ec)) {
        out.push_back({st.rank, std::move(path)});
      } else if (st.status == diagnosis::RankStatus::kRunning && st.flight_recorder) {
        all = false;
      }
    }
    if (all || clock_->Now() >= until) return out;
    if (between) between();
    clock_->Sleep(std::chrono::milliseconds(200));
  }
}

std::vector<NodeStack> NodeRanks::StacksAndDumps(const std::vector<int>& ranks, int incident,
                                                 const std::function<void()>& between,
                                                 std::vector<FlightRecorderFile>* dumps) {
  if (incident > 0)
    if (Status st = RequestFlightRecorder(incident); !st.ok())
      log::Get("run")->warn("Flight Recorder dumps not requested: {}", st.message());
  auto stacks = Stacks(ranks, between);
  if (incident > 0) {
    auto written = FlightRecorderDumps(incident, kFlightRecorderWait, between);
    if (dumps) *dumps = std::move(written);
  }
  return stacks;
}

int64_t NodeRanks::NowNs() const { return WallNs(*clock_); }

bool NodeRanks::AllExited() const {
  for (size_t i = 0; i < monitors_.size(); ++i) {
    const auto st = monitors_[i].state().status;
    if (st == diagnosis::RankStatus::kRunning) return false;
    if (st == diagnosis::RankStatus::kNotStarted && !unwatched_.count(i) &&
        !(stopping_ && !monitors_[i].output_adopted()))
      return false;
  }
  return true;
}

}  // namespace dsd::collectors
