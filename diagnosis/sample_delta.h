// A rank's state as a stream of deltas (docs/agent-protocol.md, "run" samples): each tick an agent
// sends, per rank, only the fields that changed since its previous sample and the trace records
// that are new or changed, instead of the whole state with its 64 recent records (~15 KB per rank,
// 5 times a second). The first sample of a rank, the first after a sample that could not be sent or
// that the reader refused (Reset), and every kKeyframeEvery-th are keyframes ("full": true) that
// replace what the reader holds.
//
// Entry: {"rank", "full"?, <changed fields of ToJson(RankState) except "recent">, "unset"?:[names],
//         "recent_drop"?: n, "recent_keep"?: k, "recent_tail"?: [records]}
// Records (recent_tail, in_flight, last) are 13-element arrays (ToCompactJson).
// The reader drops the n oldest recent records, keeps the next k and appends the tail (records
// whose content changed are resent in the tail with everything after them).
// Neither class is thread-safe; one instance per rank and direction.
#pragma once

#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "diagnosis/state.h"

namespace dsd::diagnosis {

// A reader that refuses a delta asks for a keyframe (the "resync" run message); the periodic one
// is the fallback for a request that never arrives.
inline constexpr int kKeyframeEvery = 300;             // 60 s at the default 200 ms period
inline constexpr size_t kMaxHeldRecentRecords = 1024;  // a reader refuses a window larger than this

class SampleDeltaWriter {
 public:
  explicit SampleDeltaWriter(int keyframe_every = kKeyframeEvery) : keyframe_every_(keyframe_every) {}
  // Appends the entry that brings a reader from the previously encoded state to `state`, as JSON
  // text (written directly: no JSON tree is built, docs/performance.md "Run sampling").
  void EncodeTo(const RankState& state, std::string* out);
  // The same entry as a JSON value (tests, tools).
  nlohmann::json Encode(const RankState& state);
  // The next Encode writes a keyframe (call when an encoded entry was never delivered).
  void Reset() { primed_ = false; }

 private:
  int keyframe_every_;
  bool primed_ = false;
  int since_keyframe_ = 0;
  // The state the reader holds after the previous entry: its fields (recent left empty) and its
  // window.
  RankState previous_;
  std::deque<OpRecord> sent_window_;
};

class SampleDeltaReader {
 public:
  // Applies one entry. A delta before any keyframe, or one that does not fit what is held, is an
  // error and leaves the held state unchanged; deltas are then refused until the next keyframe
  // (the writer's base and ours may differ from here on).
  Status Apply(const nlohmann::json& entry);
  // Apply for the entry's JSON text, as the coordinator receives it. Text of the shape writers
  // write is read in place, without a JSON tree (docs/performance.md, "Run sampling"); any other
  // text is parsed and given to Apply, so the result is the same either way. When the entry
  // applies, its "log" field (the rank's fresh output, a string) is appended to *log.
  Status ApplyText(std::string_view entry, std::string* log);
  // Whether the last ApplyText read its entry in place (tests, benchmarks).
  bool last_in_place() const { return last_in_place_; }
  bool primed() const { return primed_; }
  // The state as of the last applied entry (still held while later deltas are refused).
  Result<RankState> State() const;
  // The same, assigned over *out (its window's storage reused: no allocation per record when the
  // caller keeps one RankState per rank).
  Status StateInto(RankState* out) const;
  // The rank the held state is of (-1 before the first entry applied).
  int rank() const { return has_state_ ? parsed_.rank : -1; }

 private:
  Status Merge(const nlohmann::json& entry);
  // The in-place read: false, with nothing held changed, for text it does not take (then Apply
  // decides, errors included: this path has none of its own).
  bool MergeText(std::string_view entry, std::string* log);
  // The edit both paths end with, once the entry was read and checked: `parsed` becomes the held
  // state (swapped with it), and the window drops, keeps and appends (*tail)[0, tail_size).
  void Commit(RankState& parsed, bool full, size_t drop, size_t keep, std::vector<OpRecord>* tail, size_t tail_size);
  bool primed_ = false;     // deltas are accepted
  bool has_state_ = false;  // an entry applied: parsed_ and recent_ are a state
  bool last_in_place_ = false;
  RankState parsed_;  // the state's fields (its window is recent_)
  std::deque<OpRecord> recent_;
  RankState staged_;            // MergeText's patch, made on a copy: nothing held changes before it is read
  std::vector<OpRecord> tail_;  // MergeText's records, kept for their storage
};

}  // namespace dsd::diagnosis
