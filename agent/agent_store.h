// A gloo::rendezvous::Store backed by an agent's key-value service ("kv_set"/"kv_get", see
// docs/agent-protocol.md): the master node's agent holds the keys, every rank's agent connects to
// it with the job token. Calls are serialised on one connection (a mutex), so it is thread-safe.
#pragma once

#include <gloo/rendezvous/store.h>

#include <mutex>
#include <string>
#include <vector>

#include "agent/client.h"

namespace dsd::agent {

class AgentStore final : public gloo::rendezvous::Store {
 public:
  // Keys are prefixed with `run` so that probes of different runs never see each other's keys.
  static Result<std::unique_ptr<AgentStore>> Connect(const net::Endpoint& master, const std::string& token,
                                                     const std::string& run, Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  AgentStore(AgentClient client, std::string run, Duration timeout)
      : client_(std::move(client)), run_(std::move(run)), timeout_(timeout) {}
  nlohmann::json Get(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  std::mutex mu_;
  AgentClient client_;
  std::string run_;
  Duration timeout_;
};

}  // namespace dsd::agent
