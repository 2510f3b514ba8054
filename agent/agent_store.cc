#include "agent/agent_store.h"

#include <stdexcept>

#include "common/log.h"
#include "common/strings.h"

namespace dsd::agent {

// gloo expects failures as exceptions; these cross back into gloo only.
Result<std::unique_ptr<AgentStore>> AgentStore::Connect(const net::Endpoint& master, const std::string& token,
                                                        const std::string& run, Duration timeout) {
  DSD_ASSIGN_OR_RETURN(AgentClient client, AgentClient::Connect(master, token, timeout));
  return std::unique_ptr<AgentStore>(new AgentStore(std::move(client), run, timeout));
}

void AgentStore::set(const std::string& key, const std::vector<char>& data) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = client_.Call(
      {{"type", "kv_set"}, {"key", run_ + "/" + key}, {"value", HexEncode(std::string_view(data.data(), data.size()))}},
      timeout_);
  if (!r.ok()) throw std::runtime_error("store set " + key + ": " + r.status().message());
}

nlohmann::json AgentStore::Get(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(run_ + "/" + k);
  std::lock_guard<std::mutex> lock(mu_);
  auto r = client_.Call({{"type", "kv_get"}, {"keys", full}, {"timeout_ms", timeout.count()}},
                        timeout + std::chrono::seconds(5));
  if (!r.ok()) throw std::runtime_error("store wait: " + r.status().message());
  return (*r)["values"];
}

std::vector<char> AgentStore::get(const std::string& key) {
  auto values = Get({key}, std::chrono::duration_cast<std::chrono::milliseconds>(timeout_));
  std::string raw;
  if (!values.contains(run_ + "/" + key) || !HexDecode(values[run_ + "/" + key].get<std::string>(), &raw)) {
    throw std::runtime_error("store get " + key + ": malformed reply");
  }
  return std::vector<char>(raw.begin(), raw.end());
}

void AgentStore::wait(const std::vector<std::string>& keys) {
  Get(keys, std::chrono::duration_cast<std::chrono::milliseconds>(timeout_));
}

void AgentStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  Get(keys, timeout);
}

}  // namespace dsd::agent
