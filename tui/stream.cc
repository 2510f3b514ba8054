#include "tui/stream.h"

#include <cmath>

namespace dsd::tui {
namespace {

using nlohmann::json;

constexpr const char* kToneNames[] = {"normal", "title", "ok", "waiting", "error", "dim", "selected"};

const char* ToneName(Tone t) { return kToneNames[static_cast<int>(t)]; }

Tone ParseTone(const std::string& s) {
  for (int i = 0; i < 7; ++i)
    if (s == kToneNames[i]) return static_cast<Tone>(i);
  return Tone::kNormal;
}

// When a row's state began, in seconds since the start (-1: no time shown). Sent instead of the
// time in state, so a row whose state goes on is not sent again every tick.
double Since(const RankRow& r, double elapsed) { return r.in_state_s > 0 ? std::round((elapsed - r.in_state_s) * 1000) / 1000 : -1; }

json RowJson(const RankRow& r, double since) {
  json j = {{"rank", r.rank}, {"node", r.node}, {"tone", ToneName(r.tone)}, {"state", r.state}, {"where", r.where}};
  if (since >= 0) j["since"] = since;
  if (r.culprit) j["culprit"] = true;
  return j;
}

json ClassesJson(const std::vector<ClassRow>& classes) {
  json a = json::array();
  for (const auto& c : classes) a.push_back({{"description", c.description}, {"ranks", c.ranks}, {"culprit", c.culprit}});
  return a;
}

json FindingsJson(const std::vector<diagnosis::Finding>& findings) {
  json a = json::array();
  for (const auto& f : findings) a.push_back(diagnosis::ToJson(f));
  return a;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

template <typename T>
Result<T> Field(const json& j, const char* name, const char* event) {
  auto it = j.find(name);
  if (it == j.end()) return InvalidArgument(std::string(event) + " event: missing \"" + name + "\"");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return InvalidArgument(std::string(event) + " event: \"" + name + "\" has the wrong type");
  }
}

}  // namespace

json HeaderEvent(const std::string& job, int ranks, int64_t start_unix_ms) {
  return {{"type", "header"}, {"version", kStreamVersion}, {"t", 0}, {"job", job}, {"ranks", ranks}, {"start_unix_ms", start_unix_ms}};
}

json LogEvent(double t, int rank, const std::vector<std::string>& lines) {
  return {{"type", "log"}, {"t", t}, {"rank", rank}, {"lines", lines}};
}

json EndEvent(double t, int code) { return {{"type", "end"}, {"t", t}, {"code", code}}; }

json StreamEncoder::Tick(const Snapshot& s, bool last) {
  json j = {{"type", "tick"},       {"t", s.elapsed_s},        {"overall", s.overall}, {"nodes", s.nodes}, {"ranks", s.ranks},
            {"running", s.running}, {"step", s.step},          {"steps_per_s", s.steps_per_s}};
  json rows = json::array();
  if (first_) rows_.clear();
  rows_.resize(s.rows.size());
  for (size_t i = 0; i < s.rows.size(); ++i) {
    const RankRow& row = s.rows[i];
    double since = Since(row, s.elapsed_s);
    SentRow& last = rows_[i];
    // `since` moves by rounding only while the state goes on: a change under 50 ms is not news.
    bool same = !first_ && last.sent && last.row.rank == row.rank && last.row.state == row.state && last.row.where == row.where &&
                last.row.tone == row.tone && last.row.node == row.node && last.row.culprit == row.culprit &&
                (last.since < 0) == (since < 0) && (since < 0 || std::abs(last.since - since) < 0.05);
    if (same) continue;
    rows.push_back(RowJson(row, since));
    last = {row, since, true};
  }
  j["rows"] = std::move(rows);
  std::string classes = Dump(ClassesJson(s.classes));
  if (first_ || classes != classes_) j["classes"] = json::parse(classes), classes_ = std::move(classes);
  // A hang's evidence counts its seconds ("for 5.8 s"), so findings change every tick. New or
  // changed findings go out at once; evidence that only moved goes out every few seconds, which
  // keeps a long hang's recording small.
  json findings = FindingsJson(s.findings), keys = findings;
  for (auto& f : keys) f.erase("evidence");
  std::string dumped = Dump(findings), dumped_keys = Dump(keys);
  bool changed = dumped_keys != finding_keys_ || (dumped != findings_ && (last || s.elapsed_s - findings_t_ >= kEvidenceRefreshS));
  if (first_ || changed) {
    j["findings"] = std::move(findings);
    findings_ = std::move(dumped);
    finding_keys_ = std::move(dumped_keys);
    findings_t_ = s.elapsed_s;
  }
  first_ = false;
  return j;
}

Status StreamDecoder::Apply(const json& e) {
  if (!e.is_object()) return InvalidArgument("an event must be a JSON object");
  auto type = Field<std::string>(e, "type", "an");
  if (!type.ok()) return type.status();
  const char* name = type->c_str();
  auto t = Field<double>(e, "t", name);
  if (!t.ok()) return t.status();
  if (*type == "header") {
    auto version = Field<int>(e, "version", name);
    if (!version.ok()) return version.status();
    if (*version != kStreamVersion)
      return InvalidArgument("header event: version " + std::to_string(*version) + " (this dsdoctor reads version " + std::to_string(kStreamVersion) + ")");
    auto job = Field<std::string>(e, "job", name);
    auto ranks = Field<int>(e, "ranks", name);
    if (!job.ok()) return job.status();
    if (!ranks.ok()) return ranks.status();
    if (*ranks < 0 || *ranks > 1'000'000) return InvalidArgument("header event: \"ranks\" out of range");
    *this = StreamDecoder();
    snapshot_.job = *job;
    snapshot_.ranks = *ranks;
    start_unix_ms_ = e.value("start_unix_ms", int64_t{0});
    has_header_ = true;
  } else if (*type == "tick") {
    // Validate everything before changing anything.
    Snapshot next = snapshot_;
    std::vector<double> since = since_;
    try {
      next.elapsed_s = *t;
      next.overall = e.at("overall").get<std::string>();
      next.nodes = e.at("nodes").get<int>();
      next.ranks = e.at("ranks").get<int>();
      next.running = e.at("running").get<int>();
      next.step = e.at("step").get<uint64_t>();
      next.steps_per_s = e.at("steps_per_s").get<double>();
      if (next.ranks < 0 || next.ranks > 1'000'000) return InvalidArgument("tick event: \"ranks\" out of range");
      next.rows.resize(static_cast<size_t>(next.ranks));
      since.resize(static_cast<size_t>(next.ranks), -1);
      for (int r = 0; r < next.ranks; ++r) next.rows[r].rank = r;
      for (const auto& row : e.at("rows")) {
        int r = row.at("rank").get<int>();
        if (r < 0 || r >= next.ranks) return InvalidArgument("tick event: row for rank " + std::to_string(r) + " of " + std::to_string(next.ranks));
        RankRow& out = next.rows[r];
        out.node = row.at("node").get<std::string>();
        out.tone = ParseTone(row.at("tone").get<std::string>());
        out.state = row.at("state").get<std::string>();
        out.where = row.at("where").get<std::string>();
        out.culprit = row.value("culprit", false);
        since[r] = row.contains("since") ? row["since"].get<double>() : -1;
      }
      if (e.contains("classes")) {
        next.classes.clear();
        for (const auto& c : e["classes"])
          next.classes.push_back({c.at("description").get<std::string>(), c.at("ranks").get<std::vector<int>>(), c.value("culprit", false)});
      }
      if (e.contains("findings")) {
        next.findings.clear();
        for (const auto& f : e["findings"]) {
          auto finding = diagnosis::FindingFromJson(f);
          if (!finding.ok()) return InvalidArgument("tick event: finding: " + finding.status().message());
          next.findings.push_back(std::move(*finding));
        }
      }
    } catch (const json::exception& ex) {
      return InvalidArgument(std::string("tick event: ") + ex.what());
    }
    for (size_t r = 0; r < next.rows.size(); ++r) next.rows[r].in_state_s = since[r] >= 0 ? std::max(0.0, *t - since[r]) : 0;
    snapshot_ = std::move(next);
    since_ = std::move(since);
  } else if (*type == "log") {
    auto rank = Field<int>(e, "rank", name);
    auto lines = Field<std::vector<std::string>>(e, "lines", name);
    if (!rank.ok()) return rank.status();
    if (!lines.ok()) return lines.status();
    if (*rank < 0) return InvalidArgument("log event: negative rank");
    for (const auto& l : *lines) logs_.Append(*rank, l);
  } else if (*type == "end") {
    auto code = Field<int>(e, "code", name);
    if (!code.ok()) return code.status();
    ended_ = true;
    end_code_ = *code;
  }
  t_ = *t;
  return Status::Ok();
}

std::vector<json> StreamDecoder::Keyframe() const {
  std::vector<json> out;
  out.push_back(HeaderEvent(snapshot_.job, snapshot_.ranks, start_unix_ms_));
  StreamEncoder full;
  out.push_back(full.Tick(snapshot_));
  for (const auto& [rank, lines] : logs_.all()) out.push_back(LogEvent(t_, rank, std::vector<std::string>(lines.begin(), lines.end())));
  if (ended_) out.push_back(EndEvent(t_, end_code_));
  return out;
}

}  // namespace dsd::tui
