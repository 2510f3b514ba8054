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
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "collectors/log_classifier.h"
#include "collectors/proc_stat.h"
#include "collectors/run_dir.h"
#include "collectors/stack.h"
#include "common/file.h"
#include "common/log.h"
#include "common/net.h"
#include "common/subprocess.h"
#include "diagnosis/engine.h"
#include "diagnosis/report.h"
#include "probe/dsenv.h"
#include "runtime/trace.h"

namespace dsd::cli {
namespace {

std::atomic<int> g_stop_signal{0};
void OnSignal(int sig) { g_stop_signal = sig; }

struct RankProc {
  diagnosis::RankState state;
  std::optional<Subprocess> proc;
  std::string log_path, trace_path;
  std::unique_ptr<collectors::LogClassifier> classifier;
  size_t log_offset = 0;
  std::string partial;  // the last, unterminated line
  uint64_t last_cpu_ticks = 0, ref_ticks = 0;
  int64_t last_sample_ns = 0, cpu_changed_ns = 0;
  bool python = false;
};

int FreeLoopbackPort() {
  int port = 0;
  auto l = net::Listen("127.0.0.1", 0, &port, 16);
  return l.ok() ? port : 29500;
}

void Drain(RankProc& rp, std::vector<diagnosis::LogEvent>& events, bool echo, int64_t now_ns) {
  auto content = ReadFile(rp.log_path, 256u << 20);
  if (!content.ok() || content->size() <= rp.log_offset) return;
  std::string fresh = content->substr(rp.log_offset);
  rp.log_offset = content->size();
  rp.state.last_output_ns = now_ns;
  rp.partial += fresh;
  size_t start = 0;
  for (size_t nl; (nl = rp.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string_view line(rp.partial.data() + start, nl - start);
    if (echo) std::printf("[%d] %.*s\n", rp.state.rank, static_cast<int>(line.size()), line.data());
    for (auto& e : rp.classifier->Feed(line)) events.push_back(std::move(e));
  }
  rp.partial.erase(0, start);
  if (echo) std::fflush(stdout);
}

void Sample(RankProc& rp, int64_t now_ns) {
  auto& s = rp.state;
  if (auto t = runtime::ReadTrace(rp.trace_path); t.ok()) collectors::ApplyTrace(*t, &s);
  if (s.status != diagnosis::RankStatus::kRunning) return;
  auto ps = collectors::ReadProcStat(s.pid);
  if (!ps.ok()) return;
  double dt = rp.last_sample_ns ? (now_ns - rp.last_sample_ns) / 1e9 : 0;
  uint64_t ticks = ps->cpu_ticks();
  double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  s.proc.valid = true;
  s.proc.state = ps->state;
  s.proc.wchan = ps->wchan;
  // CPU use in ticks (10 ms) is coarse: smooth it, and call a process flat while it uses under
  // 5 % of a core since the reference point (background threads of a blocked program tick now
  // and then).
  if (dt > 0) s.proc.cpu_fraction = 0.7 * s.proc.cpu_fraction + 0.3 * ((ticks - rp.last_cpu_ticks) / hz / dt);
  if (!rp.cpu_changed_ns) rp.cpu_changed_ns = now_ns, rp.ref_ticks = ticks;
  double since = (now_ns - rp.cpu_changed_ns) / 1e9;
  if ((ticks - rp.ref_ticks) / hz > 0.05 * since + 0.03) rp.cpu_changed_ns = now_ns, rp.ref_ticks = ticks;
  s.proc.flat_for_s = (now_ns - rp.cpu_changed_ns) / 1e9;
  rp.last_cpu_ticks = ticks;
  rp.last_sample_ns = now_ns;
}

std::string FindingKey(const diagnosis::Finding& f) { return f.code + ":" + diagnosis::FormatRanks(f.ranks); }

void WriteManifest(const std::string& dir, const diagnosis::JobState& job, const diagnosis::Diagnosis& d,
                   const std::vector<std::string>& command) {
  nlohmann::json j = diagnosis::RunJson(job, d);
  j["command"] = command;
  j["stall_after_s"] = job.stall_after_s;
  j["hang_after_s"] = job.hang_after_s;
  auto st = WriteFileAtomic(dir + "/run.json", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  if (!st.ok()) log::Get("run")->warn("cannot write {}/run.json: {}", dir, st.message());
}

int EmitReport(const diagnosis::JobState& job, const diagnosis::Diagnosis& d, const std::string& json_out, bool color) {
  if (json_out == "-") {
    std::cout << diagnosis::RunJson(job, d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "\n" << diagnosis::RenderRunText(job, d, color);
    if (!json_out.empty()) {
      auto st = WriteFileAtomic(json_out, diagnosis::RunJson(job, d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
      if (!st.ok()) {
        std::cerr << "dsdoctor run: cannot write " << json_out << ": " << st.message() << "\n";
        return kExitInternal;
      }
    }
  }
  std::cout.flush();
  return kExitOk;
}

}  // namespace

int RunJob(const RunOptions& o) {
  auto log = log::Get("run");
  if (!o.hostfile.empty() && o.local == 0) {
    std::cerr << "dsdoctor run: launching ranks on hostfile nodes through agents is not available yet; use --local N "
                 "(N simulated nodes on this machine) — see docs/run.md\n";
    return kExitUsage;
  }
  const int nodes = std::max(1, o.local);
  const int world = nodes * o.slots;
  if (::mkdir(o.log_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::cerr << "dsdoctor run: cannot create log dir " << o.log_dir << ": " << std::strerror(errno) << "\n";
    return kExitUsage;
  }
  // .deepspeed_env (cwd, ~, DS_ENV_FILE) reaches every rank, as DeepSpeed's launcher does.
  std::map<std::string, std::string> common = probe::MergeDsEnv(probe::FindDsEnvFiles());
  const int master_port = FreeLoopbackPort();
  char timeout_buf[32];
  std::snprintf(timeout_buf, sizeof timeout_buf, "%g", o.timeout_s);

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  std::vector<RankProc> ranks(world);
  for (int r = 0; r < world; ++r) {
    RankProc& rp = ranks[r];
    int node = r / o.slots, local = r % o.slots;
    rp.state.rank = r;
    rp.state.node = "node-" + std::to_string(node);
    rp.state.local_rank = local;
    rp.log_path = o.log_dir + "/rank-" + std::to_string(r) + ".log";
    rp.trace_path = o.log_dir + "/rank-" + std::to_string(r) + ".trace";
    ::unlink(rp.log_path.c_str());
    ::unlink(rp.trace_path.c_str());
    ::unlink((o.log_dir + "/rank-" + std::to_string(r) + ".exit").c_str());
    rp.classifier = std::make_unique<collectors::LogClassifier>(r);
    rp.python = o.command[0].find("python") != std::string::npos;
    SubprocessOptions so;
    so.env = common;
    so.env["RANK"] = std::to_string(r);
    so.env["LOCAL_RANK"] = std::to_string(local);
    so.env["WORLD_SIZE"] = std::to_string(world);
    so.env["LOCAL_SIZE"] = std::to_string(o.slots);
    so.env["CROSS_RANK"] = std::to_string(node);
    so.env["CROSS_SIZE"] = std::to_string(nodes);
    so.env["MASTER_ADDR"] = "127.0.0.1";
    so.env["MASTER_PORT"] = std::to_string(master_port);
    so.env["DSDOCTOR_TRACE_FILE"] = rp.trace_path;
    so.env["DSDOCTOR_NODE"] = rp.state.node;
    if (!std::getenv("DSDOCTOR_TIMEOUT")) so.env["DSDOCTOR_TIMEOUT"] = timeout_buf;
    so.env["PYTHONUNBUFFERED"] = "1";  // tracebacks and prints reach the log as they happen
    so.log_path = rp.log_path;
    so.parent_death_signal = SIGKILL;  // a dead coordinator leaves no orphans
    auto p = Subprocess::Start(o.command, so);
    if (!p.ok()) {
      std::cerr << "dsdoctor run: cannot start rank " << r << ": " << p.status().message() << "\n";
      for (auto& other : ranks)
        if (other.proc) other.proc->Signal(SIGKILL);
      return kExitInternal;
    }
    rp.state.pid = p->pid();
    rp.state.status = diagnosis::RankStatus::kRunning;
    rp.proc = std::move(*p);
  }
  log->info("started {} ranks ({} nodes x {} slots), logs in {}", world, nodes, o.slots, o.log_dir);
  if (!o.quiet) std::printf("dsdoctor: %d ranks (%d nodes x %d slots), logs and traces in %s\n", world, nodes, o.slots, o.log_dir.c_str());

  diagnosis::JobState job;
  job.world_size = world;
  job.stall_after_s = o.timeout_s;
  job.hang_after_s = o.hang_after_s;
  std::set<std::string> announced;
  bool hang_reported = false;
  int64_t hang_ns = 0;
  std::vector<diagnosis::RankState> at_hang;  // every rank as it was when the hang was reported
  int job_code = 0;
  int64_t job_code_ns = 0;
  bool job_code_signaled = false;
  auto snapshot = [&]() {
    job.ranks.clear();
    for (auto& rp : ranks) job.ranks.push_back(rp.state);
    job.job_ended = std::all_of(ranks.begin(), ranks.end(), [](auto& rp) { return rp.state.status == diagnosis::RankStatus::kExited; });
  };
  bool stopped_by_us = false;
  auto stop_all = [&](int sig) {
    stopped_by_us = true;
    for (auto& rp : ranks)
      if (rp.state.status == diagnosis::RankStatus::kRunning) rp.proc->Signal(sig);
  };
  int64_t stop_deadline_ns = 0;  // after a stop request: when to escalate to SIGKILL
  while (true) {
    int64_t now = runtime::TraceNowNs();
    job.now_ns = now;
    bool any_running = false;
    for (auto& rp : ranks) {
      if (rp.state.status == diagnosis::RankStatus::kRunning) {
        if (auto e = rp.proc->Poll()) {
          rp.state.status = diagnosis::RankStatus::kExited;
          rp.state.exit_code = e->signaled ? 0 : e->exit_code;
          rp.state.signal = e->signaled ? e->term_signal : 0;
          rp.state.exit_ns = now;
          rp.state.proc.valid = false;
          int shell_code = e->signaled ? 128 + e->term_signal : e->exit_code;
          // The job's code is the first failure's, as torchrun's "first observed failure"; within one
          // sampling tick a rank killed by a signal went first (its peers fail because it vanished).
          if (shell_code != 0 && !stopped_by_us &&
              (job_code == 0 || (job_code_ns == now && e->signaled && !job_code_signaled))) {
            job_code = shell_code;
            job_code_ns = now;
            job_code_signaled = e->signaled;
          }
          (void)WriteFileAtomic(o.log_dir + "/rank-" + std::to_string(rp.state.rank) + ".exit", std::to_string(shell_code) + "\n");
          if (!o.quiet) std::printf("dsdoctor: rank %d %s\n", rp.state.rank, e->Describe().c_str());
        }
      }
      any_running |= rp.state.status == diagnosis::RankStatus::kRunning;
      Drain(rp, job.events, !o.quiet, now);
      Sample(rp, now);
    }
    if (!any_running) break;
    if (g_stop_signal && !stop_deadline_ns) {
      std::printf("dsdoctor: %s: stopping every rank\n", strsignal(g_stop_signal.load()));
      stop_all(SIGTERM);
      stop_deadline_ns = now + 3'000'000'000LL;
    }
    if (stop_deadline_ns && now > stop_deadline_ns) stop_all(SIGKILL);
    if (!stop_deadline_ns) {
      snapshot();
      diagnosis::Diagnosis d = diagnosis::Diagnose(job);
      for (const auto& f : d.findings) {
        if (announced.insert(FindingKey(f)).second)
          std::printf("dsdoctor: %s %s: %s\n", diagnosis::SeverityName(f.severity), f.code.c_str(), f.summary.c_str());
      }
      std::fflush(stdout);
      if (d.hang && !hang_reported) {
        hang_reported = true;
        // One stack per class of hung ranks (a few attaches, not one per rank).
        size_t captured = 0;
        for (const auto& cl : d.classes) {
          if (captured >= 8) break;
          auto& rp = ranks[cl.ranks.front()];
          if (rp.state.status != diagnosis::RankStatus::kRunning) continue;
          ++captured;
          auto st = collectors::CaptureStack(rp.state.pid, rp.python);
          if (st.ok()) {
            for (int other : cl.ranks) ranks[other].state.stack = st->signature;
            (void)WriteFileAtomic(o.log_dir + "/rank-" + std::to_string(rp.state.rank) + ".stack", "# " + st->tool + "\n" + st->text);
          } else {
            log->warn("{}", st.status().message());
          }
        }
        snapshot();
        hang_ns = now;
        at_hang = job.ranks;
        d = diagnosis::Diagnose(job);
        WriteManifest(o.log_dir, job, d, o.command);
        std::printf("dsdoctor: the job is hung%s\n", o.on_hang == "stop" ? "; stopping every rank (report below)" : "; watching on (--on-hang wait)");
        if (o.on_hang == "stop") {
          stop_all(SIGTERM);
          stop_deadline_ns = now + 3'000'000'000LL;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // Final report: everything the logs said, through to their last line.
  int64_t now = runtime::TraceNowNs();
  for (auto& rp : ranks) {
    Drain(rp, job.events, !o.quiet, now);
    if (!rp.partial.empty()) {
      for (auto& e : rp.classifier->Feed(rp.partial)) job.events.push_back(std::move(e));
      rp.partial.clear();
    }
    for (auto& e : rp.classifier->Finish()) job.events.push_back(std::move(e));
    // The whole ring: a mismatch that completed (a different reduce op) may lie far back.
    if (auto t = runtime::ReadTrace(rp.trace_path); t.ok()) collectors::ApplyTrace(*t, &rp.state, t->records.size());
  }
  snapshot();
  job.now_ns = now;
  if (stopped_by_us && !at_hang.empty()) {
    // We ended the hung ranks: diagnose them as they were, not the exits we caused.
    for (auto& r : job.ranks) {
      const auto& before = at_hang[r.rank];
      if (before.status == diagnosis::RankStatus::kRunning) r = before;
    }
    job.now_ns = hang_ns;
    job.job_ended = false;
  }
  diagnosis::Diagnosis final_d = diagnosis::Diagnose(job);
  WriteManifest(o.log_dir, job, final_d, o.command);
  int rc = EmitReport(job, final_d, o.json_out, o.color);
  if (rc != kExitOk) return rc;
  if (g_stop_signal) return 128 + g_stop_signal;
  if (final_d.hang || hang_reported) return job_code ? job_code : kExitProblems;
  return job_code;
}

int RunAnalyze(const AnalyzeOptions& o) {
  std::vector<std::string> warnings;
  collectors::RunDirOptions opts{o.timeout_s, o.hang_after_s};
  auto job = collectors::LoadRunDir(o.dir, opts, &warnings);
  if (!job.ok()) {
    std::cerr << "dsdoctor analyze: " << job.status().message() << "\n";
    return kExitUsage;
  }
  for (const auto& w : warnings) std::cerr << "dsdoctor analyze: warning: " << w << "\n";
  diagnosis::Diagnosis d = diagnosis::Diagnose(*job);
  if (o.json) {
    std::cout << diagnosis::RunJson(*job, d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << diagnosis::RenderRunText(*job, d);
  }
  bool errors = std::any_of(d.findings.begin(), d.findings.end(), [](auto& f) { return f.severity == diagnosis::Severity::kError; });
  return errors || d.hang ? kExitProblems : kExitOk;
}

}  // namespace dsd::cli
