#include "collectors/run_dir.h"

#include <dirent.h>

#include <algorithm>
#include <map>
#include <regex>

#include "collectors/log_classifier.h"
#include "collectors/stack.h"
#include "common/file.h"
#include "common/strings.h"

namespace dsd::collectors {

diagnosis::OpRecord ToOpRecord(const runtime::TraceRecord& r) {
  diagnosis::OpRecord o;
  o.op = runtime::OpName(r.op);
  o.seq = r.seq;
  o.comm = r.comm_id;
  o.dtype = r.dtype == runtime::DType::kNone ? "" : runtime::DTypeName(r.dtype);
  o.reduce = runtime::ReduceOpName(r.reduce);
  o.count = r.count;
  o.bytes = r.bytes;
  o.peer = r.peer;
  o.callsite = r.callsite;
  o.state = runtime::RecordStateName(r.state);
  o.async = r.async;
  o.started_ns = r.started_ns ? r.started_ns : r.enqueued_ns;
  o.ended_ns = r.ended_ns;
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
  rank->last_error = t.last_error;
  rank->in_flight.reset();
  rank->last.reset();
  if (const auto* r = t.InFlight()) rank->in_flight = ToOpRecord(*r);
  if (const auto* r = t.Last()) rank->last = ToOpRecord(*r);
  rank->recent.clear();
  size_t from = t.records.size() > recent ? t.records.size() - recent : 0;
  for (size_t i = from; i < t.records.size(); ++i) rank->recent.push_back(ToOpRecord(t.records[i]));
}

Result<diagnosis::JobState> LoadRunDir(const std::string& dir, const RunDirOptions& options, std::vector<std::string>* warnings) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return NotFound("analyze: cannot open log dir '" + dir + "'");
  static const std::regex kName(R"(^rank-(\d{1,7})\.(log|trace|exit|stack)$)");
  std::map<int, std::map<std::string, std::string>> files;  // rank → kind → path
  while (dirent* e = ::readdir(d)) {
    std::cmatch m;
    if (!std::regex_match(e->d_name, m, kName)) continue;
    int rank = std::stoi(m[1].str());  // at most 7 digits: cannot overflow
    if (rank < kMaxRanks) files[rank][m[2].str()] = dir + "/" + e->d_name;
    else if (warnings) warnings->push_back(dir + "/" + e->d_name + ": rank above " + std::to_string(kMaxRanks) + ", ignored");
  }
  ::closedir(d);
  diagnosis::JobState job;
  job.stall_after_s = options.stall_after_s;
  job.hang_after_s = options.hang_after_s;
  // The manifest, when the coordinator wrote one, says who ran where and how each rank ended.
  std::map<int, diagnosis::RankState> from_manifest;
  bool stopped_by_us = false;  // dsdoctor ended the ranks: their .exit files hold our signal, not their fate
  int64_t manifest_now_ns = 0;
  if (auto manifest = ReadFile(dir + "/run.json"); manifest.ok()) {
    nlohmann::json j = nlohmann::json::parse(*manifest, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument(dir + "/run.json: not valid JSON");
    if (!j.contains("world_size") || !j["world_size"].is_number_integer() || j["world_size"].get<int64_t>() < 0 ||
        j["world_size"].get<int64_t>() > kMaxRanks)
      return InvalidArgument(dir + "/run.json: field 'world_size' must be an integer from 0 to " + std::to_string(kMaxRanks));
    job.world_size = j.value("world_size", 0);
    stopped_by_us = j.contains("stopped_by_dsdoctor") && j["stopped_by_dsdoctor"].is_object();
    if (j.contains("now_ns") && j["now_ns"].is_number_integer()) manifest_now_ns = j["now_ns"].get<int64_t>();
    if (j.contains("ranks") && j["ranks"].is_array()) {
      for (const auto& r : j["ranks"]) {
        auto rs = diagnosis::RankStateFromJson(r);
        if (!rs.ok()) return InvalidArgument(dir + "/run.json: " + rs.status().message());
        from_manifest[rs->rank] = *rs;
      }
    }
  }
  if (files.empty() && from_manifest.empty()) return NotFound("analyze: '" + dir + "' holds no rank-<r>.log/.trace files and no run.json");
  int max_rank = -1;
  for (auto& [r, f] : files) max_rank = std::max(max_rank, r);
  for (auto& [r, s] : from_manifest) max_rank = std::max(max_rank, r);
  job.world_size = std::max(job.world_size, max_rank + 1);
  job.ranks.resize(job.world_size);
  int64_t latest_ns = 0;
  for (int r = 0; r < job.world_size; ++r) {
    diagnosis::RankState& rs = job.ranks[r];
    if (from_manifest.count(r)) rs = from_manifest[r];
    rs.rank = r;
    auto& f = files[r];
    if (f.count("trace")) {
      auto t = runtime::ReadTrace(f["trace"]);
      if (t.ok()) {
        ApplyTrace(*t, &rs, t->records.size());  // all of it: old mismatches count post-mortem
        if (rs.node.empty()) rs.node = t->hostname;
        latest_ns = std::max({latest_ns, t->heartbeat_ns, rs.last ? std::max(rs.last->started_ns, rs.last->ended_ns) : int64_t{0}});
      } else if (warnings) {
        warnings->push_back(t.status().message());
      }
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
        if (code > 128) rs.signal = code - 128;  // the shell's 128 + signal
        else rs.exit_code = code;
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
      auto log = ReadFile(f["log"], 256u << 20);
      if (log.ok()) {
        for (auto& e : ClassifyLog(r, *log)) job.events.push_back(std::move(e));
      } else if (warnings) {
        warnings->push_back(log.status().message());
      }
    } else if (warnings) {
      warnings->push_back(dir + "/rank-" + std::to_string(r) + ".log: missing");
    }
  }
  job.job_ended = std::all_of(job.ranks.begin(), job.ranks.end(), [](auto& r) { return r.status == diagnosis::RankStatus::kExited; });
  job.now_ns = stopped_by_us && manifest_now_ns ? manifest_now_ns : latest_ns;
  for (auto& r : job.ranks) {
    if (!(stopped_by_us && manifest_now_ns)) job.now_ns = std::max(job.now_ns, r.exit_ns);
    if (r.status == diagnosis::RankStatus::kExited && !r.exit_ns) r.exit_ns = r.heartbeat_ns;
  }
  return job;
}

}  // namespace dsd::collectors
