// The coordinator's side of one agent connection: a TLS link keyed by the job token (the token
// never travels), then requests and their replies. One request at a time; not thread-safe (one
// per thread), except that a "run" stream may have one reader and one writer (see link()).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/net.h"
#include "common/tls_link.h"

namespace dsd::agent {

class AgentClient {
 public:
  // Connects and completes the hello/welcome exchange; a refused token is kPermissionDenied.
  // `outcome`, when given, receives how the TCP connect ended (kRefused: nothing listens there).
  static Result<AgentClient> Connect(const net::Endpoint& endpoint, const std::string& token, Duration timeout,
                                     net::ConnectOutcome* outcome = nullptr);

  // Sends `request` and returns the reply; an {"type":"error"} reply becomes a Status.
  Result<nlohmann::json> Call(nlohmann::json request, Duration timeout);

  // A call split in two, for one poll loop over many agents (CallAll): Send a request text that
  // carries a fresh id (NewId), then TryReply whenever the link is readable.
  int NewId() { return next_id_++; }
  Status SendText(std::string_view request_json);
  // Decodes what has arrived without waiting: the reply to `id` once complete (an error reply as
  // a Status), std::nullopt while incomplete.
  Result<std::optional<nlohmann::json>> TryReply(int id);

  const std::string& agent_name() const { return agent_name_; }
  const net::Endpoint& endpoint() const { return endpoint_; }
  // Streams (a "run" job): the link, for one reader thread and any writer threads at a time.
  net::Link& link() { return link_; }
  wire::FrameDecoder& decoder() { return decoder_; }

 private:
  net::Link link_;
  wire::FrameDecoder decoder_;
  std::string agent_name_;
  net::Endpoint endpoint_;
  int next_id_ = 1;
};

// One request to each of many agents, every reply handed to `on_reply(i, reply)` on the calling
// thread as it arrives (one epoll loop; a reply is dropped once handled, so thousands of large
// replies are never held at once). `request_text(i, id)` returns the JSON object text for
// clients[i] carrying `id`; null clients are skipped. A reply missing after `timeout` is kTimeout.
void CallEach(const std::vector<AgentClient*>& clients, const std::function<std::string(size_t, int)>& request_text,
              Duration timeout, const std::function<void(size_t, Result<nlohmann::json>)>& on_reply);

// CallEach collecting the replies: one request to each of many agents, every reply collected in one poll loop on the
// calling thread, so a phase takes as long as its slowest agent with no thread per agent. `request_text(i, id)` returns
// the JSON object text for clients[i] carrying `id` (null clients are skipped; their result is kUnavailable). A reply
// missing after `timeout` is kTimeout.
std::vector<Result<nlohmann::json>> CallAll(const std::vector<AgentClient*>& clients,
                                            const std::function<std::string(size_t, int)>& request_text,
                                            Duration timeout);

// Runs fn(0) … fn(n-1) on at most `max_threads` threads (the calling one included): bounded
// concurrency for blocking per-node work such as connecting to thousands of agents.
void ParallelFor(size_t n, size_t max_threads, const std::function<void(size_t)>& fn);

}  // namespace dsd::agent
