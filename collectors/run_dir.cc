#include "collectors/run_dir.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>
#include <set>

#include "collectors/flight_recorder.h"
#include "collectors/log_classifier.h"
#include "collectors/log_scan.h"
#include "collectors/stack.h"
#include "collectors/torchelastic_error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/run_files.h"
#include "common/strings.h"

namespace dsd::collectors {

namespace {

// Assigned field by field: over a record of an earlier sample, its strings keep their storage.
void AssignOpRecord(const runtime::TraceRecord& r, diagnosis::OpRecord* o) {
  o->op = runtime::OpName(r.op);
  o->seq = r.seq;
  o->comm = r.comm_id;
  o->dtype = r.dtype == runtime::DType::kNone ? "" : runtime::DTypeName(r.dtype);
  o->reduce = runtime::ReduceOpName(r.reduce);
  o->count = r.count;
  o->bytes = r.bytes;
  o->peer = r.peer;
  o->callsite = r.callsite;
  o->state = runtime::RecordStateName(r.state);
  o->async = r.async;
  o->started_ns = r.started_ns ? r.started_ns : r.enqueued_ns;
  o->ended_ns = r.ended_ns;
}

}  // namespace

diagnosis::OpRecord ToOpRecord(const runtime::TraceRecord& r) {
  diagnosis::OpRecord o;
  AssignOpRecord(r, &o);
  return o;
}

void ApplyTrace(const runtime::TraceSnapshot& t, diagnosis::RankState* rank, size_t recent) {
  rank->has_trace = true;
  if (!rank->pid) rank->pid = t.pid;
  rank->step = t.step;
  rank->phase = runtime::PhaseName(t.phase);
  rank->phase_ns = t.phase_ns;
  rank->heartbeat_ns = t.heartbeat_ns;
  rank->watchdog_fired = t.flags & runtime::kTraceFlagWatchdogFired;
  rank->finished = t.flags & runtime::kTraceFlagFinished;
  rank->flight_recorder = t.flags & runtime::kTraceFlagFlightRecorder;
  rank->last_error = t.last_error;
  if (t.records_unchanged) return;  // the calls are as the previous snapshot left them
  rank->in_flight.reset();
  rank->last.reset();
  if (const auto* r = t.InFlight()) rank->in_flight = ToOpRecord(*r);
  if (const auto* r = t.Last()) rank->last = ToOpRecord(*r);
  size_t from = t.records.size() > recent ? t.records.size() - recent : 0;
  rank->recent.resize(t.records.size() - from);
  for (size_t i = from; i < t.records.size(); ++i) AssignOpRecord(t.records[i], &rank->recent[i - from]);
}

namespace {

// A log can name any rank ("[rank999999999]:"): the engine indexes ranks, so one outside the job
// is kept as job-level evidence (rank -1), never used as an index.
void ClampRanks(diagnosis::JobState* job) {
  for (auto& e : job->events) {
    if (e.rank < -1 || e.rank >= job->world_size) e.rank = -1;
    if (e.subject_rank < -1 || e.subject_rank >= job->world_size) e.subject_rank = -1;
  }
}

// Ranks whose logs name different NCCL versions: one event per minority version (its ranks),
// naming the majority.
void AddVersionEvents(const LogScanResult& logs, diagnosis::JobState* job) {
  std::map<std::string, std::vector<int>> by_version;
  for (auto& [rank, facts] : logs.ranks)
    if (!facts.nccl_version.empty()) by_version[facts.nccl_version].push_back(rank);
  if (by_version.size() < 2) return;
  auto majority = std::max_element(by_version.begin(), by_version.end(),
                                   [](auto& a, auto& b) { return a.second.size() < b.second.size(); });
  for (auto& [version, ranks] : by_version) {
    if (version == majority->first) continue;
    for (int r : ranks) {
      const RankLogFacts& f = logs.ranks.at(r);
      diagnosis::LogEvent e;
      e.rank = r;
      e.code = diagnosis::codes::kNcclVersionMismatch;
      e.kind = "nccl_version_mismatch";
      e.summary = "NCCL " + version + " is loaded here, NCCL " + majority->first + " on " +
                  std::to_string(majority->second.size()) + " other rank(s)";
      e.text = "NCCL version " + version;
      size_t colon = f.version_where.rfind(':');
      e.file = f.version_where.substr(0, colon);
      e.line = colon == std::string::npos ? 0 : std::atoi(f.version_where.c_str() + colon + 1);
      e.host = f.host;
      e.remedy =
          "Every rank must load the same NCCL: install the same NCCL (or the same PyTorch wheel, which bundles it) on "
          "every node, and check LD_LIBRARY_PATH / NCCL_* paths; `dsdoctor check` compares the versions before a run.";
      job->events.push_back(std::move(e));
    }
  }
}

// The scanner's findings into the job: its warnings, its events (with the cross-rank NCCL version
// check), ranks outside the job made job-level.
void MergeLogs(LogScanResult logs, diagnosis::JobState* job, std::vector<std::string>* warnings) {
  if (warnings) warnings->insert(warnings->end(), logs.warnings.begin(), logs.warnings.end());
  log::Get("analyze")->debug("scanned {} bytes, {} lines, {} looked at ({}), {} events", logs.bytes, logs.lines,
                             logs.candidate_lines, logs.engine, logs.events.size());
  for (auto& e : logs.events) job->events.push_back(std::move(e));
  AddVersionEvents(logs, job);
  ClampRanks(job);
}

// Sum of the sizes of the files that exist among `paths`: tells the scanner early that the input
// is big (it then takes its faster pre-scanner from the start).
uint64_t TotalBytes(const std::vector<std::string>& paths) {
  uint64_t bytes = 0;
  for (const std::string& p : paths) {
    struct stat info;
    if (p != "-" && ::stat(p.c_str(), &info) == 0) bytes += static_cast<uint64_t>(info.st_size);
  }
  return bytes;
}

// The Flight Recorder's record of the collective a log line names (PyTorch's watchdog and work
// errors: SeqNum of process group 0, which is the dump's collective_seq_id of the default group):
// the printer's own record, else any rank's. The line then says what the call was and where the
// program made it, which the watchdog's words (OpType, NumelIn) do not.
void JoinFlightRecorder(diagnosis::JobState* job) {
  auto find = [&](int rank, uint64_t seq) -> const diagnosis::OpRecord* {
    if (rank < 0 || rank >= static_cast<int>(job->ranks.size())) return nullptr;
    for (const diagnosis::OpRecord& rec : job->ranks[rank].recent)
      if (rec.comm == 0 && rec.seq == seq && rec.collective()) return &rec;
    return nullptr;
  };
  for (diagnosis::LogEvent& e : job->events) {
    const std::string seq_text = e.Field("seq");
    if (seq_text.empty() || (!e.Field("pg").empty() && e.Field("pg") != "0")) continue;
    const uint64_t seq = static_cast<uint64_t>(SafeInt(seq_text));
    int owner = e.rank;
    const diagnosis::OpRecord* rec = find(owner, seq);
    for (int r = 0; !rec && r < static_cast<int>(job->ranks.size()); ++r)
      if ((rec = find(r, seq))) owner = r;
    if (!rec) continue;
    std::string said =
        "Flight Recorder of rank " + std::to_string(owner) + ": " + rec->Describe() + " [" + rec->state + "]";
    e.fields["flight_recorder"] = said;
    e.summary += " (" + said + ")";
  }
}

// Launchers' exit lines about a rank make that rank's end known (logs-only analysis).
void ApplyExitEvents(diagnosis::JobState* job) {
  std::set<std::string> files;
  for (const diagnosis::LogEvent& e : job->events) files.insert(e.file);
  const bool single_file = files.size() <= 1;
  for (const diagnosis::LogEvent& e : job->events) {
    if (e.code != diagnosis::codes::kRankExited || e.subject_rank < 0 || e.subject_rank >= job->world_size) continue;
    if (e.exit_code == 0 && e.signal == 0) continue;
    diagnosis::RankState& r = job->ranks[e.subject_rank];
    if (r.status == diagnosis::RankStatus::kExited) continue;
    r.status = diagnosis::RankStatus::kExited;
    r.exit_code = e.exit_code;
    r.signal = e.signal;
    // Order of the lines stands in for time when the log has no timestamps (one file only: byte
    // offsets of different files do not compare).
    r.exit_ns = e.time_ns ? e.time_ns : single_file ? e.offset + 1 : 0;
    if (r.node.empty()) r.node = e.host;
  }
}

}  // namespace

Status AddCombinedLogs(const std::vector<std::string>& paths, diagnosis::JobState* job,
                       std::vector<std::string>* warnings) {
  LogScanner scanner(LogScanOptions{});
  scanner.ExpectBytes(TotalBytes(paths));
  for (const std::string& p : paths) {
    Status st = scanner.Add({p, -1, p});
    if (st.code() == StatusCode::kNotFound) return st;
    if (!st.ok() && warnings) warnings->push_back(st.message());
  }
  MergeLogs(scanner.Finish(), job, warnings);
  return Status::Ok();
}

// A small file whose text is a torchrun error file (collectors/torchelastic_error.h); nullopt for
// anything else, standard input included (it is read once, as a log).
std::optional<TorchElasticError> ReadTorchElasticErrorFile(const std::string& path) {
  constexpr size_t kMaxErrorFileBytes = 16u << 20;
  struct stat st;
  if (path == "-" || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > kMaxErrorFileBytes)
    return std::nullopt;
  auto head = ReadFileRange(path, 0, 64);
  if (!head.ok() || Trim(*head).empty() || Trim(*head)[0] != '{') return std::nullopt;
  auto text = ReadFile(path, kMaxErrorFileBytes);
  return text.ok() ? ParseTorchElasticError(*text) : std::nullopt;
}

Result<diagnosis::JobState> LoadLogs(const std::vector<std::string>& paths, const RunDirOptions& options,
                                     std::vector<std::string>* warnings) {
  if (paths.empty()) return InvalidArgument("analyze: no path given (a run dir, log files, or - for standard input)");
  // A folder of PyTorch Flight Recorder dumps (<prefix><rank>, from the user's own job; no run.json)
  // may come with the job's log files: both are read and joined (JoinFlightRecorder).
  std::optional<diagnosis::JobState> fr_job;
  std::vector<std::string> log_paths;
  for (const std::string& p : paths) {
    struct stat st;
    if (p == "-" || ::stat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      log_paths.push_back(p);
      continue;
    }
    const bool run_dir = ::access(RunDir(p).Manifest().c_str(), F_OK) == 0;
    if (!run_dir) {
      auto fr = LoadFlightRecorderDir(p, warnings);
      if (fr.ok()) {
        if (fr_job)
          return InvalidArgument("analyze: '" + p + "' is a second folder of Flight Recorder dumps: give one");
        fr_job = std::move(*fr);
        continue;
      }
      if (fr.status().code() != StatusCode::kNotFound) return fr.status();
    }
    if (paths.size() > 1)
      return InvalidArgument("analyze: '" + p +
                             "' is a run dir: give it alone, or give log files (and one folder of Flight Recorder "
                             "dumps) only");
    return LoadRunDir(p, options, warnings);
  }
  if (fr_job && log_paths.empty()) {
    fr_job->stall_after_s = options.stall_after_s, fr_job->hang_after_s = options.hang_after_s;
    return std::move(*fr_job);
  }
  LogScanOptions scan_options;
  scan_options.on_idle = options.on_idle;
  LogScanner scanner(scan_options);
  scanner.ExpectBytes(TotalBytes(log_paths));
  for (const std::string& p : log_paths) {
    // torchrun's error file (TORCHELASTIC_ERROR_FILE): the traceback it holds, as its rank's output.
    if (auto error = ReadTorchElasticErrorFile(p)) {
      scanner.AddText(TorchElasticErrorAsLog(*error), {p, TorchElasticErrorRank(p), p});
      continue;
    }
    // A rank's log by its name (common/run_files.h); any other file is a combined log.
    const auto named = ParseRunFilePath(p);
    int rank = named && named->kind == RankFile::kLog ? named->rank : -1;
    if (rank >= kMaxRanks) rank = -1;
    Status st = scanner.Add({p, rank, p == "-" ? "<stdin>" : p});
    if (!st.ok()) {
      if (st.code() == StatusCode::kNotFound) return st;
      if (warnings) warnings->push_back(st.message());
    }
  }
  LogScanResult logs = scanner.Finish();
  diagnosis::JobState job;
  if (fr_job) job = std::move(*fr_job);
  job.logs_only = !fr_job;
  job.stall_after_s = options.stall_after_s;
  job.hang_after_s = options.hang_after_s;
  const int before = static_cast<int>(job.ranks.size());
  // Ranks a line names in a list (Horovod's and torchfrtrace's missing ranks, NCCL's peers) are members
  // of the world too, and ranks the logs are about.
  std::set<int> listed;
  for (const diagnosis::LogEvent& e : logs.events)
    for (const char* field : {"peer_ranks", "missing"})
      for (int r : e.RankList(field)) listed.insert(r);
  const int listed_size = listed.empty() ? 0 : std::min(*listed.rbegin(), kMaxRanks - 1) + 1;
  job.world_size = std::max(job.world_size, std::min(std::max(logs.world_size, listed_size), kMaxRanks));
  job.ranks.resize(job.world_size);
  for (int r = 0; r < job.world_size; ++r) {
    if (r >= before) {
      job.ranks[r].rank = r;
      job.ranks[r].status = diagnosis::RankStatus::kRunning;  // fate unknown unless a line says it (below)
    }
    if (auto it = logs.ranks.find(r); it != logs.ranks.end() && job.ranks[r].node.empty())
      job.ranks[r].node = it->second.host;
  }
  std::set<int> in_logs;
  for (const auto& [r, facts] : logs.ranks) in_logs.insert(r);
  for (const diagnosis::LogEvent& e : logs.events) in_logs.insert({e.rank, e.subject_rank});
  in_logs.insert(listed.begin(), listed.end());
  for (int r : in_logs)
    if (r >= 0 && r < job.world_size) job.ranks_in_logs.push_back(r);
  MergeLogs(std::move(logs), &job, warnings);
  ApplyExitEvents(&job);
  if (fr_job) JoinFlightRecorder(&job);
  job.job_ended = !job.ranks.empty() && std::all_of(job.ranks.begin(), job.ranks.end(),
                                                    [](auto& r) { return r.status == diagnosis::RankStatus::kExited; });
  return job;
}

// The Flight Recorder dumps of a run (docs/flight-recorder.md "In a run dir"): the newest incident
// dsdoctor asked for, else what torch's watchdog dumped on a timeout. Torch numbers collectives its
// own way (per process group, counting calls the tracer does not see), so the dumps never mix with
// the tracer's records: they stand in for them when no rank left a trace of ours (the tracer was
// off, the files were lost), and are pointed at otherwise.
bool AddFlightRecorderDumps(const RunDir& run_dir, diagnosis::JobState* job, int64_t* latest_ns,
                            std::vector<std::string>* warnings) {
  std::string dir;
  int newest = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(run_dir.FlightRecorderDir(), ec)) {
    const std::string name = e.path().filename().string();
    if (!StartsWith(name, RunDir::kFlightRecorderIncidentPrefix)) continue;
    int n = SafeInt(name.substr(std::string_view(RunDir::kFlightRecorderIncidentPrefix).size()));
    if (n > newest) newest = n, dir = e.path().string();
  }
  std::vector<std::string> fr_warnings;
  Result<diagnosis::JobState> fr = NotFound("");
  if (!dir.empty()) fr = LoadFlightRecorderDir(dir, &fr_warnings);
  if (!fr.ok()) {
    dir = run_dir.FlightRecorderWatchdog();
    fr = LoadFlightRecorderDir(dir, &fr_warnings);
  }
  if (!fr.ok()) return false;
  const bool traced = std::any_of(job->ranks.begin(), job->ranks.end(),
                                  [](const diagnosis::RankState& r) { return r.has_trace && r.last; });
  int dumped = 0;
  for (const auto& r : fr->ranks) dumped += r.has_trace;
  if (traced) {
    if (warnings)
      warnings->push_back(dir + ": PyTorch Flight Recorder dumps of " + std::to_string(dumped) +
                          " ranks, beside the traces (torch's own view: dsdoctor analyze " + dir + ")");
    return false;
  }
  if (warnings) {
    warnings->push_back(
        dir + ": no rank left a dsdoctor trace; their collectives come from PyTorch's Flight Recorder dumps (" +
        std::to_string(dumped) + " of " + std::to_string(fr->world_size) + " ranks)");
    for (auto& w : fr_warnings) warnings->push_back(std::move(w));
  }
  if (fr->world_size > job->world_size) {
    job->world_size = fr->world_size;
    job->ranks.resize(job->world_size);
    for (int r = 0; r < job->world_size; ++r) job->ranks[r].rank = r;
  }
  for (const auto& from : fr->ranks) {
    if (!from.has_trace || from.rank < 0 || from.rank >= job->world_size) continue;
    diagnosis::RankState& into = job->ranks[from.rank];
    into.has_trace = true;
    into.recent = from.recent;
    into.last = from.last;
    into.in_flight = from.in_flight;
    if (into.status == diagnosis::RankStatus::kNotStarted) into.status = diagnosis::RankStatus::kRunning;
  }
  for (auto& m : fr->evidence_missing) job->evidence_missing.push_back(std::move(m));
  *latest_ns = std::max(*latest_ns, fr->now_ns);
  return true;
}

namespace {

// A heartbeat this old (traces beat every 100 ms) means its writer no longer runs, unless the process
// is still there (WriterAliveHere: a job frozen whole by SIGSTOP or `scontrol suspend`).
constexpr int64_t kTracesStoppedNs = 5'000'000'000;

// Whether the trace's writer process still exists on this host (a reused pid reads as alive, which
// only keeps the job from being taken for over).
bool WriterAliveHere(const runtime::TraceSnapshot& t, const std::string& this_host) {
  if (t.pid <= 0 || this_host.empty() || t.hostname != this_host) return false;
  return ::kill(t.pid, 0) == 0 || errno == EPERM;
}

}  // namespace

Result<diagnosis::JobState> LoadRunDir(const std::string& dir, const RunDirOptions& options,
                                       std::vector<std::string>* warnings) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return NotFound("analyze: cannot open log dir '" + dir + "'");
  const RunDir run_dir(dir);
  std::map<int, std::map<std::string, std::string>> files;  // rank → kind → path
  while (dirent* e = ::readdir(d)) {
    const auto named = ParseRunFileName(e->d_name);  // at most 7 digits: cannot overflow
    if (!named) continue;
    if (named->rank < kMaxRanks)
      files[named->rank][std::string(RankFileExtension(named->kind))] = run_dir.RankPath(named->rank, named->kind);
    else if (warnings)
      warnings->push_back(dir + "/" + e->d_name + ": rank above " + std::to_string(kMaxRanks) + ", ignored");
  }
  ::closedir(d);
  diagnosis::JobState job;
  job.stall_after_s = options.stall_after_s;
  job.hang_after_s = options.hang_after_s;
  // The manifest, when the coordinator wrote one, says who ran where and how each rank ended.
  std::map<int, diagnosis::RankState> from_manifest;
  bool stopped_by_us = false;  // dsdoctor ended the ranks: their .exit files hold our signal, not their fate
  int64_t manifest_now_ns = 0;
  bool have_manifest = false;
  if (auto manifest = ReadFile(run_dir.Manifest()); manifest.ok()) {
    have_manifest = true;
    nlohmann::json j = nlohmann::json::parse(*manifest, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument(run_dir.Manifest() + ": not valid JSON");
    if (!j.contains("world_size") || !j["world_size"].is_number_integer() || j["world_size"].get<int64_t>() < 0 ||
        j["world_size"].get<int64_t>() > kMaxRanks)
      return InvalidArgument(run_dir.Manifest() + ": field 'world_size' must be an integer from 0 to " +
                             std::to_string(kMaxRanks));
    job.world_size = j.value("world_size", 0);
    stopped_by_us = j.contains("stopped_by_dsdoctor") && j["stopped_by_dsdoctor"].is_object();
    // mpirun started the ranks (`run` of an MPI program): its teardown's kills are no culprits.
    job.launcher_teardown = j.contains("launcher_teardown") && j["launcher_teardown"] == true;
    if (j.contains("now_ns") && j["now_ns"].is_number_integer()) manifest_now_ns = j["now_ns"].get<int64_t>();
    if (j.contains("ranks") && j["ranks"].is_array()) {
      for (const auto& r : j["ranks"]) {
        auto rs = diagnosis::RankStateFromJson(r);
        if (!rs.ok()) return InvalidArgument(run_dir.Manifest() + ": " + rs.status().message());
        from_manifest[rs->rank] = *rs;
      }
    }
    // What `run` showed live and saw clear (a stall the job recovered from): warnings still.
    if (j.contains("past_findings")) {
      if (!j["past_findings"].is_array())
        return InvalidArgument(run_dir.Manifest() + ": field 'past_findings' must be an array");
      for (const auto& f : j["past_findings"]) {
        auto finding = diagnosis::FindingFromJson(f);
        if (!finding.ok())
          return InvalidArgument(run_dir.Manifest() + ": past_findings: " + finding.status().message());
        if (job.past.size() < 256) job.past.push_back(*finding);
      }
    }
  }
  if (files.empty() && from_manifest.empty())
    return NotFound("analyze: '" + dir + "' holds no rank-<r>.log/.trace files and no " + RunDir::kManifest);
  int max_rank = -1;
  for (auto& [r, f] : files) max_rank = std::max(max_rank, r);
  for (auto& [r, s] : from_manifest) max_rank = std::max(max_rank, r);
  job.world_size = std::max(job.world_size, max_rank + 1);
  job.ranks.resize(job.world_size);
  LogScanner scanner;
  std::vector<std::string> log_paths;
  for (auto& [r, f] : files)
    if (f.count("log")) log_paths.push_back(f["log"]);
  scanner.ExpectBytes(TotalBytes(log_paths));
  int64_t latest_ns = 0;
  bool writer_alive = false;  // a trace's writer still runs on this host (frozen, or just quiet)
  char this_host[256] = {};
  if (::gethostname(this_host, sizeof this_host - 1) != 0) this_host[0] = '\0';
  for (int r = 0; r < job.world_size; ++r) {
    diagnosis::RankState& rs = job.ranks[r];
    if (from_manifest.count(r)) rs = from_manifest[r];
    rs.rank = r;
    auto& f = files[r];
    if (f.count("trace")) {
      auto t = runtime::ReadTrace(f["trace"]);
      if (t.ok()) {
        ApplyTrace(*t, &rs, t->records.size());  // all of it: old mismatches count post-mortem
        if (WriterAliveHere(*t, this_host)) writer_alive = true;
        if (rs.node.empty()) rs.node = t->hostname;
        latest_ns = std::max(
            {latest_ns, t->heartbeat_ns, rs.last ? std::max(rs.last->started_ns, rs.last->ended_ns) : int64_t{0}});
      } else {
        if (warnings) warnings->push_back(t.status().message());
        job.evidence_missing.push_back(RankFileName(r, RankFile::kTrace) + ": " + t.status().message());
      }
    } else if (rs.has_trace) {
      // The run traced this rank, and its ring is not here (a node whose files never came).
      job.evidence_missing.push_back(RankFileName(r, RankFile::kTrace) +
                                     ": missing; the run traced this rank (its last records are in " +
                                     RunDir::kManifest + ")");
    }
    // A rank the manifest saw running when dsdoctor stopped the job: its exit is our doing.
    bool ours = stopped_by_us && from_manifest.count(r) && from_manifest[r].status == diagnosis::RankStatus::kRunning;
    if (f.count("exit") && !ours) {
      auto text = ReadFile(f["exit"]);
      int code = -1;
      try {
        code = text.ok() ? std::stoi(std::string(Trim(*text))) : -1;
      } catch (...) {
        code = -1;
      }
      if (code < 0) {
        if (warnings) warnings->push_back(f["exit"] + ": not an exit status");
      } else {
        rs.status = diagnosis::RankStatus::kExited;
        if (code > 128)
          rs.signal = code - 128;  // the shell's 128 + signal
        else
          rs.exit_code = code;
      }
    }
    if (rs.status == diagnosis::RankStatus::kNotStarted && (f.count("log") || rs.has_trace)) {
      // Post-mortem without an exit record: the rank ran; how it ended is unknown.
      rs.status = rs.finished ? diagnosis::RankStatus::kExited : diagnosis::RankStatus::kRunning;
    }
    if (f.count("stack") && rs.stack.empty()) {
      // "# tool" then the tool's output (written when the run captured it).
      if (auto text = ReadFile(f["stack"], 4u << 20); text.ok()) rs.stack = ReduceStack(*text, kStackFrames);
    }
    if (f.count("log")) {
      if (Status st = scanner.Add({f["log"], r, ""}); !st.ok() && warnings) warnings->push_back(st.message());
    } else {
      if (warnings) warnings->push_back(run_dir.RankLog(r) + ": missing");
      job.evidence_missing.push_back(RankFileName(r, RankFile::kLog) + ": missing");
    }
  }
  const bool from_flight_recorder = AddFlightRecorderDumps(run_dir, &job, &latest_ns, warnings);
  // What srun/pdsh/mpirun said while the agents ran (a step killed for memory, a lost node).
  if (struct stat st; ::stat(run_dir.LauncherLog().c_str(), &st) == 0 && st.st_size > 0) {
    if (Status s = scanner.Add({run_dir.LauncherLog(), -1, run_dir.LauncherLog(), /*agents=*/true});
        !s.ok() && warnings)
      warnings->push_back(s.message());
  }
  MergeLogs(scanner.Finish(), &job, warnings);
  if (from_flight_recorder) JoinFlightRecorder(&job);
  // A rank the manifest says never started (its launcher failed) has ended too: it never will.
  job.job_ended = std::all_of(job.ranks.begin(), job.ranks.end(), [&](auto& r) {
    return r.status == diagnosis::RankStatus::kExited ||
           (have_manifest && r.status == diagnosis::RankStatus::kNotStarted && from_manifest.count(r.rank));
  });
  // No manifest and ranks with no exit status: the run was cut short (its coordinator and agents
  // killed with it, the node lost). What happened at the end is unknown, and the report says so
  // rather than reading as a clean run.
  if (!have_manifest) {
    std::vector<int> unknown;
    for (const auto& r : job.ranks)
      if (r.status == diagnosis::RankStatus::kRunning) unknown.push_back(r.rank);
    if (!unknown.empty())
      job.evidence_missing.push_back(
          std::string(RunDir::kManifest) + " is missing and " + (unknown.size() == 1 ? "rank " : "ranks ") +
          diagnosis::FormatRanks(unknown) +
          " left no exit status: the run was cut short (dsdoctor, its agents or the nodes were killed), so how it "
          "ended is unknown; the findings rest on the logs and traces up to then");
  }
  job.now_ns = stopped_by_us && manifest_now_ns ? manifest_now_ns : latest_ns;
  // No exit status and every trace silent for a while: the job's processes are gone (or all frozen),
  // so a collective in flight was cut off by the end (JobState::traces_stopped).
  if (!job.job_ended && !writer_alive) {
    const int64_t wall = options.now_ns ? options.now_ns : runtime::TraceNowNs();
    bool any = false, all = true;
    for (const auto& r : job.ranks) {
      if (r.status != diagnosis::RankStatus::kRunning) continue;
      any = true;
      all &= r.heartbeat_ns > 0 && wall - r.heartbeat_ns >= kTracesStoppedNs;
    }
    job.traces_stopped = any && all;
  }
  for (auto& r : job.ranks) {
    if (!(stopped_by_us && manifest_now_ns)) job.now_ns = std::max(job.now_ns, r.exit_ns);
    if (r.status == diagnosis::RankStatus::kExited && !r.exit_ns) r.exit_ns = r.heartbeat_ns;
  }
  return job;
}

}  // namespace dsd::collectors
