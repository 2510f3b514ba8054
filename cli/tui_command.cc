// `dsdoctor tui` (docs/tui.md): the live view of a running `dsdoctor run` (--attach) or of a
// recorded one (--replay). Both read the run's event stream (tui/stream.h) into a StreamDecoder
// and draw it with the same frame builder and keys as `dsdoctor run --tui`; --dump prints one
// frame as text instead (scripts, CI logs, no terminal).
#include <atomic>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "agent/token.h"
#include "cli/commands.h"
#include "common/file.h"
#include "common/run_files.h"
#include "common/strings.h"
#include "tui/live.h"
#include "tui/stream.h"
#include "tui/view.h"

namespace dsd::cli {
namespace {

// An event's "type", or "" when it has none or not as a string (a recording may be anything).
std::string TypeOf(const nlohmann::json& e) {
  const auto t = e.is_object() ? e.find("type") : e.end();
  return t != e.end() && t->is_string() ? t->get<std::string>() : "";
}

namespace fs = std::filesystem;
using nlohmann::json;

Result<std::pair<int, int>> ParseSize(const std::string& text) {
  int cols = 0, rows = 0;
  char x = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &cols, &x, &rows, &extra) != 3 || (x != 'x' && x != 'X') || cols < 1 ||
      rows < 1 || cols > 1000 || rows > 1000)
    return InvalidArgument("--size " + text + ": expected COLSxROWS, e.g. 100x30");
  return std::pair{cols, rows};
}

void PrintFrame(const tui::StreamDecoder& d, const tui::Chrome& chrome, int cols, int rows) {
  tui::Frame f = tui::BuildFrame(d.snapshot(), tui::ComputeLayout(cols, rows), {}, &d.logs(), chrome);
  for (auto line : f.Text()) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  }
  std::cout.flush();
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

// A recording and a position in it. Going back replays from the start (a decoder applies a
// 4,096-rank tick in about a millisecond, so a seek is quick).
class Player {
 public:
  Player(std::vector<tui::RecordedEvent> events, std::string path)
      : events_(std::move(events)), path_(std::move(path)) {
    double t = 0;
    for (const auto& e : events_) {
      // Validate() names a "t" that is not a number; until then it counts as no time at all.
      auto it = e.event.is_object() ? e.event.find("t") : e.event.end();
      times_.push_back(t = std::max(t, it != e.event.end() && it->is_number() ? it->get<double>() : 0.0));
    }
  }
  // Every event must apply; the first must be the header. Errors name the file and line.
  Status Validate() {
    if (events_.empty()) return InvalidArgument(path_ + ": no events (is it a dsdoctor run's events.jsonl?)");
    if (TypeOf(events_[0].event) != "header")
      return InvalidArgument(path_ + ":" + std::to_string(events_[0].line) + ": the first event is not a header");
    tui::StreamDecoder d;
    for (const auto& e : events_)
      if (Status st = d.Apply(e.event); !st.ok())
        return InvalidArgument(path_ + ":" + std::to_string(e.line) + ": " + st.message());
    return Status::Ok();
  }
  void SeekTo(double t) {
    if (t < t_) {
      dec_ = tui::StreamDecoder();
      next_ = 0;
    }
    while (next_ < events_.size() && times_[next_] <= t) (void)dec_.Apply(events_[next_++].event);
    t_ = t;
  }
  double end_t() const { return times_.empty() ? 0 : times_.back(); }
  const tui::StreamDecoder& state() const { return dec_; }

 private:
  std::vector<tui::RecordedEvent> events_;
  std::string path_;
  std::vector<double> times_;  // running maximum of each event's t
  size_t next_ = 0;
  double t_ = 0;
  tui::StreamDecoder dec_;
};

int Replay(const TuiOptions& o) {
  std::string path = o.replay;
  std::error_code ec;
  if (fs::is_directory(path, ec)) path = RunDir(path).Events();
  std::vector<std::string> warnings;
  auto events = tui::ReadEventFile(path, &warnings);
  if (!events.ok()) {
    std::cerr << "dsdoctor tui: " << events.status().message() << "\n";
    return kExitUsage;
  }
  for (const auto& w : warnings) std::cerr << "dsdoctor tui: warning: " << w << "\n";
  Player player(std::move(*events), path);
  if (Status st = player.Validate(); !st.ok()) {
    std::cerr << "dsdoctor tui: " << st.message() << "\n";
    return kExitUsage;
  }
  const std::string log_dir = fs::path(path).parent_path().string();
  tui::Chrome chrome{"dsdoctor replay", "", "quit",
                     "left/right  seek 5 s back/on   < >  half/double speed   home/end  start/end"};
  double pos = o.at >= 0 ? std::min(o.at, player.end_t()) : o.dump ? player.end_t() : 0;
  if (o.dump) {
    auto size = ParseSize(o.size);  // checked in RunTui
    player.SeekTo(pos);
    chrome.note = "replay " + Seconds(pos) + "/" + Seconds(player.end_t());
    PrintFrame(player.state(), chrome, size->first, size->second);
    return kExitOk;
  }
  auto view = tui::View::Open();
  if (!view.ok()) {
    std::cerr << "dsdoctor tui: " << view.status().message() << " (--dump prints a frame without one)\n";
    return kExitUsage;
  }
  double speed = o.speed;
  tui::ViewState vs;
  auto last = std::chrono::steady_clock::now();
  auto extra = [&](int key) {
    switch (key) {
      case tui::kKeyLeft:
        pos = std::max(0.0, pos - 5);
        return true;
      case tui::kKeyRight:
        pos = std::min(player.end_t(), pos + 5);
        return true;
      case '<':
        speed = std::max(0.01, speed / 2);
        return true;
      case '>':
        speed = std::min(1000.0, speed * 2);
        return true;
      case tui::kKeyHome:
        pos = 0;
        return true;
      case tui::kKeyEnd:
        pos = player.end_t();
        return true;
      default:
        return false;
    }
  };
  while (true) {
    auto now = std::chrono::steady_clock::now();
    if (!vs.paused) pos = std::min(player.end_t(), pos + std::chrono::duration<double>(now - last).count() * speed);
    last = now;
    player.SeekTo(pos);
    char note[96];
    std::snprintf(note, sizeof note, "replay %s/%s x%g%s", Seconds(pos).c_str(), Seconds(player.end_t()).c_str(), speed,
                  pos >= player.end_t() ? " end" : "");
    chrome.note = note;
    if (tui::Interact(**view, player.state().snapshot(), &player.state().logs(), vs, chrome,
                      now + std::chrono::milliseconds(200), log_dir, extra))
      return kExitOk;
  }
}

// Events from a coordinator, read by a thread of their own; the main thread applies them.
class AttachedStream {
 public:
  explicit AttachedStream(tui::LiveClient client) : client_(std::move(client)) {
    reader_ = std::thread([this] {
      while (!stop_) {
        auto e = client_.Next(std::chrono::milliseconds(300));
        if (!e.ok()) {
          if (e.status().code() == StatusCode::kTimeout) continue;
          std::lock_guard<std::mutex> lock(mu_);
          closed_ = e.status().message();
          return;
        }
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(*e));
      }
    });
  }
  ~AttachedStream() {
    stop_ = true;
    reader_.join();
  }
  // Applies what arrived; false once the stream has ended (the reason in *closed).
  bool Drain(tui::StreamDecoder& dec, std::string* closed) {
    std::deque<json> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(queue_);
      *closed = closed_;
    }
    for (const auto& e : batch) (void)dec.Apply(e);
    return closed->empty();
  }

 private:
  tui::LiveClient client_;
  std::thread reader_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::deque<json> queue_;
  std::string closed_;
};

// When the run that used `log_dir` has ended (its recording's last event is `end`), the hint that
// says so and how to look at it instead; empty otherwise.
std::string EndedRunHint(const std::string& log_dir) {
  std::vector<std::string> warnings;
  auto events = tui::ReadEventFile(RunDir(log_dir).Events(), &warnings);
  if (!events.ok() || events->empty() || TypeOf(events->back().event) != "end") return "";
  return "the run in " + log_dir + " has ended (code " + std::to_string(events->back().event.value("code", 0)) +
         "); replay it: dsdoctor tui --replay " + log_dir;
}

int Attach(const TuiOptions& o) {
  std::string address = o.attach, token_file = o.token_file, log_dir;
  std::error_code ec;
  if (fs::is_directory(o.attach, ec)) {  // a run's log dir: its viewer.addr and viewer.token
    log_dir = o.attach;
    auto addr = ReadFile(RunDir(o.attach).ViewerAddr());
    if (!addr.ok()) {
      std::string hint = EndedRunHint(log_dir);
      if (!hint.empty()) {
        std::cerr << "dsdoctor tui: " << hint << "\n";
        return kExitProblems;
      }
      std::cerr << "dsdoctor tui: " << addr.status().message()
                << " (is a dsdoctor run using this log dir, without --serve off?)\n";
      return kExitUsage;
    }
    address = std::string(Trim(*addr));
    if (token_file.empty()) token_file = RunDir(o.attach).ViewerToken();
  }
  auto endpoint = net::ParseEndpoint(address);
  if (!endpoint.ok()) {
    std::cerr << "dsdoctor tui: --attach: " << endpoint.status().message() << "\n";
    return kExitUsage;
  }
  if (token_file.empty()) {
    std::cerr << "dsdoctor tui: --attach HOST:PORT needs --token-file (the run's <log-dir>/viewer.token)\n";
    return kExitUsage;
  }
  auto token = agent::LoadTokenFile(token_file);
  if (!token.ok()) {
    std::cerr << "dsdoctor tui: " << token.status().message() << "\n";
    return kExitUsage;
  }
  auto client = tui::LiveClient::Connect(*endpoint, *token, std::chrono::seconds(5));
  if (!client.ok()) {
    std::string hint = log_dir.empty() ? "" : EndedRunHint(log_dir);
    std::cerr << "dsdoctor tui: " << client.status().message() << (hint.empty() ? "" : ": " + hint) << "\n";
    return kExitProblems;
  }
  tui::StreamDecoder dec;
  tui::Chrome chrome{"dsdoctor attach", "attached " + endpoint->ToString(), "quit (detaches; the job runs on)", ""};
  if (o.dump) {
    auto size = ParseSize(o.size);  // checked in RunTui
    // The keyframe comes at once: read until a tick is in and the stream pauses.
    bool ticked = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      auto e = client->Next(std::chrono::milliseconds(ticked ? 100 : 2000));
      if (!e.ok()) break;
      (void)dec.Apply(*e);
      ticked |= TypeOf(*e) == "tick";
    }
    if (!ticked) {
      std::cerr << "dsdoctor tui: the coordinator at " << endpoint->ToString() << " sent no state\n";
      return kExitProblems;
    }
    PrintFrame(dec, chrome, size->first, size->second);
    return kExitOk;
  }
  auto view = tui::View::Open();
  if (!view.ok()) {
    std::cerr << "dsdoctor tui: " << view.status().message() << " (--dump prints a frame without one)\n";
    return kExitUsage;
  }
  AttachedStream stream(std::move(*client));
  tui::ViewState vs;
  tui::Snapshot shown;
  tui::LogTails shown_logs;
  std::string closed;
  while (true) {
    bool open = stream.Drain(dec, &closed);
    if (dec.ended())
      chrome.note = "the run ended, code " + std::to_string(dec.end_code());
    else if (!open)
      chrome.note = "disconnected: " + closed;
    const tui::Snapshot& s = vs.paused ? shown : dec.snapshot();
    if (!vs.paused) shown = dec.snapshot();
    bool was_paused = vs.paused;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    if (tui::Interact(**view, s, was_paused ? &shown_logs : &dec.logs(), vs, chrome, until, log_dir)) return kExitOk;
    if (vs.paused && !was_paused) shown_logs = dec.logs();
  }
}

}  // namespace

int RunTui(const TuiOptions& o) {
  if (auto size = ParseSize(o.size); !size.ok()) {
    std::cerr << "dsdoctor tui: " << size.status().message() << "\n";
    return kExitUsage;
  }
  return o.replay.empty() ? Attach(o) : Replay(o);
}

}  // namespace dsd::cli
