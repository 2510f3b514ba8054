// Authenticated, encrypted links between dsdoctor processes: TLS 1.3 (OpenSSL) with an external
// pre-shared key derived from the job token (RFC 8446 §2.2, psk_dhe_ke). Both ends prove they
// know the key without sending it; every handshake mixes fresh randoms and an ephemeral X25519
// exchange, so a recorded handshake replayed from elsewhere authenticates nothing, and every
// frame after it is encrypted and integrity-protected. See docs/security.md.
//
// Link: one established connection. Send() and Recv() may run on two threads at once (one sender
// and one receiver each, or several senders: sends are serialised); Shutdown() from any thread.
// HandshakeAcceptor: one poll loop that accepts connections and runs their server handshakes
// with bounded work before authentication; single-threaded, owned by the thread that polls it.
#pragma once

#include <sys/poll.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/framing.h"
#include "common/net.h"
#include "common/status.h"

namespace dsd::net {

// The link key: HKDF-SHA256 of a token. Two processes holding the same token derive the same key;
// the key, not the token, enters TLS.
class LinkKey {
 public:
  LinkKey() = default;
  static LinkKey FromToken(std::string_view token);
  const std::array<uint8_t, 32>& bytes() const { return bytes_; }
  bool empty() const { return !set_; }

 private:
  std::array<uint8_t, 32> bytes_{};
  bool set_ = false;
};

// The first TLS record a client may send: the ClientHello, at most this many bytes. Checked on
// the raw bytes before OpenSSL parses anything.
inline constexpr size_t kMaxHelloRecordBytes = 4096;
// All bytes a client may send before the handshake completes.
inline constexpr size_t kMaxPreAuthBytes = 8192;

class Link {
 public:
  Link();
  ~Link();
  Link(Link&&) noexcept;
  Link& operator=(Link&&) noexcept;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Client side: runs the handshake on a connected socket within `timeout`. A peer that does not
  // know the key is kPermissionDenied; anything else (timeout, a peer that does not speak TLS) is
  // kUnavailable with OpenSSL's words.
  static Result<Link> Connect(Fd fd, const LinkKey& key, Duration timeout);

  bool valid() const { return state_ != nullptr; }
  int fd() const;

  // Encrypts and sends all of `bytes`. Blocks while the socket is full.
  Status Send(std::string_view bytes);
  // Appends decrypted bytes to *out: at least one byte, or kTimeout after `timeout`, or
  // kUnavailable when the peer closed, or kCorruption when a record fails authentication.
  Status Recv(std::string* out, Duration timeout);
  // Whether Recv would return bytes now without waiting: held here or in the socket.
  bool HasPendingInput() const;
  // Shuts the socket in both directions; a Recv blocked on another thread returns.
  void Shutdown();

  // Leaves TLS for a raw byte stream (the p2p bandwidth filler, docs/security.md): returns the
  // raw bytes already read past the last record. Later Recv/Send still work for TLS records only
  // in the direction that did not switch; raw bytes go through fd() directly.
  std::string TakeRawInput();

  struct State;  // OpenSSL objects and locks (tls_link.cc)

 private:
  friend class HandshakeAcceptor;
  explicit Link(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Frames over a link (the framing of common/framing.h inside TLS).
Status SendFrame(Link& link, const nlohmann::json& message);
// A frame whose JSON object text the caller wrote (common/json_text.h): the run samples.
Status SendFrameText(Link& link, std::string_view payload);
Result<nlohmann::json> RecvFrame(Link& link, wire::FrameDecoder& decoder, Duration timeout);
// The same, the payload left as text (wire::FrameDecoder::NextText).
Result<std::string> RecvFrameText(Link& link, wire::FrameDecoder& decoder, Duration timeout);

// Sends the whole of `bytes` on a link's socket, outside TLS (the p2p bandwidth filler).
Status SendRaw(Link& link, std::string_view bytes);

struct AcceptorOptions {
  LinkKey key;
  std::string what = "agent";  // in log lines: "agent", "viewer port"
  Duration handshake_timeout = std::chrono::seconds(5);
  // Unauthenticated connections held at once, in the spirit of OpenSSH's MaxStartups and
  // PerSourceMaxStartups, so that no single address can keep another out:
  // - at max_pending, a new connection evicts the oldest of the address holding the most;
  // - from early_drop_from held, an address holding max_pending_per_source while another address
  //   waits evicts its own oldest (a churning source only churns itself).
  // No random early drop: the agents of a simulated cluster all come from 127.0.0.1 at once, and a
  // burst from one address alone is evicted only at the global cap, oldest first, as before.
  size_t max_pending = 64;
  size_t max_pending_per_source = 8;
  size_t early_drop_from = 32;
};

// Counters for tests and the figures of docs/performance.md.
struct AcceptorStats {
  uint64_t accepted = 0;       // connections accepted from the listener
  uint64_t authenticated = 0;  // handshakes completed and handed over
  uint64_t probes = 0;         // closed without sending a byte (connectivity checks)
  uint64_t refused = 0;        // wrong key, not TLS, oversized hello, timed out
  uint64_t evicted = 0;        // dropped to make room under max_pending or the per-source cap
  uint64_t accept_errors = 0;  // accept() failures (EMFILE …), each followed by a back-off
};

class HandshakeAcceptor {
 public:
  // Called on the polling thread for each authenticated connection; `peer` is "addr:port".
  using OnLink = std::function<void(Link link, const std::string& peer)>;

  // Borrows `listener` (a listening socket, kept open by the caller).
  HandshakeAcceptor(int listener, AcceptorOptions options, OnLink on_link);
  ~HandshakeAcceptor();

  // Waits up to `timeout` for activity on the listener, the pending handshakes and `extra` (whose
  // revents are filled in), then does all work that is ready without blocking.
  void Poll(Duration timeout, std::vector<pollfd>* extra = nullptr);

  size_t pending() const { return pending_.size(); }
  const AcceptorStats& stats() const { return stats_; }

 private:
  struct Pending;
  void Accept(MonoTime now);
  // Returns false when the connection is finished (handed over or refused).
  bool Advance(Pending& p, MonoTime now);
  void Refuse(Pending& p, const std::string& why);
  // Makes room for a new connection from `source`; false when it is to be dropped instead.
  bool Admit(const std::string& source);
  void EvictOldestOf(const std::string& source);

  int listener_;
  AcceptorOptions options_;
  OnLink on_link_;
  std::deque<std::unique_ptr<Pending>> pending_;  // oldest first
  MonoTime accept_paused_until_{};
  Duration backoff_{};
  AcceptorStats stats_;
  // Refusals logged at warning level per minute; the rest are counted and summarised.
  MonoTime log_window_start_{};
  int logged_in_window_ = 0;
  int suppressed_in_window_ = 0;
};

}  // namespace dsd::net
