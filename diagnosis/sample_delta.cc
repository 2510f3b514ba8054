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

json FieldsOf(const RankState& state) { return ToJson(state, /*with_recent=*/false); }

}  // namespace

json SampleDeltaWriter::Encode(const RankState& state) {
  json fields = FieldsOf(state);
  json entry = {{"rank", state.rank}};
  if (++since_keyframe_ >= kKeyframeEvery) primed_ = false;
  if (!primed_) {
    since_keyframe_ = 0;
    entry["full"] = true;
    for (auto& [k, v] : fields.items())
      if (k != "rank") entry[k] = v;
    json tail = json::array();
    for (const auto& r : state.recent) tail.push_back(ToJson(r));
    entry["recent_tail"] = std::move(tail);
    recent_ = state.recent;
  } else {
    json unset = json::array();
    for (auto& [k, v] : fields_.items())
      if (!fields.contains(k)) unset.push_back(k);
    for (auto& [k, v] : fields.items()) {
      auto old = fields_.find(k);
      if (old == fields_.end() || *old != v) entry[k] = v;
    }
    if (!unset.empty()) entry["unset"] = std::move(unset);
    // The new window is the old one with its oldest records gone, possibly some changed at the
    // end, and new ones after: find where the old window's records start in it.
    size_t drop = recent_.size();
    if (!state.recent.empty()) {
      for (size_t i = 0; i < recent_.size(); ++i) {
        if (SameRecord(recent_[i], state.recent[0])) {
          drop = i;
          break;
        }
      }
    }
    size_t keep = 0;
    while (drop + keep < recent_.size() && keep < state.recent.size() && recent_[drop + keep] == state.recent[keep])
      ++keep;
    if (drop || keep != recent_.size() || keep != state.recent.size()) {
      json tail = json::array();
      for (size_t i = keep; i < state.recent.size(); ++i) tail.push_back(ToJson(state.recent[i]));
      entry["recent_drop"] = drop;
      entry["recent_keep"] = keep;
      entry["recent_tail"] = std::move(tail);
      // What the reader now holds, the same way (cheaper than copying the window).
      recent_.erase(recent_.begin(), recent_.begin() + static_cast<long>(drop));
      recent_.resize(keep);
      recent_.insert(recent_.end(), state.recent.begin() + static_cast<long>(keep), state.recent.end());
    }
  }
  fields_ = std::move(fields);
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
    fields_ = FieldsOf(st);
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
  json fields = full ? json::object() : fields_;
  for (auto& [k, v] : entry.items()) {
    if (k == "full" || k == "unset" || k == "log" || k.rfind("recent_", 0) == 0) continue;
    fields[k] = v;
  }
  if (auto unset = entry.find("unset"); unset != entry.end()) {
    if (!unset->is_array()) return InvalidArgument("sample: field 'unset' must be an array");
    for (const auto& k : *unset)
      if (k.is_string()) fields.erase(k.get<std::string>());
  }
  // Checked before anything held changes.
  DSD_ASSIGN_OR_RETURN(RankState parsed, RankStateFromJson(fields));
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
  fields_ = std::move(fields);
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
