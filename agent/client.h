// The coordinator's side of one agent connection: authenticates with the job token, then sends
// requests and waits for their replies. One request at a time; not thread-safe (one per thread).
#pragma once

#include <string>

#include "common/net.h"

namespace dsd::agent {

class AgentClient {
 public:
  // Connects and completes the hello/welcome exchange; a refused token is kPermissionDenied.
  static Result<AgentClient> Connect(const net::Endpoint& endpoint, const std::string& token, Duration timeout);

  // Sends `request` and returns the reply; an {"type":"error"} reply becomes a Status.
  Result<nlohmann::json> Call(nlohmann::json request, Duration timeout);

  const std::string& agent_name() const { return agent_name_; }
  // Streams (a "run" job): the socket, for one reader thread and one writer thread at a time.
  int fd() const { return fd_.get(); }
  wire::FrameDecoder& decoder() { return decoder_; }

 private:
  net::Fd fd_;
  wire::FrameDecoder decoder_;
  std::string agent_name_;
  int next_id_ = 1;
};

}  // namespace dsd::agent
