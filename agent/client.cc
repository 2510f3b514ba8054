#include "agent/client.h"

#include <sys/epoll.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "common/log.h"

namespace dsd::agent {

Result<AgentClient> AgentClient::Connect(const net::Endpoint& endpoint, const std::string& token, Duration timeout,
                                         net::ConnectOutcome* outcome) {
  auto c = net::Connect(endpoint.host, endpoint.port, timeout);
  if (outcome) *outcome = c.outcome;
  if (c.outcome != net::ConnectOutcome::kOk) {
    return Unavailable("agent at " + endpoint.ToString() + ": connect " + net::ConnectOutcomeName(c.outcome) + " (" +
                       c.error + ")");
  }
  AgentClient client;
  client.endpoint_ = endpoint;
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

Status AgentClient::SendText(std::string_view request_json) {
  DSD_ASSIGN_OR_RETURN(std::string frame, wire::EncodeFrameText(request_json));
  return link_.Send(frame);
}

Result<std::optional<nlohmann::json>> AgentClient::TryReply(int id) {
  std::string bytes;
  while (true) {
    auto next = decoder_.Next();
    if (!next.ok()) return next.status();
    if (next->has_value()) {
      nlohmann::json reply = std::move(**next);
      if (reply.value("id", -1) != id) continue;  // a late reply to an earlier, timed-out call
      if (reply.value("type", "") == "error")
        return Unavailable("agent " + agent_name_ + ": " + reply.value("message", std::string("error")));
      return std::optional<nlohmann::json>(std::move(reply));
    }
    if (!link_.HasPendingInput()) return std::optional<nlohmann::json>();
    bytes.clear();
    Status st = link_.Recv(&bytes, Duration::zero());
    if (st.code() == StatusCode::kTimeout) return std::optional<nlohmann::json>();
    if (!st.ok()) return st;
    decoder_.Feed(bytes);
  }
}

void CallEach(const std::vector<AgentClient*>& clients, const std::function<std::string(size_t, int)>& request_text,
              Duration timeout, const std::function<void(size_t, Result<nlohmann::json>)>& on_reply) {
  std::vector<int> ids(clients.size(), 0);
  net::Fd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) {
    Status st = ErrnoError("epoll_create1", errno);
    for (size_t i = 0; i < clients.size(); ++i) {
      if (clients[i]) on_reply(i, st);
    }
    return;
  }
  size_t waiting = 0;
  std::vector<bool> done(clients.size(), true);
  for (size_t i = 0; i < clients.size(); ++i) {
    if (!clients[i]) continue;
    ids[i] = clients[i]->NewId();
    Status st = clients[i]->SendText(request_text(i, ids[i]));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    if (st.ok() && ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, clients[i]->link().fd(), &ev) != 0)
      st = ErrnoError("epoll_ctl", errno);
    if (!st.ok()) {
      on_reply(i, st);
      continue;
    }
    done[i] = false;
    ++waiting;
  }
  // Reads only the links that have input: with thousands of agents, asking every link on every
  // wake-up would cost O(N²) system calls.
  auto finish = [&](size_t i, Result<nlohmann::json> r) {
    ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, clients[i]->link().fd(), nullptr);
    done[i] = true;
    --waiting;
    on_reply(i, std::move(r));
  };
  const MonoTime deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<epoll_event> events(256);
  while (waiting > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    int n = ::epoll_wait(epoll.get(), events.data(), static_cast<int>(events.size()),
                         static_cast<int>(std::min<long>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) {
      Status st = ErrnoError("epoll_wait", errno);
      for (size_t i = 0; i < clients.size(); ++i) {
        if (!done[i]) finish(i, st);
      }
      return;
    }
    for (int k = 0; k < n; ++k) {
      size_t i = events[k].data.u64;
      if (done[i]) continue;
      auto r = clients[i]->TryReply(ids[i]);
      if (!r.ok())
        finish(i, r.status());
      else if (r->has_value())
        finish(i, std::move(**r));
    }
  }
  for (size_t i = 0; i < clients.size(); ++i) {
    if (!done[i])
      finish(i, Timeout("agent " + clients[i]->agent_name() + ": no reply within " + std::to_string(ToMillis(timeout)) +
                        " ms"));
  }
}

std::vector<Result<nlohmann::json>> CallAll(const std::vector<AgentClient*>& clients,
                                            const std::function<std::string(size_t, int)>& request_text,
                                            Duration timeout) {
  std::vector<Result<nlohmann::json>> results(clients.size(), Unavailable("no agent"));
  CallEach(clients, request_text, timeout, [&](size_t i, Result<nlohmann::json> r) { results[i] = std::move(r); });
  return results;
}

void ParallelFor(size_t n, size_t max_threads, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  size_t extra = std::min(n, std::max<size_t>(max_threads, 1)) - (n > 0 ? 1 : 0);
  std::vector<std::thread> threads;
  threads.reserve(extra);
  for (size_t t = 0; t < extra; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads: the ones running (and this one) share the work
    }
  }
  work();
  for (auto& t : threads) t.join();
}

}  // namespace dsd::agent
