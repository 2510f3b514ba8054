// TCP helpers: listeners, connects with a deadline and a chosen source address, connect probes
// that classify failures the way a firewall shows them, and framed message I/O.
// Free functions over file descriptors; thread-safe (each call owns its fds).
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/framing.h"
#include "common/status.h"

namespace dsd::net {

// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& o) noexcept : fd_(o.Release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = o.Release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void Reset();

 private:
  int fd_ = -1;
};

struct Endpoint {
  std::string host;
  int port = 0;
  std::string ToString() const;  // "127.0.0.2:47000", "[::1]:47000"
};

// "host:port" or "[v6]:port"; errors name the text.
Result<Endpoint> ParseEndpoint(const std::string& text);

// Binds and listens (SO_REUSEADDR). Port 0 picks a free port; `bound_port` receives it.
// The default backlog asks for room for a whole cluster's connect probes arriving together; the
// kernel caps it at net.core.somaxconn (4096 on current kernels).
inline constexpr int kListenBacklog = 4096;
Result<Fd> Listen(const std::string& addr, int port, int* bound_port = nullptr, int backlog = kListenBacklog);

// A port to hand to another process that will listen on it (MASTER_PORT for ranks on this
// machine): random, below the kernel's range for outgoing connections' own ports
// (ip_local_port_range), and free now on every address. Not what bind(port 0) gives: that comes
// from the range every connect() on the machine draws from, and between the check and the other
// process's bind any of them may take it (a CI run lost a rendezvous store to EADDRINUSE so). Such
// a port is only at risk from another listener choosing the same one. Falls back to bind(port 0)
// when the range leaves no room.
int PickUnusedPort();

// Has the kernel hand over a connection only once its first bytes arrive (TCP_DEFER_ACCEPT), or
// after about `wait` of silence (rounded up to the kernel's SYN-ACK retransmissions: 1 s stays 1 s,
// 5 s becomes 7 s). A connectivity probe (connect, then a reset) is answered by the kernel and never
// accepted: no socket, no accept() and no close() on the listening side, which halves the CPU of a
// full-mesh probe. For listeners whose clients speak first (TLS). While it waits, a silent
// connection holds a slot of the listen queue, not a descriptor; when that queue is full, SYN
// cookies (where enabled) skip the wait.
Status DeferAccept(int listener, Duration wait);

// How a connect attempt ended. The classes match what firewalls do: DROP rules swallow the SYN
// (kTimeout), REJECT rules or a closed port answer with a reset/ICMP port-unreachable (kRefused),
// missing routes or ICMP host-unreachable give kUnreachable.
enum class ConnectOutcome { kOk, kTimeout, kRefused, kUnreachable, kUnresolved, kError };
const char* ConnectOutcomeName(ConnectOutcome o);  // "ok", "timeout", "refused", ...

struct ConnectResult {
  ConnectOutcome outcome = ConnectOutcome::kError;
  double latency_ms = 0;  // time to establish (ok) or to fail
  std::string error;      // strerror / gai_strerror text
  Fd fd;                  // the connected socket when ok
};

// Resolves `host`, connects with `timeout`, optionally from `source_addr` (bind before connect,
// so firewall rules that match on source see the right node).
ConnectResult Connect(const std::string& host, int port, Duration timeout, const std::string& source_addr = "");

// Connect probes to many targets from one thread: non-blocking connects in one poll loop, in the
// order given (callers stagger the order across nodes so that no listener sees every node's SYN at
// once). At most `max_in_flight` attempts younger than 50 ms are open, which bounds the SYN rate;
// attempts waiting on a dropped SYN count only against `max_outstanding` (the fds in use), so a
// node whose every probe is dropped still finishes in about two timeouts. Each socket is closed
// with a reset as soon as its outcome is known, so probes leave no TIME_WAIT behind. Targets that
// timed out are tried once more after the first pass, a few at a time: a SYN lost to a full listen
// queue or to congestion then gets through, while a firewall DROP times out again (after 32
// retries in a row that timed out again, the rest are not retried).
struct ProbeTarget {
  std::string host;
  int port = 0;
};
struct ProbeOptions {
  Duration timeout = std::chrono::seconds(2);
  std::string source_addr;  // bind before connect, as Connect()
  size_t max_in_flight = 16;
  size_t max_outstanding = 512;
  bool retry_timeouts = true;
  size_t retry_in_flight = 8;
  // Set from another thread to end early (an agent whose coordinator went away): probes not yet
  // decided are kError "cancelled". Checked at least every 100 ms.
  const std::atomic<bool>* cancel = nullptr;
};
struct ProbeResult {
  ConnectOutcome outcome = ConnectOutcome::kError;
  double latency_ms = 0;  // of the attempt that decided the outcome
  std::string error;
  bool retried = false;  // the first attempt timed out
};
std::vector<ProbeResult> ProbeMany(const std::vector<ProbeTarget>& targets, const ProbeOptions& options);

Status SendAll(int fd, std::string_view bytes);
Status SendFrame(int fd, const nlohmann::json& message);
// Reads until `decoder` yields a message or `timeout` passes. EOF before a message is kUnavailable.
Result<nlohmann::json> RecvFrame(int fd, wire::FrameDecoder& decoder, Duration timeout);

}  // namespace dsd::net
