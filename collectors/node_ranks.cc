#include "collectors/node_ranks.h"

#include <signal.h>

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
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto env = options_.env;
    for (const auto& [k, v] : ranks[i].env) env[k] = v;
    if (tracer) AddPythonTracer(*tracer, &env);
    if (nccl_profiler) AddNcclProfiler(*nccl_profiler, &env);
    if (Status st =
            monitors_[i].Start(options_.argv, env, options_.cwd, &pump_, OutputPump::PipeBytesFor(ranks.size()));
        !st.ok()) {
      for (auto& m : monitors_) m.Signal(SIGKILL);
      return Status(st.code(), "rank " + std::to_string(ranks[i].rank) + ": " + st.message());
    }
  }
  sample_.fresh.assign(monitors_.size(), {});
  return Status::Ok();
}

const NodeSample& NodeRanks::Tick() {
  const int64_t now = WallNs(*clock_);
  sample_.now_ns = now;
  sample_.exited.clear();
  sample_.fresh.resize(monitors_.size());
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

int64_t NodeRanks::NowNs() const { return WallNs(*clock_); }

bool NodeRanks::AllExited() const {
  for (const auto& m : monitors_)
    if (m.state().status != diagnosis::RankStatus::kExited) return false;
  return true;
}

}  // namespace dsd::collectors
