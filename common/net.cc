#include "common/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "common/log.h"

namespace dsd::net {

void Fd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string Endpoint::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<Endpoint> ParseEndpoint(const std::string& text) {
  Endpoint e;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return InvalidArgument("'" + text + "' is not [ADDRESS]:PORT");
    }
    e.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) return InvalidArgument("'" + text + "' is not HOST:PORT");
    e.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), e.port);
  if (ec != std::errc() || p != port.data() + port.size() || e.port < 0 || e.port > 65535) {
    return InvalidArgument("'" + text + "': port '" + port + "' is not a number in 0..65535");
  }
  return e;
}

namespace {

Result<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) return NotFound("cannot resolve '" + host + "': " + ::gai_strerror(rc));
  return res;
}

}  // namespace

Result<Fd> Listen(const std::string& addr, int port, int* bound_port, int backlog) {
  DSD_ASSIGN_OR_RETURN(addrinfo * res, Resolve(addr, port, true));
  Status last = Unavailable("no address for " + addr);
  for (addrinfo* a = res; a; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last = ErrnoError("socket", errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      last = ErrnoError("bind " + Endpoint{addr, port}.ToString(), errno);
      continue;
    }
    if (::listen(fd.get(), backlog) != 0) {
      last = ErrnoError("listen " + Endpoint{addr, port}.ToString(), errno);
      continue;
    }
    if (bound_port) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
      *bound_port = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                                  : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    }
    ::freeaddrinfo(res);
    log::Get("net")->debug("listening on {}", Endpoint{addr, bound_port ? *bound_port : port}.ToString());
    return fd;
  }
  ::freeaddrinfo(res);
  return last;
}

const char* ConnectOutcomeName(ConnectOutcome o) {
  switch (o) {
    case ConnectOutcome::kOk: return "ok";
    case ConnectOutcome::kTimeout: return "timeout";
    case ConnectOutcome::kRefused: return "refused";
    case ConnectOutcome::kUnreachable: return "unreachable";
    case ConnectOutcome::kUnresolved: return "unresolved";
    case ConnectOutcome::kError: return "error";
  }
  return "?";
}

ConnectResult Connect(const std::string& host, int port, Duration timeout, const std::string& source_addr) {
  ConnectResult r;
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return ToMillis(std::chrono::steady_clock::now() - start); };
  auto res = Resolve(host, port, false);
  if (!res.ok()) {
    r.outcome = ConnectOutcome::kUnresolved;
    r.error = res.status().message();
    r.latency_ms = elapsed();
    return r;
  }
  addrinfo* a = *res;  // first address: what a training job's socket would use too
  Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
  if (!fd.valid()) {
    r.error = std::strerror(errno);
    ::freeaddrinfo(*res);
    return r;
  }
  if (!source_addr.empty() && source_addr != "0.0.0.0" && source_addr != "::") {
    auto src = Resolve(source_addr, 0, true);
    if (src.ok()) {
      if (::bind(fd.get(), (*src)->ai_addr, (*src)->ai_addrlen) != 0) {
        r.error = "bind source " + source_addr + ": " + std::strerror(errno);
        ::freeaddrinfo(*src);
        ::freeaddrinfo(*res);
        return r;
      }
      ::freeaddrinfo(*src);
    }
  }
  int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
  ::freeaddrinfo(*res);
  int err = 0;
  if (rc != 0 && errno != EINPROGRESS) {
    err = errno;
  } else if (rc != 0) {
    pollfd p{fd.get(), POLLOUT, 0};
    int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
    int pr;
    do {
      pr = ::poll(&p, 1, ms);
    } while (pr < 0 && errno == EINTR);
    if (pr == 0) {
      r.outcome = ConnectOutcome::kTimeout;
      r.error = "no answer within " + std::to_string(ms) + " ms";
      r.latency_ms = elapsed();
      return r;
    }
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  }
  r.latency_ms = elapsed();
  switch (err) {
    case 0:
      r.outcome = ConnectOutcome::kOk;
      {
        int flags = ::fcntl(fd.get(), F_GETFL);
        ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
        int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
      r.fd = std::move(fd);
      return r;
    case ECONNREFUSED:
      r.outcome = ConnectOutcome::kRefused;
      break;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
      r.outcome = ConnectOutcome::kUnreachable;
      break;
    case ETIMEDOUT:
      r.outcome = ConnectOutcome::kTimeout;
      break;
    default:
      r.outcome = ConnectOutcome::kError;
  }
  r.error = std::strerror(err);
  return r;
}

Status SendAll(int fd, std::string_view bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("send", errno);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status SendFrame(int fd, const nlohmann::json& message) {
  DSD_ASSIGN_OR_RETURN(std::string frame, wire::EncodeFrame(message));
  return SendAll(fd, frame);
}

Result<nlohmann::json> RecvFrame(int fd, wire::FrameDecoder& decoder, Duration timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[65536];
  while (true) {
    auto next = decoder.Next();
    if (!next.ok()) return next.status();
    if (next->has_value()) return std::move(**next);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Timeout("no message within " + std::to_string(ToMillis(timeout)) + " ms");
    pollfd p{fd, POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(left.count()));
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) return ErrnoError("poll", errno);
    if (pr == 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("recv", errno);
    }
    if (n == 0) return Unavailable("connection closed by peer");
    decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

}  // namespace dsd::net
