#include "collectors/rank_monitor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "collectors/proc_stat.h"
#include "collectors/run_dir.h"
#include "common/file.h"
#include "common/process.h"
#include "runtime/trace.h"

namespace dsd::collectors {

RankMonitor::RankMonitor(int rank, int local_rank, std::string node, const RunDir& dir)
    : log_path_(dir.RankLog(rank)),
      trace_path_(dir.RankTrace(rank)),
      exit_path_(dir.RankExit(rank)),
      trace_(trace_path_) {
  state_.rank = rank;
  state_.local_rank = local_rank;
  state_.node = std::move(node);
}

void RankMonitor::ClearFiles() {
  ::unlink(log_path_.c_str());
  ::unlink(trace_path_.c_str());
  ::unlink(exit_path_.c_str());
}

Result<net::Fd> RankMonitor::AdoptOutput(OutputPump* pump, size_t pipe_bytes) {
  if (pump_) return InvalidArgument("rank " + std::to_string(state_.rank) + " was handed over already");
  DSD_ASSIGN_OR_RETURN(net::Fd output, pump->Add(log_path_, &pump_index_, pipe_bytes));
  pump_ = pump;
  return output;
}

namespace {

// Its parent's pid; 0 when it is gone.
pid_t ParentOf(pid_t pid) {
  auto stat = ReadProcStat(pid, /*with_wchan=*/false);
  return stat.ok() ? stat->ppid : 0;
}

// Whether the process behind a pidfd has ended (readable once it exits).
bool PidfdEnded(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

}  // namespace

void RankMonitor::Adopted(pid_t pid, pid_t parent) {
  if (state_.status != diagnosis::RankStatus::kNotStarted) return;
  state_.pid = pid;
  state_.status = diagnosis::RankStatus::kRunning;
#ifdef SYS_pidfd_open
  adopted_pidfd_ = net::Fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#endif
  // The pidfd names the process that holds the pid now: it is ours only while its starter is its
  // parent (checked after opening, so that it cannot change in between).
  if (parent > 0 && ParentOf(pid) != parent) {
    adopted_pidfd_.Reset();
    adopted_unsafe_ = true;
  }
  if (!adopted_unsafe_) proc_stat_.emplace(pid);
}

void RankMonitor::AdoptedExit(int exit_code, int signal, int64_t exit_ns) {
  adopted_exit_ns_ = exit_ns;
  // A rank whose starter failed before the program ran still leaves an exit.
  if (state_.status == diagnosis::RankStatus::kNotStarted) state_.status = diagnosis::RankStatus::kRunning;
  adopted_exit_ = {exit_code, signal};
}

Status RankMonitor::Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                          const std::string& cwd, OutputPump* pump, size_t pipe_bytes) {
  ClearFiles();
  SubprocessOptions so;
  so.env = env;
  so.env["DSDOCTOR_TRACE_FILE"] = trace_path_;
  net::Fd output;  // the pipe's write end: ours is closed once the child has its copy
  if (pump) {
    DSD_ASSIGN_OR_RETURN(output, pump->Add(log_path_, &pump_index_, pipe_bytes));
    pump_ = pump;
    so.output_fd = output.get();
  } else {
    so.log_path = log_path_;
  }
  so.cwd = cwd;
  so.parent_death_signal = SIGKILL;          // a dead watcher leaves no orphans
  so.umask = static_cast<int>(UserUmask());  // the job's own files are as the user would make them
  DSD_ASSIGN_OR_RETURN(auto p, Subprocess::Start(argv, so));
  state_.pid = p.pid();
  state_.status = diagnosis::RankStatus::kRunning;
  proc_stat_.emplace(p.pid());
  proc_ = std::move(p);
  return Status::Ok();
}

bool RankMonitor::Tick(int64_t now_ns, std::string* new_log, size_t recent) {
  bool exited_now = false;
  std::optional<std::pair<int, int>> ended;  // (exit code, signal)
  if (state_.status == diagnosis::RankStatus::kRunning && proc_) {
    if (auto e = proc_->Poll()) ended = {e->signaled ? 0 : e->exit_code, e->signaled ? e->term_signal : 0};
  } else if (state_.status == diagnosis::RankStatus::kRunning) {
    ended = adopted_exit_;
  }
  if (ended) {
    state_.status = diagnosis::RankStatus::kExited;
    state_.exit_code = ended->first;
    state_.signal = ended->second;
    // The starter's time of the end orders exits across nodes better than our ticks do (mpirun's
    // teardown follows a failure by milliseconds); never later than now.
    state_.exit_ns = adopted_exit_ns_ > 0 ? std::min(adopted_exit_ns_, now_ns) : now_ns;
    state_.proc.valid = false;
    proc_stat_.reset();                    // its two /proc descriptors: a node of many ranks needs them back
    if (pump_) pump_->Flush(pump_index_);  // its last output is in the log before its exit is told
    if (Status st = WriteFileAtomic(exit_path_, std::to_string(ShellExitStatus(state_)) + "\n"); !st.ok())
      write_error_ = std::filesystem::path(exit_path_).filename().string() + ": " + st.message();
    exited_now = true;
  }
  // New log bytes: read from where we stopped (the file only grows).
  // Kept open: the file is ours (Start made it) and is never replaced, only appended to.
  if (!log_fd_.valid()) log_fd_ = net::Fd(::open(log_path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (log_fd_.valid()) {
    char buf[65536];
    ssize_t n;
    while ((n = ::pread(log_fd_.get(), buf, sizeof buf, static_cast<off_t>(log_offset_))) > 0) {
      new_log->append(buf, static_cast<size_t>(n));
      log_offset_ += static_cast<size_t>(n);
      // The rest next tick, while the rank runs; once it has exited there is no next tick for it,
      // and everything it wrote goes out before its exit is reported.
      if (new_log->size() > (4u << 20) && state_.status == diagnosis::RankStatus::kRunning) break;
    }
    if (!new_log->empty()) state_.last_output_ns = now_ns;
  }
  if (auto t = trace_.Read(recent); t.ok()) ApplyTrace(*t, &state_, recent);
  state_.sample_ns = now_ns;
  if (state_.status != diagnosis::RankStatus::kRunning || adopted_unsafe_) return exited_now;
  // Opened again when the pid changed or the last open failed (out of descriptors, say).
  if (!proc_stat_ || proc_stat_->pid() != state_.pid || !proc_stat_->open()) proc_stat_.emplace(state_.pid);
  auto ps = proc_stat_->Read();
  if (!ps.ok()) return exited_now;
  double dt = last_sample_ns_ ? (now_ns - last_sample_ns_) / 1e9 : 0;
  // The whole process tree: a rank whose DataLoader workers or compiler children work is busy.
  // Walking the tree reads a file per thread of every process in it: once a second is enough for
  // telling busy from flat, which is judged over seconds. Between walks the descendants' time is
  // spread over the ticks, a second late (between the last two walks), so a second of their CPU
  // never lands on one tick and reads as a spinning rank.
  if (!descendants_read_ns_ || now_ns - descendants_read_ns_ >= 1'000'000'000) {
    const uint64_t walked = DescendantsCpuTicks(state_.pid);
    descendant_span_ns_ = descendants_read_ns_ ? now_ns - descendants_read_ns_ : 0;
    descendant_from_ = descendants_read_ns_ ? descendant_to_ : walked;
    descendant_to_ = walked;
    descendants_read_ns_ = now_ns;
  }
  uint64_t descendants = descendant_to_;
  if (descendant_span_ns_ > 0 && descendant_to_ > descendant_from_) {
    const double f = std::min(1.0, static_cast<double>(now_ns - descendants_read_ns_) / descendant_span_ns_);
    descendants = descendant_from_ + static_cast<uint64_t>(f * static_cast<double>(descendant_to_ - descendant_from_));
  }
  uint64_t ticks = ps->cpu_ticks() + descendants;
  // A child that ended takes its ticks out of the sum: re-anchor rather than count negative time.
  if (ticks < last_cpu_ticks_) last_cpu_ticks_ = ticks;
  if (ticks < ref_ticks_) ref_ticks_ = ticks;
  double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  auto& p = state_.proc;
  p.valid = true;
  p.state = ps->state;
  p.wchan = ps->wchan;
  // CPU time comes in 10 ms ticks: smooth it, and call the process flat while it used under 5 %
  // of a core since the reference point (a blocked program's helper threads tick now and then).
  if (dt > 0) p.cpu_fraction = 0.7 * p.cpu_fraction + 0.3 * ((ticks - last_cpu_ticks_) / hz / dt);
  if (!ref_ns_) ref_ns_ = now_ns, ref_ticks_ = ticks;
  double since = (now_ns - ref_ns_) / 1e9;
  if ((ticks - ref_ticks_) / hz > 0.05 * since + 0.03) ref_ns_ = now_ns, ref_ticks_ = ticks;
  p.flat_for_s = (now_ns - ref_ns_) / 1e9;
  p.tree_cpu_s = ticks / hz;
  last_cpu_ticks_ = ticks;
  last_sample_ns_ = now_ns;
  return exited_now;
}

void RankMonitor::Signal(int sig) {
  if (state_.status != diagnosis::RankStatus::kRunning) return;
  if (proc_) {
    proc_->Signal(sig);
  } else if (state_.pid > 0 && !adopted_exit_ && !adopted_unsafe_) {
    // Not our child: its pid (and its group's id) is safe while its pidfd says it has not ended,
    // since its starter cannot have reaped it. Its group: its own children get the signal too, as
    // a started rank's do.
    if (adopted_pidfd_.valid() && PidfdEnded(adopted_pidfd_.get())) return;
    if (::kill(-state_.pid, sig) != 0) ::kill(state_.pid, sig);
  }
}

std::string SanitizeForStream(std::string_view bytes) {
  std::string out(bytes);
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (!(u == '\n' || u == '\t' || (u >= 0x20 && u < 0x7f))) c = '?';
  }
  return out;
}

std::string RaiseOpenFileLimitFor(size_t ranks) {
  // Our reader of its log, /proc/<pid>/stat and /proc/<pid>/wchan, and the output pump's pipe and
  // log writer while it runs.
  constexpr uint64_t kPerRank = 5;
  const uint64_t wanted = kPerRank * ranks + 64;
  const FdLimit limit = RaiseFdLimit(wanted + 960);  // room for everything else the process opens
  if (limit.soft >= wanted) return "";
  return std::to_string(ranks) + " ranks want about " + std::to_string(wanted) + " open files; the limit is " +
         std::to_string(limit.soft) + " (ulimit -n)";
}

}  // namespace dsd::collectors
