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
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <random>

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

// How a connect's errno shows the path: see ConnectOutcome.
ConnectOutcome OutcomeOf(int err) {
  switch (err) {
    case 0:
      return ConnectOutcome::kOk;
    case ECONNREFUSED:
      return ConnectOutcome::kRefused;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
      return ConnectOutcome::kUnreachable;
    case ETIMEDOUT:
      return ConnectOutcome::kTimeout;
    default:
      return ConnectOutcome::kError;
  }
}

// A resolved address (first result), or why it did not resolve.
struct Resolved {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = 0;
  std::string error;  // non-empty: unresolved
};

Resolved ResolveFirst(const std::string& host, int port, bool passive) {
  Resolved r;
  auto res = Resolve(host, port, passive);
  if (!res.ok()) {
    r.error = res.status().message();
    return r;
  }
  std::memcpy(&r.addr, (*res)->ai_addr, (*res)->ai_addrlen);
  r.len = (*res)->ai_addrlen;
  r.family = (*res)->ai_family;
  ::freeaddrinfo(*res);
  return r;
}

// Where connects leave from, resolved once per caller: nullopt lets the kernel choose (no source,
// a wildcard, or one that does not resolve, as before).
std::optional<Resolved> SourceAddress(const std::string& source_addr) {
  if (source_addr.empty() || source_addr == "0.0.0.0" || source_addr == "::") return std::nullopt;
  Resolved r = ResolveFirst(source_addr, 0, true);
  if (!r.error.empty()) return std::nullopt;
  return r;
}

// Binds a socket to the source address before connect, so that firewall rules matching on the
// source see the right node. The port is left to connect() (IP_BIND_ADDRESS_NO_PORT): thousands
// of probes from one address must not each hold an ephemeral port from bind() on.
Status BindSource(int fd, const std::optional<Resolved>& source, const std::string& source_addr) {
  if (!source) return Status::Ok();
  int one = 1;
  ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&source->addr), source->len) != 0)
    return Unavailable("bind source " + source_addr + ": " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

int PickUnusedPort() {
  int eph_lo = 32768, eph_hi = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int lo = 0, hi = 0;
    if (std::fscanf(f, "%d %d", &lo, &hi) == 2 && lo > 0 && hi >= lo) eph_lo = lo, eph_hi = hi;
    std::fclose(f);
  }
  int lo = 20000, hi = eph_lo - 1;
  if (hi - lo < 1000) lo = eph_hi + 1, hi = 65535;  // an odd range: above it, if there is room
  if (hi - lo >= 1000) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(lo, hi);
    for (int attempt = 0; attempt < 64; ++attempt) {
      const int port = pick(rng);
      if (Listen("0.0.0.0", port, nullptr, 1).ok()) return port;
    }
  }
  int port = 0;
  return Listen("127.0.0.1", 0, &port, 1).ok() ? port : 29500;
}

Status DeferAccept(int listener, Duration wait) {
  int seconds = static_cast<int>(std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(wait).count()));
  if (::setsockopt(listener, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, sizeof seconds) != 0)
    return ErrnoError("setsockopt TCP_DEFER_ACCEPT", errno);
  return Status::Ok();
}

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
    case ConnectOutcome::kOk:
      return "ok";
    case ConnectOutcome::kTimeout:
      return "timeout";
    case ConnectOutcome::kRefused:
      return "refused";
    case ConnectOutcome::kUnreachable:
      return "unreachable";
    case ConnectOutcome::kUnresolved:
      return "unresolved";
    case ConnectOutcome::kError:
      return "error";
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
  if (Status b = BindSource(fd.get(), SourceAddress(source_addr), source_addr); !b.ok()) {
    r.error = b.message();
    ::freeaddrinfo(*res);
    return r;
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
  r.outcome = OutcomeOf(err);
  if (r.outcome == ConnectOutcome::kOk) {
    int flags = ::fcntl(fd.get(), F_GETFL);
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    r.fd = std::move(fd);
    return r;
  }
  r.error = std::strerror(err);
  return r;
}

namespace {

// Closes with a reset (SO_LINGER 0): a probe has nothing to say, and thousands of them must not
// leave thousands of TIME_WAIT sockets.
void AbortClose(Fd& fd) {
  linger l{1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
  fd.Reset();
}

class ProbeRunner {
 public:
  ProbeRunner(const std::vector<ProbeTarget>& targets, const ProbeOptions& options)
      : targets_(targets), options_(options), source_(SourceAddress(options.source_addr)), results_(targets.size()) {}

  std::vector<ProbeResult> Run() {
    std::vector<size_t> all(targets_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    Pass(all, std::max<size_t>(options_.max_in_flight, 1), false);
    if (options_.retry_timeouts && !(options_.cancel && options_.cancel->load())) {
      std::vector<size_t> again;
      for (size_t i = 0; i < results_.size(); ++i) {
        if (results_[i].outcome == ConnectOutcome::kTimeout) again.push_back(i);
      }
      if (!again.empty()) {
        log::Get("net")->debug("{} of {} connect probes timed out; trying them once more", again.size(),
                               targets_.size());
        Pass(again, std::max<size_t>(options_.retry_in_flight, 1), true);
      }
    }
    return std::move(results_);
  }

 private:
  struct Attempt {
    size_t index;
    Fd fd;
    MonoTime start;
  };

  const Resolved& Lookup(const std::string& host, int port) {
    auto key = host + "\n" + std::to_string(port);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    return cache_.emplace(key, ResolveFirst(host, port, false)).first->second;
  }

  void Finish(size_t index, ConnectOutcome outcome, MonoTime start, std::string error, bool retry) {
    ProbeResult& r = results_[index];
    r.outcome = outcome;
    r.latency_ms = ToMillis(std::chrono::steady_clock::now() - start);
    r.error = std::move(error);
    r.retried = retry;
  }

  // Starts one connect; returns false when its outcome is already known.
  bool Start(size_t index, bool retry, Attempt* out) {
    MonoTime start = std::chrono::steady_clock::now();
    const Resolved& to = Lookup(targets_[index].host, targets_[index].port);
    if (!to.error.empty()) {
      Finish(index, ConnectOutcome::kUnresolved, start, to.error, retry);
      return false;
    }
    Fd fd(::socket(to.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) {
      Finish(index, ConnectOutcome::kError, start, std::string("socket: ") + std::strerror(errno), retry);
      return false;
    }
    if (Status b = BindSource(fd.get(), source_, options_.source_addr); !b.ok()) {
      Finish(index, ConnectOutcome::kError, start, b.message(), retry);
      return false;
    }
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to.addr), to.len) == 0) {
      Finish(index, ConnectOutcome::kOk, start, "", retry);
      AbortClose(fd);
      return false;
    }
    if (errno != EINPROGRESS) {
      int err = errno;
      Finish(index, OutcomeOf(err), start, std::strerror(err), retry);
      return false;
    }
    *out = Attempt{index, std::move(fd), start};
    return true;
  }

  // `in_flight` caps the attempts younger than kYoung (the SYN rate a listener sees); older ones,
  // which wait on a dropped SYN, only count against max_outstanding, so a node whose every probe
  // is dropped still finishes in a few timeouts. A retry pass stops starting attempts once
  // kRetryGiveUp retries in a row timed out again: the rest are dropped too, not backlog losses.
  void Pass(const std::vector<size_t>& indices, size_t in_flight, bool retry) {
    constexpr Duration kYoung = std::chrono::milliseconds(50);
    constexpr size_t kRetryGiveUp = 32;
    const auto timeout = options_.timeout;
    const int timeout_ms = static_cast<int>(ToMillis(timeout));
    const size_t max_outstanding = std::max<size_t>(options_.max_outstanding, in_flight);
    std::vector<Attempt> active;
    std::vector<pollfd> fds;
    size_t next = 0;
    size_t timeouts_in_a_row = 0;
    while (next < indices.size() || !active.empty()) {
      if (options_.cancel && options_.cancel->load()) {
        for (auto& a : active) Finish(a.index, ConnectOutcome::kError, a.start, "cancelled", retry);
        for (; next < indices.size(); ++next)
          Finish(indices[next], ConnectOutcome::kError, std::chrono::steady_clock::now(), "cancelled", retry);
        return;
      }
      if (retry && timeouts_in_a_row >= kRetryGiveUp && next < indices.size()) {
        log::Get("net")->debug("{} retries in a row timed out again; the other {} stay timeouts", timeouts_in_a_row,
                               indices.size() - next);
        next = indices.size();
      }
      MonoTime now = std::chrono::steady_clock::now();
      size_t young = 0;
      for (const auto& a : active) young += now - a.start < kYoung;
      while (young < in_flight && active.size() < max_outstanding && next < indices.size()) {
        Attempt a;
        if (Start(indices[next++], retry, &a)) {
          active.push_back(std::move(a));
          ++young;
        }
      }
      if (active.empty()) continue;
      now = std::chrono::steady_clock::now();
      MonoTime wake = active.front().start + timeout;
      fds.resize(active.size());
      for (size_t k = 0; k < active.size(); ++k) {
        fds[k] = {active[k].fd.get(), POLLOUT, 0};
        wake = std::min(wake, active[k].start + timeout);
        // A young attempt ageing out frees a slot for the next target.
        if (next < indices.size() && now - active[k].start < kYoung) wake = std::min(wake, active[k].start + kYoung);
      }
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
      wait = std::min<long>(wait, 100);  // the cancel flag is looked at this often
      int pr = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(wait, 0)) + (wait > 0 ? 1 : 0));
      if (pr < 0 && errno != EINTR) {
        int err = errno;
        for (auto& a : active)
          Finish(a.index, ConnectOutcome::kError, a.start, std::string("poll: ") + std::strerror(err), retry);
        return;
      }
      now = std::chrono::steady_clock::now();
      size_t kept = 0;
      for (size_t k = 0; k < active.size(); ++k) {
        Attempt& a = active[k];
        if (pr > 0 && fds[k].revents) {
          int err = 0;
          socklen_t len = sizeof err;
          ::getsockopt(a.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
          Finish(a.index, OutcomeOf(err), a.start, err ? std::strerror(err) : "", retry);
          AbortClose(a.fd);
          timeouts_in_a_row = 0;
          continue;
        }
        if (now - a.start >= timeout) {
          Finish(a.index, ConnectOutcome::kTimeout, a.start,
                 "no answer within " + std::to_string(timeout_ms) + " ms" + (retry ? ", twice" : ""), retry);
          AbortClose(a.fd);
          ++timeouts_in_a_row;
          continue;
        }
        if (kept != k) active[kept] = std::move(a);
        ++kept;
      }
      active.resize(kept);
    }
  }

  const std::vector<ProbeTarget>& targets_;
  const ProbeOptions& options_;
  const std::optional<Resolved> source_;  // resolved once, not per probe
  std::vector<ProbeResult> results_;
  std::map<std::string, Resolved> cache_;
};

}  // namespace

std::vector<ProbeResult> ProbeMany(const std::vector<ProbeTarget>& targets, const ProbeOptions& options) {
  return ProbeRunner(targets, options).Run();
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
