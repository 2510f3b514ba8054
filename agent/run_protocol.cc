#include "agent/run_protocol.h"

#include <limits>

#include "agent/json_fields.h"
#include "common/framing.h"
#include "common/json_text.h"
#include "common/strings.h"

namespace dsd::agent {

using fields::Fields;
using fields::kMaxName;
using fields::kMaxValue;
using nlohmann::json;

namespace {

constexpr int64_t kMaxRank = (1 << 20) - 1;
constexpr int64_t kMaxId = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinId = std::numeric_limits<int64_t>::min();
// Flight Recorder incidents of one run (the coordinator asks for a few at most).
constexpr int64_t kMaxIncident = 1 << 20;

// A field the checks above have passed (or its default when absent).
template <typename T>
T Get(const json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

// The files a node sends whole; a rank's log streams (sample entries and "log" messages) instead.
Result<RankFile> RankFileFromName(std::string_view name) {
  for (RankFile kind : {RankFile::kTrace, RankFile::kExit, RankFile::kStack, RankFile::kFlightRecorder})
    if (name == RankFileExtension(kind)) return kind;
  return InvalidArgument("file: field 'kind' must be one of trace, exit, stack, flight_recorder");
}

Result<std::string> Base64Field(const json& j, const char* key, const char* what) {
  std::string raw;
  if (!Base64Decode(j.at(key).get_ref<const std::string&>(), &raw))
    return InvalidArgument(std::string(what) + ": field '" + key + "' is not base64");
  return raw;
}

}  // namespace

// ---- coordinator → agent ------------------------------------------------------------------------

json WriteRunRequest(const RunRequest& r) {
  json ranks = json::array();
  for (const auto& l : r.ranks) ranks.push_back({{"rank", l.rank}, {"local_rank", l.local_rank}, {"env", l.env}});
  return {{"type", "run"},
          {"argv", r.argv},
          {"env", r.env},
          {"cwd", r.cwd},
          {"run_dir", r.run_dir},
          {"run_id", r.run_id},
          {"sample_ms", r.sample_ms},
          {"trace_python", r.trace_python},
          {"python", r.python},
          {"share_group", r.share_group},
          {"stop_escalation_ms", r.stop_escalation_ms},
          {"reattach_window_ms", r.reattach_window_ms},
          {"rank_exec_socket", r.rank_exec_socket},
          {"ranks", std::move(ranks)}};
}

Result<RunRequest> ReadRunRequest(const json& j) {
  DSD_ASSIGN_OR_RETURN(const std::string type, fields::TypeOf(j, "request"));
  if (type != "run") return InvalidArgument("request: type '" + type + "' is not a run request");
  Fields f(j, "run");
  f.StringList("argv", 100000, kMaxValue, true, /*non_empty=*/true)
      .StringMap("env", 1000000)
      .String("cwd", kMaxName)
      .String("run_dir", kMaxName, true)
      .String("run_id", 256)
      .Int("sample_ms", 1, 60000)
      .Bool("trace_python")
      .Bool("python")
      .Bool("share_group")
      .Int("stop_escalation_ms", 0, 3600 * 1000)
      .Int("reattach_window_ms", 0, 7 * 24 * 3600 * 1000)
      .String("rank_exec_socket", 100)
      .Objects("ranks", 65536, true, [](Fields& r) {
        r.Int("rank", 0, kMaxRank, true).Int("local_rank", 0, 65535).StringMap("env", 100000);
      });
  DSD_RETURN_IF_ERROR(f.status());
  RunRequest r;
  r.argv = j.at("argv").get<std::vector<std::string>>();
  r.env = Get(j, "env", std::map<std::string, std::string>{});
  r.cwd = Get(j, "cwd", std::string());
  r.run_dir = j.at("run_dir").get<std::string>();
  if (r.run_dir.empty()) return InvalidArgument("run: field 'run_dir' is empty");
  r.run_id = Get(j, "run_id", std::string());
  r.sample_ms = Get(j, "sample_ms", 200);
  r.trace_python = Get(j, "trace_python", true);
  r.python = Get(j, "python", false);
  r.share_group = Get(j, "share_group", false);
  r.stop_escalation_ms = Get(j, "stop_escalation_ms", kDefaultStopEscalationMs);
  r.reattach_window_ms = Get(j, "reattach_window_ms", kDefaultReattachWindowMs);
  r.rank_exec_socket = Get(j, "rank_exec_socket", std::string());
  for (const auto& rank : j.at("ranks"))
    r.ranks.push_back({rank.at("rank").get<int>(), Get(rank, "local_rank", 0),
                       Get(rank, "env", std::map<std::string, std::string>{})});
  return r;
}

json WriteReattachRequest(const ReattachRequest& r) {
  json have = json::array();
  for (const auto& [rank, bytes] : r.have) have.push_back({{"rank", rank}, {"bytes", bytes}});
  return {{"type", "reattach"}, {"run_id", r.run_id}, {"have", std::move(have)}};
}

Result<ReattachRequest> ReadReattachRequest(const json& j) {
  DSD_ASSIGN_OR_RETURN(const std::string type, fields::TypeOf(j, "request"));
  if (type != "reattach") return InvalidArgument("request: type '" + type + "' is not a reattach request");
  Fields f(j, "reattach");
  f.String("run_id", 256, true).Objects("have", 65536, false, [](Fields& r) {
    r.Int("rank", 0, kMaxRank, true).Int("bytes", 0, std::numeric_limits<int64_t>::max(), true);
  });
  DSD_RETURN_IF_ERROR(f.status());
  ReattachRequest r;
  r.run_id = j.at("run_id").get<std::string>();
  if (r.run_id.empty()) return InvalidArgument("reattach: field 'run_id' is empty");
  if (auto have = j.find("have"); have != j.end())
    for (const auto& h : *have) r.have[h.at("rank").get<int>()] = h.at("bytes").get<uint64_t>();
  return r;
}

json WriteRunControl(const RunControl& message) {
  return std::visit(
      [](const auto& m) -> json {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, StopMessage>)
          return {{"type", "stop"}, {"signal", m.signal}};
        else if constexpr (std::is_same_v<T, StacksRequest>) {
          json j = {{"type", "stacks"}, {"id", m.id}, {"ranks", m.ranks}};
          if (m.flight_recorder_incident) j["flight_recorder_incident"] = m.flight_recorder_incident;
          return j;
        } else
          return {{"type", "resync"}, {"ranks", m.ranks}};
      },
      message);
}

Result<RunControl> ReadRunControl(const json& j) {
  DSD_ASSIGN_OR_RETURN(const std::string type, fields::TypeOf(j, "message"));
  Fields f(j, type);
  if (type == "stop") {
    DSD_RETURN_IF_ERROR(f.Int("signal", 1, 64).status());
    return RunControl{StopMessage{Get(j, "signal", 15)}};
  }
  if (type == "stacks") {
    DSD_RETURN_IF_ERROR(f.Int("id", kMinId, kMaxId)
                            .IntList("ranks", 1 << 20, 0, kMaxRank)
                            .Int("flight_recorder_incident", 0, kMaxIncident)
                            .status());
    return RunControl{StacksRequest{Get<int64_t>(j, "id", 0), Get(j, "ranks", std::vector<int>{}),
                                    Get(j, "flight_recorder_incident", 0)}};
  }
  if (type == "resync") {
    DSD_RETURN_IF_ERROR(f.IntList("ranks", 1 << 20, 0, kMaxRank).status());
    return RunControl{ResyncMessage{Get(j, "ranks", std::vector<int>{})}};
  }
  return Unimplemented("unknown run stream message '" + type + "'");
}

// ---- agent → coordinator ------------------------------------------------------------------------

json WriteAgentRunMessage(const AgentRunMessage& message) {
  return std::visit(
      [](const auto& m) -> json {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, StartedMessage>) {
          json ranks = json::array();
          for (const auto& r : m.ranks) ranks.push_back({{"rank", r.rank}, {"pid", r.pid}});
          return {{"type", "started"}, {"node", m.node}, {"ranks", ranks}, {"shared_run_dir", m.shared_run_dir}};
        } else if constexpr (std::is_same_v<T, LogMessage>) {
          return {{"type", "log"}, {"rank", m.rank}, {"log", Base64Encode(m.bytes)}};
        } else if constexpr (std::is_same_v<T, FileMessage>) {
          json j = {{"type", "file"},
                    {"rank", m.rank},
                    {"kind", RankFileExtension(m.kind)},
                    {"offset", m.offset},
                    {"bytes", Base64Encode(m.bytes)}};
          if (m.end) j["end"] = true, j["size"] = m.size;
          if (m.kind == RankFile::kFlightRecorder) j["incident"] = m.incident;
          return j;
        } else if constexpr (std::is_same_v<T, StacksReply>) {
          json stacks = json::array();
          for (const auto& s : m.stacks) {
            if (!s.error.empty())
              stacks.push_back({{"rank", s.rank}, {"error", s.error}});
            else
              stacks.push_back({{"rank", s.rank}, {"tool", s.tool}, {"signature", s.signature}});
          }
          return {{"type", "stacks"}, {"id", m.id}, {"stacks", stacks}};
        } else if constexpr (std::is_same_v<T, HeartbeatMessage>) {
          return {{"type", "heartbeat"}, {"now_ns", m.now_ns}};
        } else if constexpr (std::is_same_v<T, DoneMessage>) {
          return {{"type", "done"}};
        } else {
          return {{"type", "error"}, {"code", m.code}, {"message", m.message}};
        }
      },
      message);
}

Result<AgentRunMessage> ReadAgentRunMessage(const json& j) {
  DSD_ASSIGN_OR_RETURN(const std::string type, fields::TypeOf(j, "message"));
  Fields f(j, type);
  if (type == "started") {
    f.String("node", kMaxName, true).Bool("shared_run_dir").Objects("ranks", 65536, true, [](Fields& r) {
      r.Int("rank", 0, kMaxRank, true).Int("pid", 0, std::numeric_limits<int>::max(), true);
    });
    DSD_RETURN_IF_ERROR(f.status());
    StartedMessage m{j.at("node").get<std::string>(), {}, Get(j, "shared_run_dir", false)};
    for (const auto& r : j.at("ranks")) m.ranks.push_back({r.at("rank").get<int>(), r.at("pid").get<int>()});
    return AgentRunMessage{std::move(m)};
  }
  if (type == "log") {
    DSD_RETURN_IF_ERROR(f.Int("rank", 0, kMaxRank, true).String("log", kMaxValue, true).status());
    DSD_ASSIGN_OR_RETURN(std::string raw, Base64Field(j, "log", "log"));
    return AgentRunMessage{LogMessage{j.at("rank").get<int>(), std::move(raw)}};
  }
  if (type == "file") {
    f.Int("rank", 0, kMaxRank, true)
        .String("kind", 16, true)
        .Int("offset", 0, static_cast<int64_t>(kMaxFileBytes), true)
        .String("bytes", kMaxValue, true)
        .Bool("end")
        .Int("size", 0, static_cast<int64_t>(kMaxFileBytes))
        .Int("incident", 0, kMaxIncident);
    DSD_RETURN_IF_ERROR(f.status());
    DSD_ASSIGN_OR_RETURN(RankFile kind, RankFileFromName(j.at("kind").get<std::string>()));
    if (kind == RankFile::kFlightRecorder && Get(j, "incident", 0) < 1)
      return InvalidArgument("file: field 'incident' is missing (a flight_recorder file)");
    DSD_ASSIGN_OR_RETURN(std::string raw, Base64Field(j, "bytes", "file"));
    FileMessage m{j.at("rank").get<int>(),        kind,
                  j.at("offset").get<uint64_t>(), std::move(raw),
                  Get(j, "end", false),           Get<uint64_t>(j, "size", 0)};
    if (m.end && !j.contains("size")) return InvalidArgument("file: field 'size' is missing");
    if (m.end && m.size < m.offset + m.bytes.size())
      return InvalidArgument("file: field 'size' is below the end of its last piece");
    if (m.offset + m.bytes.size() > kMaxFileBytes)
      return InvalidArgument("file: a piece past " + std::to_string(kMaxFileBytes) + " bytes");
    m.incident = Get(j, "incident", 0);
    return AgentRunMessage{std::move(m)};
  }
  if (type == "stacks") {
    f.Int("id", kMinId, kMaxId).Objects("stacks", 1 << 20, true, [](Fields& s) {
      s.Int("rank", 0, kMaxRank, true).String("tool", 64).String("signature", kMaxValue).String("error", kMaxValue);
    });
    DSD_RETURN_IF_ERROR(f.status());
    StacksReply m{Get<int64_t>(j, "id", 0), {}};
    for (const auto& s : j.at("stacks"))
      m.stacks.push_back({s.at("rank").get<int>(), Get(s, "tool", std::string()), Get(s, "signature", std::string()),
                          Get(s, "error", std::string())});
    return AgentRunMessage{std::move(m)};
  }
  if (type == "heartbeat") {
    DSD_RETURN_IF_ERROR(f.Int("now_ns", 0, std::numeric_limits<int64_t>::max()).status());
    return AgentRunMessage{HeartbeatMessage{Get<int64_t>(j, "now_ns", 0)}};
  }
  if (type == "done") return AgentRunMessage{DoneMessage{}};
  if (type == "error") {
    DSD_RETURN_IF_ERROR(f.String("code", kMaxName).String("message", kMaxValue).status());
    return AgentRunMessage{ErrorMessage{Get(j, "code", std::string()), Get(j, "message", std::string())}};
  }
  return Unimplemented("unknown run stream message '" + type + "'");
}

std::vector<FileMessage> FileMessages(int rank, RankFile kind, std::string_view content, int incident) {
  size_t used = content.size();
  while (used > 0 && content[used - 1] == '\0') --used;
  std::vector<FileMessage> out;
  size_t at = 0;
  do {
    const size_t n = std::min(kFilePieceBytes, used - at);
    out.push_back({rank, kind, at, std::string(content.substr(at, n)), false, 0, incident});
    at += n;
  } while (at < used);
  out.back().end = true;
  out.back().size = content.size();
  return out;
}

// ---- the sample frame ---------------------------------------------------------------------------

void SampleFrameWriter::Begin(int64_t now_ns) {
  text_.assign("{\"type\":\"sample\",\"now_ns\":");
  jsontext::AppendInt(&text_, now_ns);
  text_.append(",\"ranks\":[");
  ranks_ = 0;
  log_dir_.clear();
}

void SampleFrameWriter::AppendLog(std::string_view fresh_output) {
  if (fresh_output.empty()) return;
  text_.pop_back();  // the entry's closing brace: "log" is one more of its fields
  text_.append(",\"log\":\"");
  text_.append(Base64Encode(fresh_output));  // base64 needs no escaping
  text_.append("\"}");
}

void SampleFrameWriter::SetLogDir(const diagnosis::LogDirStatus& status) {
  log_dir_.clear();
  jsontext::AppendJson(&log_dir_, diagnosis::ToJson(status));
}

const std::string& SampleFrameWriter::Finish() {
  text_.push_back(']');
  if (!log_dir_.empty()) {
    text_.append(",\"log_dir\":");
    text_.append(log_dir_);
  }
  text_.push_back('}');
  return text_;
}

bool DecodeLog(std::string_view wire_text, std::string* raw) { return Base64Decode(wire_text, raw); }

bool EntryLog(std::string_view entry, std::string* wire_log) {
  jsontext::Reader in(entry);
  if (in.Consume('{') && !in.Consume('}')) {
    bool ok = true;
    do {
      std::string_view key;
      if (!in.PlainString(&key) || !in.Consume(':')) {
        ok = false;
        break;
      }
      if (key == "log") return in.String(wire_log);  // base64: plain, never escaped
      if (!in.Skip(nullptr, static_cast<int>(wire::kMaxJsonDepth) - 3)) {
        ok = false;
        break;
      }
    } while (in.Consume(','));
    if (ok) return true;  // no "log": nothing to add
  }
  // Text of another shape: the full parser decides.
  auto parsed = wire::ParseJsonBounded(entry);
  if (!parsed.ok() || !parsed->is_object()) return false;
  const auto log = parsed->find("log");
  if (log == parsed->end()) return true;
  if (!log->is_string()) return false;
  wire_log->append(log->get_ref<const std::string&>());
  return true;
}

bool ScanSampleFrame(std::string_view payload, SampleFrameText* out) {
  out->Clear();
  // Depths as wire::ParseJsonBounded counts them: the frame is 1, "ranks" 2, an entry 3.
  constexpr int kBelowFrame = static_cast<int>(wire::kMaxJsonDepth) - 1;
  constexpr int kBelowEntry = static_cast<int>(wire::kMaxJsonDepth) - 3;
  jsontext::Reader in(payload);
  if (!in.Consume('{') || in.Peek() == '}') return false;
  bool sample = false;
  unsigned seen = 0;
  do {
    std::string_view key;
    if (!in.PlainString(&key) || !in.Consume(':')) return false;
    const unsigned bit = key == "type" ? 1 : key == "now_ns" ? 2 : key == "ranks" ? 4 : key == "log_dir" ? 8 : 0;
    if (seen & bit) return false;  // a key twice: the full parser keeps the last, we would read the first
    seen |= bit;
    bool ok = true;
    if (bit == 1) {
      std::string_view type;
      ok = in.PlainString(&type);
      sample = type == "sample";
    } else if (bit == 2) {
      int64_t now = 0;
      ok = in.Int(&now);
      out->now_ns = now;
    } else if (bit == 4) {
      ok = in.Consume('[');
      if (ok && !in.Consume(']')) {
        do {
          // An entry: an object with one integer "rank", its text kept whole for ApplyText.
          if (in.Peek() != '{') return false;
          const size_t start = in.position();
          in.Consume('{');
          SampleFrameText::Entry entry;
          bool have_rank = false;
          if (!in.Consume('}')) {
            do {
              std::string_view field;
              if (!in.PlainString(&field) || !in.Consume(':')) return false;
              if (field == "rank") {
                if (have_rank || !in.Integer(&entry.rank)) return false;
                have_rank = true;
              } else if (!in.Skip(nullptr, kBelowEntry)) {
                return false;
              }
            } while (in.Consume(','));
            if (!in.Consume('}')) return false;
          }
          if (!have_rank) return false;
          entry.text = payload.substr(start, in.position() - start);
          out->entries.push_back(entry);
        } while (in.Consume(','));
        ok = in.Consume(']');
      }
    } else {
      std::string_view span;
      ok = in.Skip(&span, kBelowFrame);
      if (bit == 8) out->log_dir = span;
    }
    if (!ok) return false;
  } while (in.Consume(','));
  return in.Consume('}') && in.AtEnd() && sample;
}

bool SampleFrameFromJson(const json& frame, SampleFrameText* out) {
  out->Clear();
  const auto type = frame.is_object() ? frame.find("type") : frame.end();
  if (type == frame.end() || !type->is_string() || *type != "sample") return false;
  if (const auto now = frame.find("now_ns"); now != frame.end() && now->is_number_integer())
    out->now_ns = now->get<int64_t>();
  // Each part as text, as ScanSampleFrame finds it; the views are made once `owned` stops growing.
  std::vector<int> ranks;
  if (const auto list = frame.find("ranks"); list != frame.end() && list->is_array())
    for (const auto& j : *list) {
      const auto rank = j.is_object() ? j.find("rank") : j.end();
      if (rank == j.end() || !rank->is_number_integer()) continue;
      ranks.push_back(rank->get<int>());
      out->owned.push_back(j.dump(-1, ' ', false, json::error_handler_t::replace));
    }
  const auto log_dir = frame.find("log_dir");
  if (log_dir != frame.end()) out->owned.push_back(log_dir->dump(-1, ' ', false, json::error_handler_t::replace));
  for (size_t i = 0; i < ranks.size(); ++i) out->entries.push_back({ranks[i], out->owned[i]});
  if (log_dir != frame.end()) out->log_dir = out->owned.back();
  return true;
}

}  // namespace dsd::agent
