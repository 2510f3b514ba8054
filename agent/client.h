// The coordinator's side of one agent connection: a TLS link keyed by the job token (the token
// never travels), then requests and their replies. One request at a time; not thread-safe (one
// per thread), except that a "run" stream may have one reader and one writer (see link()).
#pragma once

#include <string>

#include "common/net.h"
#include "common/tls_link.h"

namespace dsd::agent {

class AgentClient {
 public:
  // Connects and completes the hello/welcome exchange; a refused token is kPermissionDenied.
  static Result<AgentClient> Connect(const net::Endpoint& endpoint, const std::string& token, Duration timeout);

  // Sends `request` and returns the reply; an {"type":"error"} reply becomes a Status.
  Result<nlohmann::json> Call(nlohmann::json request, Duration timeout);

  const std::string& agent_name() const { return agent_name_; }
  // Streams (a "run" job): the link, for one reader thread and any writer threads at a time.
  net::Link& link() { return link_; }
  wire::FrameDecoder& decoder() { return decoder_; }

 private:
  net::Link link_;
  wire::FrameDecoder decoder_;
  std::string agent_name_;
  int next_id_ = 1;
};

}  // namespace dsd::agent
