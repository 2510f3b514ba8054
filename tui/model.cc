#include "tui/model.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace dsd::tui {
namespace {

using diagnosis::RankStatus;

std::string Secs(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
  return buf;
}

std::string Fit(const std::string& s, int width) {
  if (width <= 0) return "";
  if (static_cast<int>(s.size()) <= width) return s;
  if (width <= 1) return s.substr(0, static_cast<size_t>(width));
  return s.substr(0, static_cast<size_t>(width - 1)) + "~";
}

std::string Pad(std::string s, int width) {
  s = Fit(s, width);
  s.resize(static_cast<size_t>(std::max(width, 0)), ' ');
  return s;
}

// Word-wraps `text` to `width` columns.
std::vector<std::string> Wrap(const std::string& text, int width) {
  std::vector<std::string> out;
  if (width <= 0) return out;
  std::string line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t sp = text.find(' ', pos);
    std::string word = text.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos);
    pos = sp == std::string::npos ? text.size() : sp + 1;
    while (static_cast<int>(word.size()) > width) {
      if (!line.empty()) out.push_back(line), line.clear();
      out.push_back(word.substr(0, static_cast<size_t>(width)));
      word = word.substr(static_cast<size_t>(width));
    }
    if (line.empty()) line = word;
    else if (static_cast<int>(line.size() + 1 + word.size()) <= width) line += " " + word;
    else out.push_back(line), line = word;
  }
  if (!line.empty()) out.push_back(line);
  return out;
}

class Painter {
 public:
  explicit Painter(Frame& f) : f_(f) {}
  // Writes `text` at row `row` of `pane`, clipped to the pane.
  void Put(const Rect& pane, int row, int col, const std::string& text, Tone tone) {
    if (row < 0 || row >= pane.height || col >= pane.width || pane.empty()) return;
    std::string t = Fit(text, pane.width - col);
    if (!t.empty()) f_.runs.push_back({pane.x + col, pane.y + row, t, tone});
  }

 private:
  Frame& f_;
};

}  // namespace

Snapshot BuildSnapshot(const diagnosis::JobState& job, const diagnosis::Diagnosis& d, const SnapshotInput& in) {
  Snapshot s;
  s.job = in.job;
  s.ranks = static_cast<int>(job.ranks.size());
  s.elapsed_s = in.start_ns && job.now_ns > in.start_ns ? (job.now_ns - in.start_ns) / 1e9 : 0;
  s.steps_per_s = in.steps_per_s;
  s.findings = d.findings;
  std::set<int> culprits;
  for (const auto& f : d.findings)
    if (f.severity == diagnosis::Severity::kError) culprits.insert(f.ranks.begin(), f.ranks.end());
  std::set<std::string> nodes;
  bool any_failed = false;
  int pending = 0;
  s.step = UINT64_MAX;
  for (const auto& r : job.ranks) {
    nodes.insert(r.node);
    RankRow row;
    row.rank = r.rank;
    row.node = r.node;
    row.culprit = culprits.count(r.rank) > 0;
    if (r.status == RankStatus::kRunning) {
      ++s.running;
      if (r.in_flight) {
        row.state = "wait";
        row.tone = Tone::kWaiting;
        row.where = r.in_flight->op + "#" + std::to_string(r.in_flight->seq) + (r.in_flight->callsite.empty() ? "" : " @" + r.in_flight->callsite);
        row.in_state_s = job.now_ns > r.in_flight->started_ns ? (job.now_ns - r.in_flight->started_ns) / 1e9 : 0;
      } else {
        row.state = r.has_trace ? "compute" : (r.proc.valid && r.proc.flat_for_s > 1 ? "blocked" : "running");
        row.tone = Tone::kOk;
        row.where = r.has_trace ? "phase " + r.phase : (r.proc.valid ? r.proc.wchan : "");
        row.in_state_s = r.phase_ns && job.now_ns > r.phase_ns ? (job.now_ns - r.phase_ns) / 1e9 : r.proc.flat_for_s;
      }
      if (r.has_trace) s.step = std::min<uint64_t>(s.step, r.step);
    } else if (r.status == RankStatus::kExited) {
      bool failed = r.signal || r.exit_code;
      any_failed |= failed;
      row.state = r.signal ? "signal " + std::to_string(r.signal) : "exit " + std::to_string(r.exit_code);
      row.tone = failed ? Tone::kError : Tone::kDim;
      row.where = r.last ? r.last->op + "#" + std::to_string(r.last->seq) : "";
    } else {
      ++pending;
      row.state = "pending";
      row.tone = Tone::kDim;
    }
    if (row.culprit) row.tone = Tone::kError;
    s.rows.push_back(std::move(row));
  }
  // Once no rank runs, the step reached is the furthest any traced rank got.
  if (s.step == UINT64_MAX) {
    s.step = 0;
    for (const auto& r : job.ranks)
      if (r.has_trace) s.step = std::max<uint64_t>(s.step, r.step);
  }
  s.nodes = static_cast<int>(nodes.size());
  for (const auto& c : d.classes) {
    ClassRow cr{c.description, c.ranks, false};
    for (int r : c.ranks) cr.culprit |= culprits.count(r) > 0;
    s.classes.push_back(std::move(cr));
  }
  // A job whose ranks have not started yet is starting, not finished.
  s.overall = d.hang ? "HUNG" : s.running > 0 ? "running" : pending > 0 && !any_failed ? "starting" : any_failed ? "failed" : "finished";
  return s;
}

void LogTails::Append(int rank, std::string_view line) {
  auto& tail = lines_[rank];
  size_t& bytes = bytes_[rank];
  tail.emplace_back(line.substr(0, kMaxBytes));
  bytes += tail.back().size();
  while (tail.size() > kMaxLines || (bytes > kMaxBytes && tail.size() > 1)) {
    bytes -= tail.front().size();
    tail.pop_front();
  }
}

const std::deque<std::string>* LogTails::Find(int rank) const {
  auto it = lines_.find(rank);
  return it == lines_.end() ? nullptr : &it->second;
}

std::vector<int> VisibleRows(const Snapshot& s, const ViewState& v, bool class_view) {
  std::vector<int> out;
  if (class_view) {
    for (size_t i = 0; i < s.classes.size(); ++i)
      if (v.filter.empty() || s.classes[i].description.find(v.filter) != std::string::npos) out.push_back(static_cast<int>(i));
  } else {
    for (const auto& r : s.rows)
      if (v.filter.empty() || (r.node + " " + r.state + " " + r.where + " " + std::to_string(r.rank)).find(v.filter) != std::string::npos)
        out.push_back(r.rank);
  }
  return out;
}

bool ApplyKey(ViewState& v, int key, int row_count, int page) {
  if (v.editing_search) {
    if (key == '\n' || key == '\r' || key == kKeyEnter) v.editing_search = false;
    else if (key == 27) v.editing_search = false, v.search.clear();
    else if ((key == kKeyBackspace || key == 127 || key == 8) && !v.search.empty()) v.search.pop_back();
    else if (key >= 0x20 && key < 0x7f) v.search += static_cast<char>(key);
    v.search_index = 0;
    return false;
  }
  if (v.full_log) {  // keys move through the log, not the ranks
    switch (key) {
      case 'q': case 'Q': return true;
      case kKeyUp: case 'k': ++v.log_scroll; v.search.clear(); return false;
      case kKeyDown: case 'j': v.log_scroll = std::max(0, v.log_scroll - 1); v.search.clear(); return false;
      case kKeyPageUp: v.log_scroll += std::max(page, 1); v.search.clear(); return false;
      case kKeyPageDown: v.log_scroll = std::max(0, v.log_scroll - std::max(page, 1)); v.search.clear(); return false;
      case kKeyEnd: case 'G': v.log_scroll = 0; v.search.clear(); return false;
      case '/': v.editing_search = true; v.search.clear(); v.search_index = 0; return false;
      case 'n': ++v.search_index; return false;
      case 'N': v.search_index = std::max(0, v.search_index - 1); return false;
      case 27: case '\n': case '\r': case kKeyEnter: v.full_log = false; v.search.clear(); v.log_scroll = 0; return false;
      default: break;  // the rest (p, ?, o) as in the rank view
    }
  }
  if (v.editing_filter) {
    if (key == '\n' || key == '\r' || key == kKeyEnter) v.editing_filter = false;
    else if (key == 27) v.editing_filter = false, v.filter.clear();
    else if ((key == kKeyBackspace || key == 127 || key == 8) && !v.filter.empty()) v.filter.pop_back();
    else if (key >= 0x20 && key < 0x7f) v.filter += static_cast<char>(key);
    v.selected = 0;
    return false;
  }
  int last = std::max(row_count - 1, 0);
  switch (key) {
    case 'q': case 'Q':
      if (v.help) {  // q leaves the help first
        v.help = false;
        return false;
      }
      return true;
    case kKeyUp: case 'k': v.selected = std::max(0, v.selected - 1); break;
    case kKeyDown: case 'j': v.selected = std::min(last, v.selected + 1); break;
    case kKeyPageUp: v.selected = std::max(0, v.selected - std::max(page, 1)); break;
    case kKeyPageDown: v.selected = std::min(last, v.selected + std::max(page, 1)); break;
    case '\n': case '\r': case kKeyEnter: v.full_log = !v.full_log; break;
    case 'p': v.paused = !v.paused; break;
    case '?': case 'h': v.help = !v.help; break;
    case '/': v.editing_filter = true; v.filter.clear(); break;
    case 'c': v.filter.clear(); break;
    case 'o': v.open_pager = true; break;
    default: break;
  }
  return false;
}

std::vector<std::string> Frame::Text() const {
  std::vector<std::string> lines(static_cast<size_t>(std::max(rows, 0)), std::string(static_cast<size_t>(std::max(cols, 0)), ' '));
  for (const auto& r : runs)
    if (r.y >= 0 && r.y < rows)
      for (size_t i = 0; i < r.text.size() && r.x + static_cast<int>(i) < cols; ++i) lines[r.y][r.x + i] = r.text[i];
  return lines;
}

Frame BuildFrame(const Snapshot& s, const Layout& l, const ViewState& v, const LogTails* logs, const Chrome& chrome) {
  Frame f;
  f.cols = l.header.width;
  f.rows = l.too_small ? l.header.height : l.help.y + l.help.height;
  Painter p(f);
  if (l.too_small) {
    p.Put(l.header, 0, 0, "dsdoctor: terminal too small (need 40x12)", Tone::kError);
    return f;
  }
  // Header: job, nodes, ranks, elapsed, step rate, overall state.
  char rate[48];
  std::snprintf(rate, sizeof rate, "%.2f steps/s", s.steps_per_s);
  p.Put(l.header, 0, 0, Pad(chrome.title + ": " + s.job, l.header.width), Tone::kTitle);
  // The overall state first: it is what matters most, and it survives a narrow terminal.
  Tone overall_tone = s.overall == "HUNG" || s.overall == "failed" ? Tone::kError : s.overall == "finished" ? Tone::kDim : Tone::kOk;
  // Before the first snapshot (a replay's header, a viewer that just attached) there is no state yet.
  std::string state = (s.overall.empty() ? std::string("starting") : s.overall) + (v.paused ? " [paused]" : "") + (chrome.note.empty() ? "" : " [" + chrome.note + "]");
  p.Put(l.header, 1, 0, state, overall_tone);
  p.Put(l.header, 1, static_cast<int>(state.size()),
        "  " + std::to_string(s.nodes) + " nodes  " + std::to_string(s.ranks) + " ranks (" + std::to_string(s.running) + " running)  " +
            Secs(s.elapsed_s) + "  step " + std::to_string(s.step) + "  " + rate,
        Tone::kNormal);

  if (v.help) {  // the keys take the whole body
    Rect body{l.ranks.x, l.ranks.y, l.header.width, l.help.y - l.ranks.y};
    std::vector<std::string> keys = {"keys",
                                     "  up/down, j/k     move (in the full log: scroll)",
                                     "  PgUp/PgDn        page",
                                     "  enter            the selected rank's log over the whole screen (again: back)",
                                     "  o                open the rank's log file in $PAGER (less +G)",
                                     "  /                filter the ranks (in the full log: search; n/N older/newer match)",
                                     "  c                clear the filter",
                                     "  p                pause the screen",
                                     "  ?                this help",
                                     "  q                " + chrome.quit_hint};
    if (!chrome.extra_keys.empty()) keys.push_back("  " + chrome.extra_keys);
    for (size_t i = 0; i < keys.size(); ++i) p.Put(body, static_cast<int>(i), 0, keys[i], i == 0 ? Tone::kTitle : Tone::kNormal);
    p.Put(l.help, 0, 0, Pad("? or q: back", l.help.width), Tone::kDim);
    return f;
  }
  Rect body_rank = l.ranks, body_log = l.log;
  if (v.full_log) {  // the selected rank's log takes the whole body
    body_log = {l.ranks.x, l.ranks.y, l.header.width, l.help.y - l.ranks.y};
    body_rank = {};
  }
  // Rank pane: per rank, or per equivalence class when the ranks do not fit.
  f.class_view = static_cast<int>(s.rows.size()) > std::max(l.ranks.height - 1, 1);
  std::vector<int> rows = VisibleRows(s, v, f.class_view);
  int sel = rows.empty() ? -1 : std::clamp(v.selected, 0, static_cast<int>(rows.size()) - 1);
  if (!body_rank.empty()) {
    p.Put(body_rank, 0, 0,
          Pad(f.class_view ? "ranks by state (" + std::to_string(s.classes.size()) + " classes)" : " rank node       state    call / phase            time",
              body_rank.width),
          Tone::kTitle);
    int visible = body_rank.height - 1;
    int first = std::clamp(v.scroll, 0, std::max(0, static_cast<int>(rows.size()) - visible));
    if (sel >= 0 && sel < first) first = sel;
    if (sel >= first + visible) first = sel - visible + 1;
    for (int i = 0; i < visible && first + i < static_cast<int>(rows.size()); ++i) {
      int idx = rows[first + i];
      std::string text;
      Tone tone;
      if (f.class_view) {
        const ClassRow& c = s.classes[idx];
        text = std::string(c.culprit ? "!" : " ") + Pad(std::to_string(c.ranks.size()), 5) + " " + Pad(diagnosis::FormatRanks(c.ranks), 12) + " " +
               c.description;
        tone = c.culprit ? Tone::kError : Tone::kNormal;
      } else {
        const RankRow& r = s.rows[idx];
        // '!' marks a rank a finding names (the culprit), first so that it survives narrow panes.
        text = std::string(r.culprit ? "!" : " ") + Pad(std::to_string(r.rank), 4) + " " + Pad(r.node, 10) + " " + Pad(r.state, 8) + " " +
               Pad(r.where, 23) + " " + Secs(r.in_state_s);
        tone = r.tone;
      }
      p.Put(body_rank, 1 + i, 0, Pad(text, body_rank.width), first + i == sel ? Tone::kSelected : tone);
    }
    if (rows.empty()) {
      std::string why = s.rows.empty() ? "(no rank has reported yet)" : "(no rank matches the filter '" + v.filter + "')";
      p.Put(body_rank, 1, 0, why, Tone::kDim);
    }
  }
  if (sel >= 0) f.selected_rank = f.class_view ? s.classes[rows[sel]].ranks.front() : rows[sel];

  // Findings: the pinpointed cause first, with its remedy.
  if (!v.full_log) {
    p.Put(l.findings, 0, 0, Pad("findings (" + std::to_string(s.findings.size()) + ")", l.findings.width), Tone::kTitle);
    int row = 1;
    if (s.findings.empty()) p.Put(l.findings, row, 0, "no problems found", Tone::kOk);
    for (const auto& fi : s.findings) {
      if (row >= l.findings.height) break;
      Tone t = fi.severity == diagnosis::Severity::kError ? Tone::kError : fi.severity == diagnosis::Severity::kWarning ? Tone::kWaiting : Tone::kNormal;
      for (const auto& w : Wrap(fi.code + " ranks " + diagnosis::FormatRanks(fi.ranks) + ": " + fi.summary, l.findings.width)) {
        if (row >= l.findings.height) break;
        p.Put(l.findings, row++, 0, w, t);
      }
      for (const auto& w : Wrap("fix: " + fi.remedy, l.findings.width - 2)) {
        if (row >= l.findings.height) break;
        p.Put(l.findings, row++, 2, w, Tone::kNormal);
      }
    }
  }
  // The selected rank's log tail; in the full view, scrolled and searched.
  if (!body_log.empty()) {
    const std::deque<std::string>* lines = logs ? logs->Find(f.selected_rank) : nullptr;
    int n = lines ? static_cast<int>(lines->size()) : 0;
    int room = body_log.height - 1;
    int end = n;  // one past the last line shown
    std::vector<int> matches;  // newest first
    if (v.full_log) {
      end = std::max(std::min(n, room), n - v.log_scroll);
      if (!v.search.empty()) {
        for (int i = n - 1; i >= 0; --i)
          if ((*lines)[i].find(v.search) != std::string::npos) matches.push_back(i);
        f.search_matches = static_cast<int>(matches.size());
        if (!matches.empty()) {
          int hit = matches[std::min<size_t>(v.search_index, matches.size() - 1)];
          end = std::clamp(hit + room / 2 + 1, std::min(n, room), n);
        }
      }
    }
    int start = std::max(0, end - room);
    std::string title = f.selected_rank >= 0 ? "log of rank " + std::to_string(f.selected_rank) : "log";
    if (v.full_log && n > 0) title += "  lines " + std::to_string(start + 1) + "-" + std::to_string(end) + " of last " + std::to_string(n);
    if (!v.search.empty()) title += "  '" + v.search + "': " + std::to_string(matches.size()) + " lines";
    p.Put(body_log, 0, 0, Pad(title, body_log.width), Tone::kTitle);
    for (int i = start; i < end; ++i) {
      bool hit = !v.search.empty() && (*lines)[i].find(v.search) != std::string::npos;
      p.Put(body_log, 1 + i - start, 0, (*lines)[i], hit ? Tone::kWaiting : Tone::kNormal);
    }
  }
  // Help line.
  std::string help;
  if (v.editing_filter) help = "filter: " + v.filter + "_   (enter: keep, esc: clear)";
  else if (v.editing_search) help = "search: " + v.search + "_   (enter: keep, esc: clear)";
  else if (v.full_log) help = "q quit  up/down/PgUp/PgDn scroll  G end  / search  n/N older/newer match  enter back";
  else help = "q quit  up/down move  enter log  o pager  / filter  p pause  ? help" + std::string(v.filter.empty() ? "" : "  filter: " + v.filter);
  p.Put(l.help, 0, 0, Pad(help, l.help.width), Tone::kDim);
  return f;
}

}  // namespace dsd::tui
