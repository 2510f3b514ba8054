#include "diagnosis/sample_delta.h"

#include <algorithm>
#include <concepts>
#include <utility>

#include "common/framing.h"
#include "common/json_text.h"

namespace dsd::diagnosis {

using nlohmann::json;

namespace {

// Records are told apart by when they started and what they were; the same record seen again may
// have changed state (started -> completed).
bool SameRecord(const OpRecord& a, const OpRecord& b) {
  return a.started_ns == b.started_ns && a.seq == b.seq && a.comm == b.comm && a.op == b.op;
}

// OpRecord's ==, in an order that finds a difference soonest: what changes in a record already sent
// (its end, its state) and the numbers come before the names, and every string's length before its
// bytes. The window's 64 records are compared every sample, most of them equal.
bool SameContent(const OpRecord& a, const OpRecord& b) {
  // Every field, named once: this stops compiling when OpRecord gains or loses one, which must then
  // be compared below too.
  [[maybe_unused]] const auto& [op, seq, comm, dtype, reduce, count, bytes, peer, callsite, state, async, started_ns,
                                ended_ns] = a;
  const auto same = [](const std::string& x, const std::string& y) {
    return x.size() == y.size() && std::char_traits<char>::compare(x.data(), y.data(), x.size()) == 0;
  };
  return a.ended_ns == b.ended_ns && a.started_ns == b.started_ns && a.seq == b.seq && a.async == b.async &&
         a.count == b.count && a.bytes == b.bytes && a.peer == b.peer && a.comm == b.comm &&
         a.state.size() == b.state.size() && a.op.size() == b.op.size() && a.callsite.size() == b.callsite.size() &&
         a.dtype.size() == b.dtype.size() && a.reduce.size() == b.reduce.size() && same(a.state, b.state) &&
         same(a.op, b.op) && same(a.callsite, b.callsite) && same(a.dtype, b.dtype) && same(a.reduce, b.reduce);
}

void AppendRecord(std::string* out, const OpRecord& r) {
  using namespace jsontext;
  // ToCompactJson's array, written directly: records are most of a delta's bytes.
  out->push_back('[');
  AppendString(out, r.op);
  out->push_back(',');
  AppendUInt(out, r.seq);
  out->push_back(',');
  AppendUInt(out, r.comm);
  out->push_back(',');
  AppendString(out, r.dtype);
  out->push_back(',');
  AppendString(out, r.reduce);
  out->push_back(',');
  AppendUInt(out, r.count);
  out->push_back(',');
  AppendUInt(out, r.bytes);
  out->push_back(',');
  AppendInt(out, r.peer);
  out->push_back(',');
  AppendString(out, r.callsite);
  out->push_back(',');
  AppendString(out, r.state);
  out->push_back(',');
  AppendInt(out, r.started_ns);
  out->push_back(',');
  AppendInt(out, r.ended_ns);
  out->append(r.async ? ",1]" : ",0]");
}

void AppendProc(std::string* out, const ProcSample& p) {
  using namespace jsontext;
  // ToJson(ProcSample)'s fields, in its (alphabetical) order.
  out->append("{\"cpu_fraction\":");
  AppendDouble(out, p.cpu_fraction);
  out->append(",\"flat_for_s\":");
  AppendDouble(out, p.flat_for_s);
  out->append(",\"state\":");
  AppendString(out, std::string_view(&p.state, 1));
  out->append(",\"tree_cpu_s\":");
  AppendDouble(out, p.tree_cpu_s);
  out->append(",\"wchan\":");
  AppendString(out, p.wchan);
  out->push_back('}');
}

// A field's value as ToJson(RankState) writes it.
void AppendValue(std::string* out, const std::string& v) { jsontext::AppendString(out, v); }
void AppendValue(std::string* out, bool v) { jsontext::AppendBool(out, v); }
template <std::integral T>
void AppendValue(std::string* out, T v) {
  if constexpr (std::is_signed_v<T>)
    jsontext::AppendInt(out, v);
  else
    jsontext::AppendUInt(out, v);
}

// The fields of ToJson(RankState) but "recent", compared on the structs: the writer never builds
// the whole state as JSON to find the two or three fields that changed. `present` is ToJson's rule
// for writing the field at all (SampleDeltaTest checks the table against ToJson).
struct FieldCodec {
  const char* key;
  bool (*present)(const RankState&);
  bool (*same)(const RankState&, const RankState&);
  void (*write)(const RankState&, std::string* out);
  void (*assign)(RankState& to, const RankState& from);  // the writer's copy of what it sent
};

bool Always(const RankState&) { return true; }
bool Exited(const RankState& s) { return s.status == RankStatus::kExited; }

// clang-format off
#define DSD_FIELD(name, present)                                                             \
  FieldCodec{#name, present,                                                                 \
             [](const RankState& a, const RankState& b) { return a.name == b.name; },       \
             [](const RankState& s, std::string* out) { AppendValue(out, s.name); },           \
             [](RankState& to, const RankState& from) { to.name = from.name; }}
// clang-format on

const FieldCodec kFields[] = {
    DSD_FIELD(rank, Always),
    DSD_FIELD(node, Always),
    DSD_FIELD(local_rank, Always),
    DSD_FIELD(pid, Always),
    {"status", Always, [](const RankState& a, const RankState& b) { return a.status == b.status; },
     [](const RankState& s, std::string* out) { jsontext::AppendString(out, RankStatusName(s.status)); },
     [](RankState& to, const RankState& from) { to.status = from.status; }},
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
     [](const RankState& s, std::string* out) { AppendRecord(out, *s.in_flight); },
     [](RankState& to, const RankState& from) { to.in_flight = from.in_flight; }},
    {"last", [](const RankState& s) { return s.last.has_value(); },
     [](const RankState& a, const RankState& b) { return a.last == b.last; },
     [](const RankState& s, std::string* out) { AppendRecord(out, *s.last); },
     [](RankState& to, const RankState& from) { to.last = from.last; }},
    DSD_FIELD(last_error, [](const RankState& s) { return !s.last_error.empty(); }),
    {"proc", [](const RankState& s) { return s.proc.valid; },
     [](const RankState& a, const RankState& b) { return a.proc == b.proc; },
     [](const RankState& s, std::string* out) { AppendProc(out, s.proc); },
     [](RankState& to, const RankState& from) { to.proc = from.proc; }},
    DSD_FIELD(stack, [](const RankState& s) { return !s.stack.empty(); }),
    DSD_FIELD(last_output_ns, [](const RankState& s) { return s.last_output_ns != 0; }),
    DSD_FIELD(sample_ns, [](const RankState& s) { return s.sample_ns != 0; }),
    DSD_FIELD(unobserved, [](const RankState& s) { return s.unobserved; }),
};

#undef DSD_FIELD

void AppendTail(std::string* out, const std::vector<OpRecord>& recent, size_t from) {
  out->push_back('[');
  for (size_t i = from; i < recent.size(); ++i) {
    if (i != from) out->push_back(',');
    AppendRecord(out, recent[i]);
  }
  out->push_back(']');
}

}  // namespace

json SampleDeltaWriter::Encode(const RankState& state) {
  std::string text;
  EncodeTo(state, &text);
  return json::parse(text);
}

void SampleDeltaWriter::EncodeTo(const RankState& state, std::string* out) {
  using namespace jsontext;
  out->append("{\"rank\":");
  AppendInt(out, state.rank);
  bool first = false;  // "rank" is written
  if (++since_keyframe_ >= keyframe_every_) primed_ = false;
  if (!primed_) {
    since_keyframe_ = 0;
    out->append(",\"full\":true");
    for (const auto& f : kFields) {
      f.assign(previous_, state);
      if (!f.present(state) || std::string_view(f.key) == "rank") continue;
      AppendKey(out, f.key, &first);
      f.write(state, out);
    }
    AppendKey(out, "recent_tail", &first);
    AppendTail(out, state.recent, 0);
    sent_window_.assign(state.recent.begin(), state.recent.end());
  } else {
    bool any_unset = false;
    std::string unset;
    for (const auto& f : kFields) {
      if (std::string_view(f.key) == "rank") continue;  // written first
      const bool now = f.present(state), before = f.present(previous_);
      if (now && (!before || !f.same(previous_, state))) {
        AppendKey(out, f.key, &first);
        f.write(state, out);
      } else if (!now && before) {
        unset.push_back(any_unset ? ',' : '[');
        any_unset = true;
        AppendString(&unset, f.key);
      }
    }
    // Only what changed is copied, after the loop above: whether a field was present before
    // (exit_code) may depend on another one (status).
    for (const auto& f : kFields)
      if (!f.same(previous_, state)) f.assign(previous_, state);
    if (any_unset) {
      AppendKey(out, "unset", &first);
      out->append(unset);
      out->push_back(']');
    }
    // The new window is the old one with its oldest records gone, possibly some changed at the
    // end, and new ones after: find where the old window's records start in it.
    const std::deque<OpRecord>& held = sent_window_;
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
    while (drop + keep < held.size() && keep < state.recent.size() &&
           SameContent(held[drop + keep], state.recent[keep]))
      ++keep;
    if (drop || keep != held.size() || keep != state.recent.size()) {
      AppendKey(out, "recent_drop", &first);
      AppendUInt(out, drop);
      AppendKey(out, "recent_keep", &first);
      AppendUInt(out, keep);
      AppendKey(out, "recent_tail", &first);
      AppendTail(out, state.recent, keep);
      // The reader's edit, on our copy: only the tail's few records are copied.
      sent_window_.erase(sent_window_.begin(), sent_window_.begin() + static_cast<long>(drop));
      sent_window_.resize(keep);
      sent_window_.insert(sent_window_.end(), state.recent.begin() + static_cast<long>(keep), state.recent.end());
    }
  }
  out->push_back('}');
  primed_ = true;
}

Status SampleDeltaReader::Apply(const json& entry) {
  Status st = Merge(entry);
  if (!st.ok()) primed_ = false;
  return st;
}

Status SampleDeltaReader::Merge(const json& entry) {
  if (!entry.is_object()) return InvalidArgument("sample: rank entry is not a JSON object");
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
      if (!r.is_array()) return InvalidArgument("sample: a recent record must be an array (docs/agent-protocol.md)");
      DSD_ASSIGN_OR_RETURN(OpRecord rec, OpRecordFromJson(r));
      tail.push_back(std::move(rec));
    }
  }
  Commit(parsed, full, drop, keep, &tail, tail.size());
  return Status::Ok();
}

void SampleDeltaReader::Commit(RankState& parsed, bool full, size_t drop, size_t keep, std::vector<OpRecord>* tail,
                               size_t tail_size) {
  if (full) {
    recent_.clear();
  } else {
    recent_.erase(recent_.begin(), recent_.begin() + static_cast<long>(drop));
    recent_.resize(keep);
  }
  for (size_t i = 0; i < tail_size; ++i) recent_.push_back(std::move((*tail)[i]));
  std::swap(parsed_, parsed);
  primed_ = has_state_ = true;
}

namespace {

using jsontext::Reader;

bool ReadValue(Reader& in, std::string* v) { return in.String(v); }
bool ReadValue(Reader& in, bool* v) { return in.Bool(v); }
template <std::integral T>
requires(!std::same_as<T, bool>) bool ReadValue(Reader& in, T* v) { return in.Integer(v); }

// ToCompactJson's array, every element of its type (OpRecordFromArray's rules).
bool ReadRecord(Reader& in, OpRecord* r) {
  int async = 0;
  const bool ok = in.Consume('[') && in.String(&r->op) && in.Consume(',') && in.Integer(&r->seq) && in.Consume(',') &&
                  in.Integer(&r->comm) && in.Consume(',') && in.String(&r->dtype) && in.Consume(',') &&
                  in.String(&r->reduce) && in.Consume(',') && in.Integer(&r->count) && in.Consume(',') &&
                  in.Integer(&r->bytes) && in.Consume(',') && in.Integer(&r->peer) && in.Consume(',') &&
                  in.String(&r->callsite) && in.Consume(',') && in.String(&r->state) && in.Consume(',') &&
                  in.Integer(&r->started_ns) && in.Consume(',') && in.Integer(&r->ended_ns) && in.Consume(',') &&
                  in.Integer(&async) && in.Consume(']');
  r->async = async != 0;
  return ok && !r->op.empty();
}

// ToJson(ProcSample)'s object (PatchRankState's rules), each field at most once.
bool ReadProc(Reader& in, ProcSample* p) {
  *p = ProcSample{};
  p->valid = true;
  if (!in.Consume('{')) return false;
  if (in.Consume('}')) return true;
  unsigned seen = 0;
  do {
    std::string_view key;
    if (!in.PlainString(&key) || !in.Consume(':')) return false;
    static constexpr std::string_view kKeys[] = {"state", "wchan", "cpu_fraction", "flat_for_s", "tree_cpu_s"};
    const size_t k = static_cast<size_t>(std::find(std::begin(kKeys), std::end(kKeys), key) - std::begin(kKeys));
    if (k == std::size(kKeys) || (seen >> k & 1)) return false;
    seen |= 1u << k;
    bool ok = false;
    if (k == 0) {
      std::string st;
      ok = in.String(&st);
      p->state = st.empty() ? '?' : st[0];
    } else if (k == 1) {
      ok = in.String(&p->wchan);
    } else {
      ok = in.Number(k == 2 ? &p->cpu_fraction : k == 3 ? &p->flat_for_s : &p->tree_cpu_s);
    }
    if (!ok) return false;
  } while (in.Consume(','));
  return in.Consume('}');
}

// The fields an entry patches (PatchRankState's), read in place.
struct FieldReader {
  std::string_view key;
  bool (*read)(Reader& in, RankState& s);
};

// clang-format off
#define DSD_READ(name) FieldReader{#name, [](Reader& in, RankState& s) { return ReadValue(in, &s.name); }}
// clang-format on

const FieldReader kReaders[] = {
    DSD_READ(node),
    DSD_READ(local_rank),
    DSD_READ(pid),
    {"status",
     [](Reader& in, RankState& s) {
       std::string_view v;
       if (!in.PlainString(&v)) return false;
       for (RankStatus st : {RankStatus::kRunning, RankStatus::kExited, RankStatus::kNotStarted})
         if (v == RankStatusName(st)) return s.status = st, true;
       return false;
     }},
    DSD_READ(has_trace),
    DSD_READ(step),
    DSD_READ(phase),
    DSD_READ(phase_ns),
    DSD_READ(heartbeat_ns),
    DSD_READ(watchdog_fired),
    DSD_READ(finished),
    DSD_READ(exit_code),
    DSD_READ(signal),
    DSD_READ(exit_ns),
    {"in_flight",
     [](Reader& in, RankState& s) { return ReadRecord(in, s.in_flight ? &*s.in_flight : &s.in_flight.emplace()); }},
    {"last", [](Reader& in, RankState& s) { return ReadRecord(in, s.last ? &*s.last : &s.last.emplace()); }},
    DSD_READ(last_error),
    {"proc", [](Reader& in, RankState& s) { return ReadProc(in, &s.proc); }},
    DSD_READ(stack),
    DSD_READ(last_output_ns),
    DSD_READ(sample_ns),
    DSD_READ(unobserved),
};

#undef DSD_READ

}  // namespace

Status SampleDeltaReader::ApplyText(std::string_view entry, std::string* log) {
  last_in_place_ = MergeText(entry, log);
  if (last_in_place_) return Status::Ok();
  auto parsed = wire::ParseJsonBounded(entry);
  if (!parsed.ok()) {
    primed_ = false;
    return InvalidArgument("sample: rank entry: " + parsed.status().message());
  }
  DSD_RETURN_IF_ERROR(Apply(*parsed));
  if (const auto l = parsed->find("log"); l != parsed->end() && l->is_string())
    log->append(l->get_ref<const std::string&>());
  return Status::Ok();
}

bool SampleDeltaReader::MergeText(std::string_view text, std::string* log) {
  Reader in(text);
  if (!in.Consume('{') || in.Peek() == '}') return false;
  // "full" comes before the fields, as writers write it: whether the entry patches the held state or
  // a fresh one depends on it.
  int rank = 0;
  bool have_rank = false, have_full = false, full = false, based = false;
  auto base = [&] {
    if (!full && !primed_) return false;
    if (full)
      staged_ = RankState{};
    else
      staged_ = parsed_;  // assigned over the last one: its strings' storage is reused
    if (have_rank) staged_.rank = rank;
    based = true;
    return true;
  };
  constexpr size_t kReaderCount = std::size(kReaders);
  uint64_t seen = 0;  // a bit per kReaders entry, then per special key below
  enum : size_t { kUnset = kReaderCount, kDrop, kKeep, kTail, kLog };
  std::vector<std::string_view> unset;
  uint64_t drop = 0, keep = 0;
  size_t tail_size = 0;
  std::string fresh_log;
  do {
    std::string_view key;
    if (!in.PlainString(&key) || !in.Consume(':')) return false;
    if (key == "rank") {
      if (have_rank || !in.Integer(&rank)) return false;
      have_rank = true;
      if (based) staged_.rank = rank;
      continue;
    }
    if (key == "full") {
      if (have_full || based || !in.Bool(&full)) return false;
      have_full = true;
      continue;
    }
    if (!based && !base()) return false;
    size_t k = 0;
    while (k < kReaderCount && kReaders[k].key != key) ++k;
    if (k == kReaderCount) {
      if (key == "unset")
        k = kUnset;
      else if (key == "recent_drop")
        k = kDrop;
      else if (key == "recent_keep")
        k = kKeep;
      else if (key == "recent_tail")
        k = kTail;
      else if (key == "log")
        k = kLog;
      else
        return false;  // a field this reader does not know
    }
    if (seen >> k & 1) return false;
    seen |= uint64_t{1} << k;
    bool ok = true;
    switch (k) {
      case kUnset:
        ok = in.Consume('[');
        if (ok && !in.Consume(']')) {
          do {
            std::string_view name;
            if (!in.PlainString(&name)) return false;
            unset.push_back(name);
          } while (in.Consume(','));
          ok = in.Consume(']');
        }
        break;
      case kDrop:
        ok = in.UInt(&drop);
        break;
      case kKeep:
        ok = in.UInt(&keep);
        break;
      case kTail:
        ok = in.Consume('[');
        if (ok && !in.Consume(']')) {
          do {
            if (tail_size == kMaxHeldRecentRecords) return false;
            if (tail_size == tail_.size()) tail_.emplace_back();
            if (!ReadRecord(in, &tail_[tail_size++])) return false;
          } while (in.Consume(','));
          ok = in.Consume(']');
        }
        break;
      case kLog:
        ok = in.String(&fresh_log);
        break;
      default:
        ok = kReaders[k].read(in, staged_);
    }
    if (!ok) return false;
  } while (in.Consume(','));
  if (!in.Consume('}') || !in.AtEnd()) return false;
  if (!based && !base()) return false;
  for (std::string_view name : unset) ClearRankStateField(name, &staged_);
  // Merge's window rules; anything it would refuse is left to it, for its error.
  if (full) {
    drop = keep = 0;
  } else if (seen >> kTail & 1) {
    if (drop > recent_.size() || keep > recent_.size() - drop) return false;
  } else {
    drop = 0, keep = recent_.size();
  }
  if (keep + tail_size > kMaxHeldRecentRecords) return false;
  Commit(staged_, full, drop, keep, &tail_, tail_size);
  if (seen >> kLog & 1) log->append(fresh_log);
  return true;
}

Result<RankState> SampleDeltaReader::State() const {
  if (!has_state_) return InvalidArgument("sample: no state yet");
  RankState st = parsed_;
  st.recent.assign(recent_.begin(), recent_.end());
  return st;
}

}  // namespace dsd::diagnosis

namespace dsd::diagnosis {

Status SampleDeltaReader::StateInto(RankState* out) const {
  if (!has_state_) return InvalidArgument("sample: no state yet");
  std::vector<OpRecord> window = std::move(out->recent);
  *out = parsed_;                                 // parsed_ holds no window: the fields alone
  window.assign(recent_.begin(), recent_.end());  // over the old records: their storage is reused
  out->recent = std::move(window);
  return Status::Ok();
}

}  // namespace dsd::diagnosis
