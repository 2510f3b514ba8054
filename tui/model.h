// The TUI's snapshot model and its pure frame builder (collect → snapshot → layout → frame → draw).
// BuildSnapshot turns what the run coordinator knows (rank states, the diagnosis, each rank's log
// tail) into display rows; BuildFrame places a snapshot into a Layout as text runs, each clipped
// to its pane, so what the screen shows is unit-tested without a terminal. The ncurses view only
// paints a Frame. Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "diagnosis/state.h"
#include "tui/layout.h"

namespace dsd::tui {

enum class Tone { kNormal, kTitle, kOk, kWaiting, kError, kDim, kSelected };

struct RankRow {
  int rank = 0;
  std::string node;
  Tone tone = Tone::kNormal;  // ok (computing/finished), waiting (in a collective), error (culprit or failed)
  std::string state;          // "compute", "wait", "exited 0", "SIGKILL", …
  std::string where;          // "all_reduce#5 @engine.step" or "phase forward"
  double in_state_s = 0;
  bool culprit = false;       // named by a finding
};

struct ClassRow {
  std::string description;
  std::vector<int> ranks;
  bool culprit = false;
};

struct Snapshot {
  std::string job;            // the command
  int nodes = 0, ranks = 0, running = 0;
  double elapsed_s = 0, steps_per_s = 0;
  uint64_t step = 0;          // the slowest rank's step
  std::string overall;        // "running", "HUNG", "failed", "finished"
  std::vector<RankRow> rows;  // by rank
  std::vector<ClassRow> classes;
  std::vector<diagnosis::Finding> findings;
};

struct SnapshotInput {
  std::string job;
  int64_t start_ns = 0;
  double steps_per_s = 0;
};

// Each rank's last log lines, capped per rank in lines and bytes so that thousands of chatty
// ranks stay small (the whole log is on disk). Kept apart from the Snapshot, which is rebuilt
// every tick, so a tick never copies the tails. Thread-compatible.
class LogTails {
 public:
  static constexpr size_t kMaxLines = 300;
  static constexpr size_t kMaxBytes = 48 * 1024;
  void Append(int rank, std::string_view line);
  // nullptr when the rank has printed nothing.
  const std::deque<std::string>* Find(int rank) const;
  const std::map<int, std::deque<std::string>>& all() const { return lines_; }

 private:
  std::map<int, std::deque<std::string>> lines_;
  std::map<int, size_t> bytes_;
};

Snapshot BuildSnapshot(const diagnosis::JobState& job, const diagnosis::Diagnosis& d, const SnapshotInput& in);

// What the person at the keyboard chose.
struct ViewState {
  int selected = 0;        // rank (per-rank view) or class index (class view)
  int scroll = 0;          // first visible row of the rank pane
  std::string filter;      // rows whose text contains it ("" = all)
  bool paused = false;     // the screen keeps its snapshot
  bool full_log = false;   // the selected rank's log takes the whole body
  bool help = false;
  bool editing_filter = false;  // typing after '/'
  // The full-log view: lines scrolled up from the end, and a search ('/' there): the view jumps
  // to the newest match, 'n' to the next older one ('N' back).
  int log_scroll = 0;
  std::string search;
  int search_index = 0;
  bool editing_search = false;
  bool open_pager = false;  // 'o': the caller opens the selected rank's log file in $PAGER, then clears this
};

// What frames the data: whose view it is, a note after the overall state (a replay's position,
// an attached coordinator) and what q does there.
struct Chrome {
  std::string title = "dsdoctor run";
  std::string note;
  std::string quit_hint = "quit (stops the job)";
  std::string extra_keys;  // more keys for the help line ('?'), e.g. a replay's
};

// Applies one key (ncurses codes; arrows as KEY_UP etc. passed in as the Key values below) to
// the view. Returns true when the key asks to quit.
enum Key : int { kKeyUp = 0x103, kKeyDown = 0x102, kKeyPageDown = 0x152, kKeyPageUp = 0x153, kKeyEnter = 0x157, kKeyBackspace = 0x107,
                 kKeyLeft = 0x104, kKeyRight = 0x105, kKeyHome = 0x106, kKeyEnd = 0x168 };
bool ApplyKey(ViewState& v, int key, int row_count, int page);

struct Run {
  int x = 0, y = 0;
  std::string text;
  Tone tone = Tone::kNormal;
};

struct Frame {
  int cols = 0, rows = 0;
  std::vector<Run> runs;
  bool class_view = false;  // the rank pane shows equivalence classes (more ranks than rows)
  int selected_rank = -1;   // whose log is shown
  int search_matches = 0;   // lines of the shown log that match ViewState::search
  // All the text, row by row (tests, and the e2e test reads the same words off tmux).
  std::vector<std::string> Text() const;
};

// Rows that match the view's filter, in display order (ranks or classes).
std::vector<int> VisibleRows(const Snapshot& s, const ViewState& v, bool class_view);

Frame BuildFrame(const Snapshot& s, const Layout& layout, const ViewState& v, const LogTails* logs = nullptr, const Chrome& chrome = {});

}  // namespace dsd::tui
