#include "diagnosis/sample_delta.h"

#include <algorithm>
#include <utility>

namespace dsd::diagnosis {

using nlohmann::json;

namespace {

// Records are told apart by when they started and what they were; the same record seen again may
// have changed state (started -> completed).
bool SameRecord(const OpRecord& a, const OpRecord& b) {
  return a.started_ns == b.started_ns && a.seq == b.seq && a.comm == b.comm && a.op == b.op;
}

json RecordJson(const OpRecord& r, bool compact) { return compact ? ToCompactJson(r) : ToJson(r); }

// The fields of ToJson(RankState) but "recent", compared on the structs: the writer never builds
// the whole state as JSON to find the two or three fields that changed. `present` is ToJson's rule
// for writing the field at all (SampleDeltaTest checks the table against ToJson).
struct FieldCodec {
  const char* key;
  bool (*present)(const RankState&);
  bool (*same)(const RankState&, const RankState&);
  json (*value)(const RankState&, bool compact);
};

bool Always(const RankState&) { return true; }
bool Exited(const RankState& s) { return s.status == RankStatus::kExited; }

// clang-format off
#define DSD_FIELD(name, present)                                                          \
  FieldCodec{#name, present,                                                              \
             [](const RankState& a, const RankState& b) { return a.name == b.name; },    \
             [](const RankState& s, bool) { return json(s.name); }}
// clang-format on

const FieldCodec kFields[] = {
    DSD_FIELD(rank, Always),
    DSD_FIELD(node, Always),
    DSD_FIELD(local_rank, Always),
    DSD_FIELD(pid, Always),
    {"status", Always, [](const RankState& a, const RankState& b) { return a.status == b.status; },
     [](const RankState& s, bool) { return json(RankStatusName(s.status)); }},
    DSD_FIELD(has_trace, Always),
    DSD_FIELD(step, Always),
    DSD_FIELD(phase, Always),
    DSD_FIELD(phase_ns, Always),
    DSD_FIELD(heartbeat_ns, Always),
    DSD_FIELD(watchdog_fired, Always),
    DSD_FIELD(finished, Always),
    DSD_FIELD(exit_code, Exited),
    DSD_FIELD(signal, Exited),
    DSD_FIELD(exit_ns, Exited),
    {"in_flight", [](const RankState& s) { return s.in_flight.has_value(); },
     [](const RankState& a, const RankState& b) { return a.in_flight == b.in_flight; },
     [](const RankState& s, bool compact) { return RecordJson(*s.in_flight, compact); }},
    {"last", [](const RankState& s) { return s.last.has_value(); },
     [](const RankState& a, const RankState& b) { return a.last == b.last; },
     [](const RankState& s, bool compact) { return RecordJson(*s.last, compact); }},
    DSD_FIELD(last_error, [](const RankState& s) { return !s.last_error.empty(); }),
    {"proc", [](const RankState& s) { return s.proc.valid; },
     [](const RankState& a, const RankState& b) { return a.proc == b.proc; },
     [](const RankState& s, bool) { return ToJson(s.proc); }},
    DSD_FIELD(stack, [](const RankState& s) { return !s.stack.empty(); }),
    DSD_FIELD(last_output_ns, [](const RankState& s) { return s.last_output_ns != 0; }),
    DSD_FIELD(sample_ns, [](const RankState& s) { return s.sample_ns != 0; }),
    DSD_FIELD(unobserved, [](const RankState& s) { return s.unobserved; }),
};

#undef DSD_FIELD

}  // namespace

json SampleDeltaWriter::Encode(const RankState& state) {
  json entry = json::object();
  entry["rank"] = state.rank;
  if (++since_keyframe_ >= keyframe_every_) primed_ = false;
  if (!primed_) {
    since_keyframe_ = 0;
    entry["full"] = true;
    for (const auto& f : kFields)
      if (f.present(state) && std::string_view(f.key) != "rank") entry[f.key] = f.value(state, compact_);
    json tail = json::array();
    for (const auto& r : state.recent) tail.push_back(RecordJson(r, compact_));
    entry["recent_tail"] = std::move(tail);
  } else {
    json unset = json::array();
    for (const auto& f : kFields) {
      const bool now = f.present(state), before = f.present(previous_);
      if (now && (!before || !f.same(previous_, state)))
        entry[f.key] = f.value(state, compact_);
      else if (!now && before)
        unset.push_back(f.key);
    }
    if (!unset.empty()) entry["unset"] = std::move(unset);
    // The new window is the old one with its oldest records gone, possibly some changed at the
    // end, and new ones after: find where the old window's records start in it.
    const std::vector<OpRecord>& held = previous_.recent;
    size_t drop = held.size();
    if (!state.recent.empty()) {
      for (size_t i = 0; i < held.size(); ++i) {
        if (SameRecord(held[i], state.recent[0])) {
          drop = i;
          break;
        }
      }
    }
    size_t keep = 0;
    while (drop + keep < held.size() && keep < state.recent.size() && held[drop + keep] == state.recent[keep]) ++keep;
    if (drop || keep != held.size() || keep != state.recent.size()) {
      json tail = json::array();
      for (size_t i = keep; i < state.recent.size(); ++i) tail.push_back(RecordJson(state.recent[i], compact_));
      entry["recent_drop"] = drop;
      entry["recent_keep"] = keep;
      entry["recent_tail"] = std::move(tail);
    }
  }
  previous_ = state;  // copy-assigned: the window's records reuse their storage
  primed_ = true;
  return entry;
}

Status SampleDeltaReader::Apply(const json& entry) {
  Status st = Merge(entry);
  if (!st.ok()) primed_ = false;
  return st;
}

Status SampleDeltaReader::Merge(const json& entry) {
  if (!entry.is_object()) return InvalidArgument("sample: rank entry is not a JSON object");
  if (auto whole = entry.find("recent"); whole != entry.end()) {
    // A whole state (an agent from before deltas).
    DSD_ASSIGN_OR_RETURN(RankState st, RankStateFromJson(entry));
    if (st.recent.size() > kMaxHeldRecentRecords)
      return InvalidArgument("sample: rank " + std::to_string(st.rank) + " sent " + std::to_string(st.recent.size()) +
                             " recent records (at most " + std::to_string(kMaxHeldRecentRecords) + ")");
    recent_.assign(st.recent.begin(), st.recent.end());
    st.recent.clear();
    parsed_ = std::move(st);
    primed_ = true;
    return Status::Ok();
  }
  const auto full_field = entry.find("full");
  if (full_field != entry.end() && !full_field->is_boolean())
    return InvalidArgument("sample: field 'full' must be true or false");
  const bool full = full_field != entry.end() && full_field->get<bool>();
  if (!full && !primed_) return InvalidArgument("sample: a delta for a rank before its first full state");
  // Patched on a copy (without the window, a few strings): checked before anything held changes.
  RankState parsed = full ? RankState{} : parsed_;
  DSD_RETURN_IF_ERROR(PatchRankState(entry, &parsed));
  if (auto unset = entry.find("unset"); unset != entry.end()) {
    if (!unset->is_array()) return InvalidArgument("sample: field 'unset' must be an array");
    for (const auto& k : *unset)
      if (k.is_string()) ClearRankStateField(k.get_ref<const std::string&>(), &parsed);
  }
  size_t drop = 0, keep = full ? 0 : recent_.size();
  if (!full && entry.contains("recent_tail")) {
    keep = 0;
    for (auto [key, out] : {std::pair{"recent_drop", &drop}, std::pair{"recent_keep", &keep}}) {
      auto it = entry.find(key);
      if (it == entry.end()) continue;
      if (!it->is_number_integer() || it->get<int64_t>() < 0)
        return InvalidArgument(std::string("sample: field '") + key + "' must be a count");
      *out = it->get<size_t>();
    }
    if (drop > recent_.size() || keep > recent_.size() - drop)
      return InvalidArgument("sample: rank " + std::to_string(parsed.rank) + " drops " + std::to_string(drop) +
                             " and keeps " + std::to_string(keep) + " of the " + std::to_string(recent_.size()) +
                             " recent records held");
  }
  std::vector<OpRecord> tail;
  if (auto t = entry.find("recent_tail"); t != entry.end()) {
    if (!t->is_array()) return InvalidArgument("sample: field 'recent_tail' must be an array");
    if (keep + t->size() > kMaxHeldRecentRecords)
      return InvalidArgument("sample: rank " + std::to_string(parsed.rank) + " would hold " +
                             std::to_string(keep + t->size()) + " recent records (at most " +
                             std::to_string(kMaxHeldRecentRecords) + ")");
    tail.reserve(t->size());
    for (const auto& r : *t) {
      DSD_ASSIGN_OR_RETURN(OpRecord rec, OpRecordFromJson(r));
      tail.push_back(std::move(rec));
    }
  }
  if (full) {
    recent_.clear();
  } else {
    recent_.erase(recent_.begin(), recent_.begin() + static_cast<long>(drop));
    recent_.resize(keep);
  }
  for (auto& r : tail) recent_.push_back(std::move(r));
  parsed_ = std::move(parsed);
  primed_ = true;
  return Status::Ok();
}

Result<RankState> SampleDeltaReader::State() const {
  if (!primed_) return InvalidArgument("sample: no state yet");
  RankState st = parsed_;
  st.recent.assign(recent_.begin(), recent_.end());
  return st;
}

}  // namespace dsd::diagnosis

namespace dsd::diagnosis {

Status SampleDeltaReader::StateInto(RankState* out) const {
  if (!primed_) return InvalidArgument("sample: no state yet");
  std::vector<OpRecord> window = std::move(out->recent);
  *out = parsed_;                                 // parsed_ holds no window: the fields alone
  window.assign(recent_.begin(), recent_.end());  // over the old records: their storage is reused
  out->recent = std::move(window);
  return Status::Ok();
}

}  // namespace dsd::diagnosis
