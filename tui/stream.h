// The live view's event stream (docs/tui.md, "Event stream"): what `dsdoctor run` records in
// <log-dir>/events.jsonl and sends to attached viewers, and what `dsdoctor tui --replay/--attach`
// turns back into Snapshots and log tails.
//
// StreamEncoder sends only what changed since its previous tick (rows, classes, findings), so a
// 4,096-rank job costs a few rows per tick while it computes. StreamDecoder applies events in
// order and can describe its state as a keyframe (the events that bring a new viewer to it).
// Plain values; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "tui/model.h"

namespace dsd::tui {

inline constexpr int kStreamVersion = 1;
// At most this many of a rank's new lines go into one log event; the rest are counted in a marker
// line (the whole log is in rank-<r>.log).
inline constexpr size_t kMaxLogLinesPerEvent = 200;

nlohmann::json HeaderEvent(const std::string& job, int ranks, int64_t start_unix_ms);
// `t`: seconds since the job started (the Snapshot's elapsed_s).
nlohmann::json LogEvent(double t, int rank, const std::vector<std::string>& lines);
nlohmann::json EndEvent(double t, int code);

// Findings whose only change is their evidence's elapsed time are sent again after this long.
inline constexpr double kEvidenceRefreshS = 5;

class StreamEncoder {
 public:
  // The tick event that brings a viewer from the previous Tick's snapshot to `s` (all of it on
  // the first call). `last`: the run's final tick, which sends every change (no refresh delay).
  nlohmann::json Tick(const Snapshot& s, bool last = false);

 private:
  // A row as last sent: compared field by field, so a quiet tick builds no JSON for its rows.
  struct SentRow {
    RankRow row;
    double since = -1;  // -1: no time shown
    bool sent = false;
  };
  std::vector<SentRow> rows_;       // by index in Snapshot::rows
  std::string classes_, findings_;  // as last sent (dumped)
  std::string finding_keys_;        // the last sent findings without their evidence (dumped)
  double findings_t_ = 0;           // when they were last sent
  bool first_ = true;
};

class StreamDecoder {
 public:
  // Applies one event. Errors (kInvalidArgument) name the field; the state is unchanged then.
  // Unknown event types are ignored (a newer writer).
  Status Apply(const nlohmann::json& event);

  const Snapshot& snapshot() const { return snapshot_; }
  const LogTails& logs() const { return logs_; }
  double t() const { return t_; }          // of the last event
  bool has_header() const { return has_header_; }
  bool ended() const { return ended_; }
  int end_code() const { return end_code_; }
  // Header, a full tick and each rank's tail: a new viewer applying these has this state.
  std::vector<nlohmann::json> Keyframe() const;

 private:
  Snapshot snapshot_;
  LogTails logs_;
  std::vector<double> since_;  // by rank: elapsed time the row's state began (<0: no time shown)
  int64_t start_unix_ms_ = 0;
  double t_ = 0;
  bool has_header_ = false, ended_ = false;
  int end_code_ = 0;
};

}  // namespace dsd::tui
