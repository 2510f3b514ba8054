#include "tui/live.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "agent/token.h"
#include "common/log.h"

namespace dsd::tui {
namespace {

using nlohmann::json;

constexpr size_t kMaxQueuedBytes = 32u << 20;
constexpr off_t kRecordReserve = 4096;  // room kept allocated past the end for the stop line

// Reserves the blocks of [at, at + kRecordReserve) without changing the file's size (best effort:
// a file system without fallocate gets no reserve).
bool Reserve(int fd, uint64_t at) {
  return ::fallocate(fd, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(at), kRecordReserve) == 0;
}
constexpr size_t kStopLineMax = 512;  // what the stop line needs of the room

std::string Line(const json& e) { return e.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

}  // namespace

Result<std::unique_ptr<Publisher>> Publisher::Start(const Options& options) {
  std::unique_ptr<Publisher> p(new Publisher());
  p->options_ = options;
  if (!options.record_path.empty()) {
    p->record_ = net::Fd(::open(options.record_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
    if (!p->record_.valid()) return ErrnoError("cannot create " + options.record_path, errno);
    if (Reserve(p->record_.get(), 0)) p->record_reserved_to_ = kRecordReserve;
  }
  if (!options.serve.empty()) {
    auto parsed = net::ParseEndpoint(options.serve);
    if (!parsed.ok()) return InvalidArgument("--serve " + options.serve + ": " + parsed.status().message());
    net::Endpoint want = *parsed;
    int port = 0;
    auto l = net::Listen(want.host, want.port, &port);
    if (!l.ok()) return l.status().WithContext("--serve " + options.serve);
    p->listener_ = std::move(*l);
    p->endpoint_ = {want.host, port};
    Publisher* raw = p.get();
    p->acceptor_ = std::thread([raw] { raw->AcceptLoop(); });
  }
  return p;
}

Publisher::~Publisher() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
    // Viewers get what was published last (the final tick and `end`) for up to a second; then
    // the sockets are shut, which also frees a thread stuck sending to a viewer that stopped reading.
    cv_.wait_for(lock, std::chrono::seconds(1), [&] {
      for (const auto& v : viewers_)
        if (v->open) return false;
      return true;
    });
    for (auto& v : viewers_)
      if (v->open) v->link.Shutdown();
  }
  cv_.notify_all();
  if (acceptor_.joinable()) acceptor_.join();
  for (auto& t : viewer_threads_) t.join();
}

size_t Publisher::viewers() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& v : viewers_) n += v->open && !v->dropped;
  return n;
}

void Publisher::Record(const std::vector<json>& events) {
  std::string lines;
  for (const auto& e : events) lines += Line(e);
  // The batch's blocks and the next stop line's are allocated before a byte is written, so the room
  // kept for the stop line after the last good batch is never spent: when this fails (the disk is
  // full), nothing of the batch is written and the stop line goes into that room.
  size_t done = 0;
  errno = 0;
  const uint64_t want = record_bytes_ + lines.size() + kRecordReserve;
  if (::fallocate(record_.get(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(record_bytes_),
                  static_cast<off_t>(lines.size()) + kRecordReserve) == 0) {
    record_reserved_to_ = std::max(record_reserved_to_, want);
  } else if (errno != EOPNOTSUPP && errno != ENOSYS &&
             record_bytes_ + lines.size() + kStopLineMax > record_reserved_to_) {
    lines.clear();  // it would eat the stop line's room: nothing of it is written
    done = 1;       // never equal: the failure path below
  }
  while (done < lines.size()) {
    ssize_t n =
        ::pwrite(record_.get(), lines.data() + done, lines.size() - done, static_cast<off_t>(record_bytes_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (done == lines.size()) {  // a killed run still leaves every tick so far on disk
    record_bytes_ += done;
    return;
  }
  // A full disk (or any failed write) costs the recording, once said, never the run: the partial
  // lines are replaced by the stop line, in the reserved room, and the file ends there.
  const int err = errno && errno != EOPNOTSUPP ? errno : ENOSPC;
  record_failed_ = true;
  double t = 0;
  if (!events.empty() && events.front().is_object() && events.front().contains("t") && events.front()["t"].is_number())
    t = events.front()["t"].get<double>();
  const std::string stop = Line({{"type", "recording_stopped"}, {"t", t}, {"reason", std::strerror(err)}});
  const bool wrote = ::pwrite(record_.get(), stop.data(), stop.size(), static_cast<off_t>(record_bytes_)) ==
                     static_cast<ssize_t>(stop.size());
  if (wrote) record_bytes_ += stop.size();
  (void)::ftruncate(record_.get(), static_cast<off_t>(record_bytes_));
  log::Get("tui")->warn("{}: {}; the recording of the live view stops here (the run goes on)", options_.record_path,
                        std::strerror(err));
}

void Publisher::Publish(const std::vector<json>& events) {
  if (record_.valid() && !record_failed_) {
    errno = 0;
    Record(events);
  }
  if (!listener_.valid()) return;
  std::vector<std::string> frames;
  for (const auto& e : events)
    if (auto f = wire::EncodeFrame(e); f.ok()) frames.push_back(std::move(*f));
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& e : events)
    if (Status st = state_.Apply(e); !st.ok())
      log::Get("tui")->debug("event not applied to the keyframe state: {}", st.message());
  for (auto& v : viewers_) {
    if (v->dropped) continue;
    for (const auto& f : frames) {
      v->queue.push_back(f);
      v->queued_bytes += f.size();
    }
    if (v->queued_bytes > kMaxQueuedBytes) {
      log::Get("tui")->warn("a viewer fell {} MiB behind; dropping it", v->queued_bytes >> 20);
      v->dropped = true;
      v->link.Shutdown();
    }
  }
  cv_.notify_all();
}

void Publisher::AcceptLoop() {
  net::AcceptorOptions o;
  o.key = net::LinkKey::FromToken(options_.token);
  o.what = "viewer port";
  net::HandshakeAcceptor acceptor(listener_.get(), o, [this](net::Link link, const std::string& peer) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t live = 0;
    for (const auto& v : viewers_) live += v->open && !v->dropped;
    if (live >= options_.max_viewers) {
      log::Get("tui")->warn("refusing viewer {}: {} viewers already", peer, live);
      return;  // closes the link
    }
    auto v = std::make_shared<Viewer>();
    v->link = std::move(link);
    v->open = true;
    viewers_.push_back(v);
    viewer_threads_.emplace_back([this, v, peer] { ServeViewer(v, peer); });
  });
  while (!stop_) acceptor.Poll(std::chrono::milliseconds(200));
}

void Publisher::ServeViewer(std::shared_ptr<Viewer> v, std::string peer) {
  auto log = log::Get("tui");
  wire::FrameDecoder decoder;
  if (Status st = agent::AcceptHello(v->link, decoder, std::chrono::seconds(5), "coordinator"); !st.ok()) {
    log->warn("viewer {} sent no hello: {}", peer, st.message());
    std::lock_guard<std::mutex> lock(mu_);
    v->dropped = true;
    v->queue.clear();
    v->open = false;
    v->link = net::Link();
    cv_.notify_all();
    return;
  }
  log->info("viewer {} attached", peer);
  {
    // The keyframe goes first, ahead of anything published after this moment.
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<std::string> first;
    for (const auto& e : state_.Keyframe())
      if (auto f = wire::EncodeFrame(e); f.ok()) first.push_back(std::move(*f));
    v->queue.clear();
    v->queued_bytes = 0;
    for (auto& f : first) v->queued_bytes += f.size();
    v->queue = std::move(first);
  }
  while (true) {
    std::deque<std::string> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || v->dropped || !v->queue.empty(); });
      if (v->dropped) break;
      if (v->queue.empty() && stop_) break;
      batch.swap(v->queue);
      v->queued_bytes = 0;
    }
    bool ok = true;
    for (const auto& f : batch)
      if (!v->link.Send(f).ok()) {
        ok = false;
        break;
      }
    if (!ok) break;
  }
  log->info("viewer {} detached", peer);
  std::lock_guard<std::mutex> lock(mu_);
  v->dropped = true;
  v->queue.clear();
  v->open = false;
  v->link = net::Link();
  cv_.notify_all();  // the destructor waits for viewers to finish
}

Result<LiveClient> LiveClient::Connect(const net::Endpoint& endpoint, const std::string& token, Duration timeout) {
  auto c = net::Connect(endpoint.host, endpoint.port, timeout);
  if (c.outcome != net::ConnectOutcome::kOk)
    return Unavailable("coordinator at " + endpoint.ToString() + ": connect " + net::ConnectOutcomeName(c.outcome) +
                       " (" + c.error + ")");
  LiveClient client;
  auto link = net::Link::Connect(std::move(c.fd), net::LinkKey::FromToken(token), timeout);
  if (!link.ok()) return link.status().WithContext("coordinator at " + endpoint.ToString());
  client.link_ = std::move(link).value();
  DSD_RETURN_IF_ERROR(net::SendFrame(client.link_, {{"type", "hello"}, {"role", "viewer"}}));
  auto reply = net::RecvFrame(client.link_, client.decoder_, timeout);
  if (!reply.ok()) return reply.status().WithContext("coordinator at " + endpoint.ToString());
  if (reply->value("type", "") != "welcome")
    return PermissionDenied("coordinator at " + endpoint.ToString() +
                            " refused us: " + reply->value("message", reply->dump()));
  return client;
}

Result<json> LiveClient::Next(Duration timeout) { return net::RecvFrame(link_, decoder_, timeout); }

Result<std::vector<RecordedEvent>> ReadEventFile(const std::string& path, std::vector<std::string>* warnings) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError("cannot open " + path, errno);
  std::vector<RecordedEvent> events;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    bool unterminated = in.eof();  // getline met the end before a newline
    if (line.empty()) continue;
    auto j = wire::ParseJsonBounded(line);
    if (!j.ok() || !j->is_object()) {
      if (unterminated) {  // cut short by a kill
        warnings->push_back(path + ":" + std::to_string(lineno) +
                            ": last line is incomplete (the run was killed while writing it); ignored");
        break;
      }
      return InvalidArgument(path + ":" + std::to_string(lineno) + ": not a JSON object" +
                             (j.ok() ? "" : " (" + j.status().message() + ")"));
    }
    const auto type = j->find("type");
    if (type != j->end() && type->is_string() &&
        type->get_ref<const std::string&>() == "recording_stopped") {  // the writer's own end (Publisher::Record)
      const auto reason = j->find("reason");
      warnings->push_back(path + ":" + std::to_string(lineno) + ": the recording stops here: " +
                          (reason != j->end() && reason->is_string() ? reason->get<std::string>() : "a write failed") +
                          " (the run went on unrecorded; its report is in run.json)");
      break;
    }
    events.push_back({lineno, std::move(*j)});
  }
  if (in.bad()) return ErrnoError("cannot read " + path, errno);
  return events;
}

}  // namespace dsd::tui
