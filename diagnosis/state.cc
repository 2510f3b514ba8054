#include "diagnosis/state.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include "common/strings.h"

namespace dsd::diagnosis {

bool OpRecord::rooted() const {
  return op == "broadcast" || op == "reduce" || op == "gather" || op == "scatter" || op == "broadcast_object_list" ||
         op == "gather_object" || op == "scatter_object_list" || op == "gather_v" || op == "scatter_v";
}

std::string OpRecord::Describe() const {
  std::string s = op + "#" + std::to_string(seq);
  if (op == "recv" && peer < 0)
    s += " from any rank";
  else if (!collective() || (rooted() && peer >= 0))  // a root not recorded (Flight Recorder): not shown
    s += (op == "send" ? " to " : op == "recv" ? " from " : " root ") + std::to_string(peer);
  if (!dtype.empty()) s += " " + dtype + " x" + std::to_string(count);
  if (bytes) s += " (" + FormatBytes(static_cast<double>(bytes)) + ")";
  if (!reduce.empty()) s += " " + reduce;
  if (!callsite.empty()) s += " @" + callsite;
  return s;
}

const char* RankStatusName(RankStatus s) {
  switch (s) {
    case RankStatus::kNotStarted:
      return "not_started";
    case RankStatus::kRunning:
      return "running";
    case RankStatus::kExited:
      return "exited";
  }
  return "?";
}

bool IsTorchCollective(std::string_view f) {
  static const char* kNames[] = {"barrier",
                                 "all_reduce",
                                 "broadcast",
                                 "all_gather",
                                 "all_gather_into_tensor",
                                 "reduce",
                                 "reduce_scatter",
                                 "reduce_scatter_tensor",
                                 "all_to_all",
                                 "all_to_all_single",
                                 "gather",
                                 "scatter",
                                 "send",
                                 "recv",
                                 "monitored_barrier",
                                 "all_gather_object",
                                 "broadcast_object_list"};
  for (const char* n : kNames)
    if (f == n) return true;
  return false;
}

namespace {
// "_exception_logger.<locals>.wrapper (c10d_logger.py:83)": a decorator's frame, not the program's.
bool IsDecoratorFrame(const std::string& frame) {
  size_t paren = frame.find(" (");
  std::string func = frame.substr(0, paren);
  if (size_t dot = func.rfind('.'); dot != std::string::npos) func = func.substr(dot + 1);
  if (paren != std::string::npos && frame.find("(c10d_logger.py:", paren) != std::string::npos) return true;
  for (const char* w : {"wrapper", "wrapped", "wrapped_fn", "log_wrapper", "inner", "decorate_context", "_fn"})
    if (func == w) return true;
  return false;
}
}  // namespace

bool StackCollective(const std::string& stack, std::string* collective, std::string* location) {
  std::vector<std::string> frames;
  for (size_t pos = 0; pos <= stack.size();) {
    size_t next = stack.find(" < ", pos);
    frames.push_back(stack.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + 3;
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    const std::string& f = frames[i];
    size_t paren = f.find(" (");
    if (paren == std::string::npos || f.find("distributed_c10d.py", paren) == std::string::npos) continue;
    std::string func = f.substr(0, paren);
    if (!IsTorchCollective(func)) continue;
    *collective = func;
    location->clear();
    // The caller, past decorators' frames between it and the collective (torch >= 2.1 wraps every
    // collective in c10d_logger's `_exception_logger.<locals>.wrapper`).
    size_t c = i + 1;
    while (c < frames.size() && IsDecoratorFrame(frames[c])) ++c;
    if (c < frames.size()) {
      const std::string& caller = frames[c];
      size_t open = caller.find(" (");
      if (open != std::string::npos && caller.back() == ')')
        *location = caller.substr(open + 2, caller.size() - open - 3);
    }
    return true;
  }
  return false;
}

bool StackInDdpBackward(const std::string& stack, std::string* location) {
  // py-spy: "backward (__init__.py:197) < Tensor.backward (_tensor.py:488) < main (train.py:88)";
  // native: "c10d::Reducer::finalize_backward < torch::autograd::Engine::…".
  if (stack.find("c10d::Reducer::finalize_backward") != std::string::npos) {
    location->clear();
    return true;
  }
  size_t at = stack.find("Tensor.backward (_tensor.py");
  if (at == std::string::npos || stack.find("backward (__init__.py") == std::string::npos) {
    // DDP's forward makes C++ collectives too: the bucket rebuild after the first iteration, the
    // buffer broadcast.
    at = stack.find("DistributedDataParallel.forward (distributed.py");
    if (at == std::string::npos) at = stack.find("DistributedDataParallel._pre_forward (distributed.py");
    if (at == std::string::npos) return false;
  }
  location->clear();
  size_t next = stack.find(" < ", at);
  if (next != std::string::npos) {
    std::string caller = stack.substr(next + 3, stack.find(" < ", next + 3) == std::string::npos
                                                    ? std::string::npos
                                                    : stack.find(" < ", next + 3) - next - 3);
    size_t open = caller.find(" (");
    if (open != std::string::npos && caller.back() == ')')
      *location = caller.substr(open + 2, caller.size() - open - 3);
  }
  return true;
}

std::string FormatRanks(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

namespace {

// One value of type T, strictly: an integer field takes only an integer that fits (a float or an
// out-of-range number would be converted by a cast, undefined for a float out of range); false
// when it does not fit or has another type.
template <typename T>
bool GetStrict(const nlohmann::json& v, T* out) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
      *out = static_cast<T>(u);
      return true;
    }
    if (v.is_number_integer()) {
      const auto i = v.get<int64_t>();
      if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          (i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
        return false;
      *out = static_cast<T>(i);
      return true;
    }
    return false;
  } else {
    try {
      *out = v.get<T>();
      return true;
    } catch (const nlohmann::json::exception&) {
      return false;
    }
  }
}

// Reads optional fields with their types checked; the first error names the field.
class Fields {
 public:
  Fields(const nlohmann::json& j, std::string what) : j_(j), what_(std::move(what)) {}
  template <typename T>
  void Get(const char* key, T* out) {
    if (!status_.ok()) return;
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return;
    if (!GetStrict(*it, out)) status_ = InvalidArgument(what_ + ": field '" + key + "' has the wrong type");
  }
  const Status& status() const { return status_; }

 private:
  const nlohmann::json& j_;
  std::string what_;
  Status status_ = Status::Ok();
};

}  // namespace

nlohmann::json ToJson(const OpRecord& r) {
  nlohmann::json j = {{"op", r.op},
                      {"seq", r.seq},
                      {"comm", r.comm},
                      {"dtype", r.dtype},
                      {"reduce", r.reduce},
                      {"count", r.count},
                      {"bytes", r.bytes},
                      {"peer", r.peer},
                      {"callsite", r.callsite},
                      {"state", r.state},
                      {"started_ns", r.started_ns},
                      {"ended_ns", r.ended_ns}};
  if (r.async) j["async"] = true;
  return j;
}

nlohmann::json ToCompactJson(const OpRecord& r) {
  return nlohmann::json::array({r.op, r.seq, r.comm, r.dtype, r.reduce, r.count, r.bytes, r.peer, r.callsite, r.state,
                                r.started_ns, r.ended_ns, r.async ? 1 : 0});
}

namespace {

// The positional form of ToCompactJson; every element typed, none missing.
Result<OpRecord> OpRecordFromArray(const nlohmann::json& j) {
  if (j.size() != 13) return InvalidArgument("op record: " + std::to_string(j.size()) + " elements, not 13");
  OpRecord r;
  int async = 0;
  const char* names[] = {"op",   "seq",      "comm",  "dtype",      "reduce",   "count", "bytes",
                         "peer", "callsite", "state", "started_ns", "ended_ns", "async"};
  size_t at = 0;
  const bool ok = GetStrict(j[at], &r.op) && ++at && GetStrict(j[at], &r.seq) && ++at && GetStrict(j[at], &r.comm) &&
                  ++at && GetStrict(j[at], &r.dtype) && ++at && GetStrict(j[at], &r.reduce) && ++at &&
                  GetStrict(j[at], &r.count) && ++at && GetStrict(j[at], &r.bytes) && ++at &&
                  GetStrict(j[at], &r.peer) && ++at && GetStrict(j[at], &r.callsite) && ++at &&
                  GetStrict(j[at], &r.state) && ++at && GetStrict(j[at], &r.started_ns) && ++at &&
                  GetStrict(j[at], &r.ended_ns) && ++at && GetStrict(j[at], &async);
  if (!ok) return InvalidArgument(std::string("op record: element '") + names[at] + "' has the wrong type");
  r.async = async != 0;
  if (r.op.empty()) return InvalidArgument("op record: field 'op' is empty");
  return r;
}

}  // namespace

Result<OpRecord> OpRecordFromJson(const nlohmann::json& j) {
  if (j.is_array()) return OpRecordFromArray(j);
  if (!j.is_object()) return InvalidArgument("op record: not a JSON object or array");
  OpRecord r;
  Fields f(j, "op record");
  f.Get("op", &r.op);
  f.Get("seq", &r.seq);
  f.Get("comm", &r.comm);
  f.Get("dtype", &r.dtype);
  f.Get("reduce", &r.reduce);
  f.Get("count", &r.count);
  f.Get("bytes", &r.bytes);
  f.Get("peer", &r.peer);
  f.Get("callsite", &r.callsite);
  f.Get("state", &r.state);
  f.Get("started_ns", &r.started_ns);
  f.Get("ended_ns", &r.ended_ns);
  f.Get("async", &r.async);
  DSD_RETURN_IF_ERROR(f.status());
  if (r.op.empty()) return InvalidArgument("op record: field 'op' is missing");
  return r;
}

nlohmann::json ToJson(const LogEvent& e) {
  nlohmann::json j = {{"rank", e.rank}, {"code", e.code},       {"severity", SeverityName(e.severity)},
                      {"kind", e.kind}, {"summary", e.summary}, {"text", e.text},
                      {"line", e.line}, {"remedy", e.remedy}};
  if (e.subject_rank >= 0) j["subject_rank"] = e.subject_rank;
  if (!e.collective.empty()) j["collective"] = e.collective;
  if (!e.location.empty()) j["location"] = e.location;
  if (e.exit_code) j["exit_code"] = e.exit_code;
  if (e.signal) j["signal"] = e.signal;
  if (!e.file.empty()) j["file"] = e.file;
  if (!e.host.empty()) j["host"] = e.host;
  if (e.pid) j["pid"] = e.pid;
  if (e.offset >= 0) j["offset"] = e.offset;
  if (e.time_ns) j["time_ns"] = e.time_ns;
  if (e.consequence) j["consequence"] = true;
  if (!e.fields.empty()) j["fields"] = e.fields;
  return j;
}

std::vector<int> LogEvent::RankList(const char* name) const {
  std::vector<int> ranks;
  for (const std::string& part : Split(Field(name), ','))
    if (std::string_view t = Trim(part); !t.empty()) ranks.push_back(SafeInt(t));
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::string LogEvent::Where() const {
  if (!file.empty()) return file + ":" + std::to_string(line);
  return (rank >= 0 ? "rank " + std::to_string(rank) + " " : std::string()) + "log line " + std::to_string(line);
}

Result<LogEvent> LogEventFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("log event: not a JSON object");
  LogEvent e;
  std::string severity = "error";
  Fields f(j, "log event");
  f.Get("rank", &e.rank);
  f.Get("subject_rank", &e.subject_rank);
  f.Get("code", &e.code);
  f.Get("severity", &severity);
  f.Get("kind", &e.kind);
  f.Get("summary", &e.summary);
  f.Get("text", &e.text);
  f.Get("line", &e.line);
  f.Get("remedy", &e.remedy);
  f.Get("collective", &e.collective);
  f.Get("location", &e.location);
  f.Get("exit_code", &e.exit_code);
  f.Get("signal", &e.signal);
  f.Get("file", &e.file);
  f.Get("host", &e.host);
  f.Get("pid", &e.pid);
  f.Get("offset", &e.offset);
  f.Get("time_ns", &e.time_ns);
  f.Get("consequence", &e.consequence);
  DSD_RETURN_IF_ERROR(f.status());
  if (j.contains("fields")) {
    if (!j["fields"].is_object()) return InvalidArgument("log event: field 'fields' must be an object of strings");
    for (auto& [k, v] : j["fields"].items()) {
      if (!v.is_string()) return InvalidArgument("log event: field 'fields." + k + "' must be a string");
      e.fields[k] = v.get<std::string>();
    }
  }
  DSD_ASSIGN_OR_RETURN(e.severity, ParseSeverity(severity));
  if (!IsKnownCode(e.code)) return InvalidArgument("log event: unknown code '" + e.code + "'");
  return e;
}

nlohmann::json ToJson(const ProcSample& p) {
  return {{"state", std::string(1, p.state)},
          {"wchan", p.wchan},
          {"cpu_fraction", p.cpu_fraction},
          {"flat_for_s", p.flat_for_s},
          {"tree_cpu_s", p.tree_cpu_s}};
}

nlohmann::json ToJson(const RankState& r, bool with_recent) {
  nlohmann::json j = {{"rank", r.rank},
                      {"node", r.node},
                      {"local_rank", r.local_rank},
                      {"pid", r.pid},
                      {"status", RankStatusName(r.status)},
                      {"has_trace", r.has_trace},
                      {"step", r.step},
                      {"phase", r.phase},
                      {"phase_ns", r.phase_ns},
                      {"heartbeat_ns", r.heartbeat_ns},
                      {"watchdog_fired", r.watchdog_fired},
                      {"finished", r.finished}};
  if (r.status == RankStatus::kExited) {
    j["exit_code"] = r.exit_code;
    j["signal"] = r.signal;
    j["exit_ns"] = r.exit_ns;
  }
  if (r.in_flight) j["in_flight"] = ToJson(*r.in_flight);
  if (r.last) j["last"] = ToJson(*r.last);
  if (with_recent) {
    nlohmann::json recent = nlohmann::json::array();
    for (const auto& rec : r.recent) recent.push_back(ToJson(rec));
    j["recent"] = std::move(recent);
  }
  if (!r.last_error.empty()) j["last_error"] = r.last_error;
  if (r.proc.valid) j["proc"] = ToJson(r.proc);
  if (!r.stack.empty()) j["stack"] = r.stack;
  if (r.last_output_ns) j["last_output_ns"] = r.last_output_ns;
  if (r.sample_ns) j["sample_ns"] = r.sample_ns;
  if (r.unobserved) j["unobserved"] = true;
  return j;
}

Status PatchRankState(const nlohmann::json& j, RankState* into) {
  if (!j.is_object()) return InvalidArgument("rank: not a JSON object");
  RankState& r = *into;
  std::string status;
  Fields f(j, "rank");
  f.Get("rank", &r.rank);
  f.Get("node", &r.node);
  f.Get("local_rank", &r.local_rank);
  f.Get("pid", &r.pid);
  f.Get("status", &status);
  f.Get("has_trace", &r.has_trace);
  f.Get("step", &r.step);
  f.Get("phase", &r.phase);
  f.Get("phase_ns", &r.phase_ns);
  f.Get("heartbeat_ns", &r.heartbeat_ns);
  f.Get("watchdog_fired", &r.watchdog_fired);
  f.Get("finished", &r.finished);
  f.Get("exit_code", &r.exit_code);
  f.Get("signal", &r.signal);
  f.Get("exit_ns", &r.exit_ns);
  f.Get("last_error", &r.last_error);
  f.Get("stack", &r.stack);
  f.Get("last_output_ns", &r.last_output_ns);
  f.Get("sample_ns", &r.sample_ns);
  f.Get("unobserved", &r.unobserved);
  DSD_RETURN_IF_ERROR(f.status());
  if (status == "running")
    r.status = RankStatus::kRunning;
  else if (status == "exited")
    r.status = RankStatus::kExited;
  else if (status == "not_started")
    r.status = RankStatus::kNotStarted;
  else if (const auto given = j.find("status"); given != j.end() && !given->is_null())
    return InvalidArgument("rank " + std::to_string(r.rank) + ": status '" + status +
                           "' is not running|exited|not_started");
  if (auto it = j.find("in_flight"); it != j.end()) {
    DSD_ASSIGN_OR_RETURN(auto rec, OpRecordFromJson(*it));
    r.in_flight = std::move(rec);
  }
  if (auto it = j.find("last"); it != j.end()) {
    DSD_ASSIGN_OR_RETURN(auto rec, OpRecordFromJson(*it));
    r.last = std::move(rec);
  }
  if (auto it = j.find("proc"); it != j.end() && it->is_object()) {
    Fields p(*it, "rank " + std::to_string(r.rank) + " proc");
    ProcSample proc;
    proc.valid = true;
    std::string st = "?";
    p.Get("state", &st);
    proc.state = st.empty() ? '?' : st[0];
    p.Get("wchan", &proc.wchan);
    p.Get("cpu_fraction", &proc.cpu_fraction);
    p.Get("flat_for_s", &proc.flat_for_s);
    p.Get("tree_cpu_s", &proc.tree_cpu_s);
    DSD_RETURN_IF_ERROR(p.status());
    r.proc = std::move(proc);
  }
  return Status::Ok();
}

void ClearRankStateField(std::string_view key, RankState* r) {
  static const RankState kDefault;
  if (key == "exit_code") r->exit_code = kDefault.exit_code;
  if (key == "signal") r->signal = kDefault.signal;
  if (key == "exit_ns") r->exit_ns = kDefault.exit_ns;
  if (key == "in_flight") r->in_flight.reset();
  if (key == "last") r->last.reset();
  if (key == "last_error") r->last_error.clear();
  if (key == "proc") r->proc = kDefault.proc;
  if (key == "stack") r->stack.clear();
  if (key == "last_output_ns") r->last_output_ns = 0;
  if (key == "sample_ns") r->sample_ns = 0;
  if (key == "unobserved") r->unobserved = false;
  // The fields ToJson always writes have no absent form: a delta never unsets them.
}

Result<RankState> RankStateFromJson(const nlohmann::json& j) {
  RankState r;
  DSD_RETURN_IF_ERROR(PatchRankState(j, &r));
  if (auto it = j.find("recent"); it != j.end()) {
    if (!it->is_array()) return InvalidArgument("rank: field 'recent' must be an array");
    for (const auto& e : *it) {
      DSD_ASSIGN_OR_RETURN(auto rec, OpRecordFromJson(e));
      r.recent.push_back(std::move(rec));
    }
  }
  return r;
}

nlohmann::json ToJson(const RankClass& c) {
  return {{"description", c.description}, {"ranks", c.ranks}, {"count", c.ranks.size()}};
}

nlohmann::json ToJson(const LogDirStatus& s) {
  return {{"node", s.node},
          {"path", s.path},
          {"mount", s.mount},
          {"fs_type", s.fs_type},
          {"free_bytes", s.free_bytes},
          {"total_bytes", s.total_bytes},
          {"write_errors", s.write_errors},
          {"output", [&] {
             auto a = nlohmann::json::array();
             for (const auto& o : s.output) a.push_back({o.rank, o.held_bytes, o.lost_bytes});
             return a;
           }()}};
}

Result<LogDirStatus> LogDirStatusFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("log_dir: not a JSON object");
  LogDirStatus s;
  Fields f(j, "log_dir");
  f.Get("node", &s.node);
  f.Get("path", &s.path);
  f.Get("mount", &s.mount);
  f.Get("fs_type", &s.fs_type);
  f.Get("free_bytes", &s.free_bytes);
  f.Get("total_bytes", &s.total_bytes);
  f.Get("write_errors", &s.write_errors);
  if (!f.status().ok()) return f.status();
  if (auto o = j.find("output"); o != j.end()) {  // [[rank, held, lost], ...]
    if (!o->is_array() || o->size() > (1u << 20)) return InvalidArgument("log_dir: field 'output' must be an array");
    for (const auto& e : *o) {
      if (!e.is_array() || e.size() != 3 || !e[0].is_number_integer() || !e[1].is_number_unsigned() ||
          !e[2].is_number_unsigned())
        return InvalidArgument("log_dir: an 'output' entry must be [rank, held bytes, lost bytes]");
      s.output.push_back({e[0].get<int>(), e[1].get<uint64_t>(), e[2].get<uint64_t>()});
    }
  }
  return s;
}

}  // namespace dsd::diagnosis
