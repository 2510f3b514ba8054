#include "runtime/store.h"

#include <gloo/common/error.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/strings.h"

namespace dsd::runtime {

using nlohmann::json;

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& addr, int port) {
  int bound = 0;
  auto fd = net::Listen(addr, port, &bound);
  if (!fd.ok()) return fd.status().WithContext("rendezvous store on " + addr + ":" + std::to_string(port));
  auto server = std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(*fd), bound));
  server->accept_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  log::Get("runtime")->debug("rendezvous store listening on {}:{}", addr, bound);
  return server;
}

TcpStoreServer::TcpStoreServer(net::Fd listener, int port) : listener_(std::move(listener)), port_(port) {}

TcpStoreServer::~TcpStoreServer() { Stop(); }

void TcpStoreServer::Stop() {
  if (stop_.exchange(true)) return;
  kv_.Cancel();
  if (accept_.joinable()) accept_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : conns_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : threads_) t.join();
}

void TcpStoreServer::AcceptLoop() {
  while (!stop_) {
    pollfd p{listener_.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    int c = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    conns_.push_back(c);
    threads_.emplace_back([this, c] { Serve(c); });
  }
}

void TcpStoreServer::Serve(int fd) {
  net::Fd conn(fd);
  wire::FrameDecoder decoder;
  while (!stop_) {
    auto req = net::RecvFrame(fd, decoder, std::chrono::hours(24 * 365));
    if (!req.ok()) break;  // peer closed, bad frame or shutdown
    json reply;
    try {
      std::string type = req->at("type").get<std::string>();
      if (type == "set") {
        std::string value;
        if (!HexDecode(req->at("value").get<std::string>(), &value)) throw std::runtime_error("value is not hex");
        kv_.Set(req->at("key").get<std::string>(), std::move(value));
        reply = {{"type", "ok"}};
      } else if (type == "get") {
        auto keys = req->at("keys").get<std::vector<std::string>>();
        auto timeout = std::chrono::milliseconds(req->value("timeout_ms", 30000));
        std::map<std::string, std::string> values;
        std::vector<std::string> missing;
        kv_.WaitGet(keys, timeout, &values, &missing);
        json hex = json::object();
        for (const auto& [k, v] : values) hex[k] = HexEncode(v);
        reply = {{"type", "values"}, {"values", hex}, {"missing", missing}};
      } else {
        reply = {{"type", "error"}, {"message", "unknown request type " + type}};
      }
    } catch (const std::exception& e) {
      reply = {{"type", "error"}, {"message", std::string("bad request: ") + e.what()}};
    }
    if (!net::SendFrame(fd, reply).ok()) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::erase(conns_, fd);
}

Result<std::unique_ptr<TcpStore>> TcpStore::Connect(const std::string& host, int port, Duration connect_timeout,
                                                    Duration default_wait) {
  std::string where = host + ":" + std::to_string(port);
  auto deadline = std::chrono::steady_clock::now() + connect_timeout;
  std::string last;
  while (true) {
    auto r = net::Connect(host, port, std::chrono::seconds(5));
    if (r.outcome == net::ConnectOutcome::kOk) {
      return std::unique_ptr<TcpStore>(new TcpStore(std::move(r.fd), where, default_wait));
    }
    last = std::string(net::ConnectOutcomeName(r.outcome)) + ": " + r.error;
    if (r.outcome == net::ConnectOutcome::kUnresolved || std::chrono::steady_clock::now() >= deadline) break;
    ::usleep(50000);
  }
  return Unavailable("rendezvous store at MASTER_ADDR:MASTER_PORT=" + where + " not reachable within " +
                     std::to_string(std::chrono::duration_cast<std::chrono::seconds>(connect_timeout).count()) +
                     " s (" + last + ")");
}

Result<json> TcpStore::Call(const json& request, Duration timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  DSD_RETURN_IF_ERROR(net::SendFrame(fd_.get(), request).WithContext("rendezvous store " + where_));
  auto reply = net::RecvFrame(fd_.get(), decoder_, timeout + std::chrono::seconds(10));
  if (!reply.ok()) return reply.status().WithContext("rendezvous store " + where_);
  if (reply->value("type", "") == "error") {
    return Unavailable("rendezvous store " + where_ + ": " + reply->value("message", ""));
  }
  return reply;
}

Status TcpStore::Set(const std::string& key, const std::string& value) {
  return Call({{"type", "set"}, {"key", key}, {"value", HexEncode(value)}}, std::chrono::seconds(30)).status();
}

Result<std::map<std::string, std::string>> TcpStore::WaitGet(const std::vector<std::string>& keys, Duration timeout,
                                                             std::vector<std::string>* missing) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  DSD_ASSIGN_OR_RETURN(json reply, Call({{"type", "get"}, {"keys", keys}, {"timeout_ms", ms}}, timeout));
  std::map<std::string, std::string> values;
  try {
    for (const auto& [k, v] : reply.at("values").items()) {
      std::string bytes;
      if (!HexDecode(v.get<std::string>(), &bytes)) return Corruption("rendezvous store: value of " + k + " is not hex");
      values[k] = std::move(bytes);
    }
    auto absent = reply.at("missing").get<std::vector<std::string>>();
    if (missing) *missing = absent;
    if (!absent.empty()) {
      return Timeout("rendezvous store " + where_ + ": keys not set within " + std::to_string(ms) + " ms: " +
                     Join(absent, ", "));
    }
  } catch (const std::exception& e) {
    return Corruption(std::string("rendezvous store reply: ") + e.what());
  }
  return values;
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  Status s = Set(key, std::string(data.begin(), data.end()));
  if (!s.ok()) GLOO_THROW_IO_EXCEPTION(s.message());
}

std::vector<char> TcpStore::get(const std::string& key) {
  auto v = WaitGet({key}, default_wait_);
  if (!v.ok()) GLOO_THROW_IO_EXCEPTION(v.status().message());
  const std::string& s = v->at(key);
  return std::vector<char>(s.begin(), s.end());
}

void TcpStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::duration_cast<std::chrono::milliseconds>(default_wait_));
}

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  auto v = WaitGet(keys, timeout);
  if (!v.ok()) GLOO_THROW_IO_EXCEPTION(v.status().message());
}

}  // namespace dsd::runtime
