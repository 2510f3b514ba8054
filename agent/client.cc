#include "agent/client.h"

#include "common/log.h"

namespace dsd::agent {

Result<AgentClient> AgentClient::Connect(const net::Endpoint& endpoint, const std::string& token, Duration timeout) {
  auto c = net::Connect(endpoint.host, endpoint.port, timeout);
  if (c.outcome != net::ConnectOutcome::kOk) {
    return Unavailable("agent at " + endpoint.ToString() + ": connect " + net::ConnectOutcomeName(c.outcome) + " (" +
                       c.error + ")");
  }
  AgentClient client;
  auto link = net::Link::Connect(std::move(c.fd), net::LinkKey::FromToken(token), timeout);
  if (!link.ok()) return link.status().WithContext("agent at " + endpoint.ToString());
  client.link_ = std::move(link).value();
  DSD_RETURN_IF_ERROR(net::SendFrame(client.link_, {{"type", "hello"}, {"role", "coordinator"}}));
  auto reply = net::RecvFrame(client.link_, client.decoder_, timeout);
  if (!reply.ok()) return reply.status().WithContext("agent at " + endpoint.ToString());
  if (reply->value("type", "") != "welcome") {
    return PermissionDenied("agent at " + endpoint.ToString() +
                            " refused us: " + reply->value("message", reply->dump()));
  }
  client.agent_name_ = reply->value("name", "");
  log::Get("agent")->debug("connected to agent {} at {}", client.agent_name_, endpoint.ToString());
  return client;
}

Result<nlohmann::json> AgentClient::Call(nlohmann::json request, Duration timeout) {
  int id = next_id_++;
  request["id"] = id;
  DSD_RETURN_IF_ERROR(net::SendFrame(link_, request));
  while (true) {
    DSD_ASSIGN_OR_RETURN(nlohmann::json reply, net::RecvFrame(link_, decoder_, timeout));
    if (reply.value("id", -1) != id) continue;  // a late reply to an earlier, timed-out call
    if (reply.value("type", "") == "error") {
      return Unavailable("agent " + agent_name_ + ": " + reply.value("message", std::string("error")));
    }
    return reply;
  }
}

}  // namespace dsd::agent
