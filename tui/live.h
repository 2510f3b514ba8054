// Where the live view's events go and come from (docs/tui.md, "Event stream").
//
// Publisher (the coordinator, `dsdoctor run`): appends every event to <log-dir>/events.jsonl
// (one JSON object a line, written as it happens, so a killed run leaves a replayable file; a
// write that fails, as on a full disk, ends the recording with a `recording_stopped` line naming
// the error, written into space reserved ahead for it, and the run goes on unrecorded) and
// serves it to viewers (`dsdoctor tui --attach`) on a TLS link keyed by the viewer token
// (common/tls_link.h; handshakes run in the accept loop with bounded work). A new viewer
// first gets a keyframe (header, full tick, log tails), then the events as they come. A viewer
// that falls 32 MiB behind is dropped rather than slowing the job's coordinator. Publish is
// called from one thread; viewers are served by their own threads. The destructor closes all.
//
// LiveClient (the viewer): connects, authenticates with the token (which never travels), then
// reads events.
//
// ReadEventFile: a recording, validated line by line for --replay; a `recording_stopped` line
// ends it with a warning that says why.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/net.h"
#include "common/status.h"
#include "common/tls_link.h"
#include "tui/stream.h"

namespace dsd::tui {

class Publisher {
 public:
  struct Options {
    std::string record_path;  // "" = do not record
    std::string serve;        // "ADDR:PORT" to serve viewers on (port 0: any free one); "" = do not serve
    std::string token;        // viewers must hold it
    size_t max_viewers = 16;
  };
  static Result<std::unique_ptr<Publisher>> Start(const Options& options);
  ~Publisher();
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  void Publish(const std::vector<nlohmann::json>& events);
  // Where viewers connect (port 0 when not serving).
  net::Endpoint endpoint() const { return endpoint_; }
  size_t viewers() const;

 private:
  struct Viewer {
    net::Link link;
    bool open = false;              // until its thread ends; guarded by mu_
    std::deque<std::string> queue;  // encoded frames
    size_t queued_bytes = 0;
    bool dropped = false;
  };
  Publisher() = default;
  void AcceptLoop();
  void ServeViewer(std::shared_ptr<Viewer> v, std::string peer);

  Options options_;
  // Publish appends whole lines; record_bytes_ of them are on disk, and the kRecordReserve bytes
  // after them are allocated ahead (fallocate, size kept), so the stop line always fits.
  void Record(const std::vector<nlohmann::json>& events);
  net::Fd record_;
  uint64_t record_bytes_ = 0;
  uint64_t record_reserved_to_ = 0;  // the file's blocks are allocated up to here
  bool record_failed_ = false;
  net::Fd listener_;
  net::Endpoint endpoint_;
  std::thread acceptor_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  StreamDecoder state_;  // what a new viewer's keyframe describes
  std::vector<std::shared_ptr<Viewer>> viewers_;
  std::vector<std::thread> viewer_threads_;
};

class LiveClient {
 public:
  // Connects and authenticates; a wrong token is kPermissionDenied with the coordinator's words.
  static Result<LiveClient> Connect(const net::Endpoint& endpoint, const std::string& token, Duration timeout);
  // The next event; kTimeout when none came within `timeout`, kUnavailable when the coordinator
  // closed the stream (the run ended).
  Result<nlohmann::json> Next(Duration timeout);

 private:
  net::Link link_;
  wire::FrameDecoder decoder_;
};

// A recording, one event a line. Errors name the file and line. A last line cut short (the run
// was killed while writing) is dropped with a warning in *warnings rather than failing.
struct RecordedEvent {
  int line = 0;
  nlohmann::json event;
};
Result<std::vector<RecordedEvent>> ReadEventFile(const std::string& path, std::vector<std::string>* warnings);

}  // namespace dsd::tui
