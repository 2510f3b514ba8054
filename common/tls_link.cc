#include "common/tls_link.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "common/log.h"

namespace dsd::net {

namespace {

// The PSK identity both ends use; it names the key's derivation, not the job.
constexpr unsigned char kIdentity[] = "dsdoctor-link-v1";
constexpr size_t kIdentityLen = sizeof kIdentity - 1;
// TLS_AES_128_GCM_SHA256: the one suite offered; the PSK's hash must be SHA-256 to match.
constexpr unsigned char kSuite[2] = {0x13, 0x01};
// Plaintext sealed per socket write, one TLS record at a time: the memory BIOs keep the capacity
// of the most they ever held, and a coordinator holds thousands of links (sealing 256 KiB into
// wbio at once kept ~1 GiB at 4,000 nodes).
constexpr size_t kSendChunk = 256u << 10;
constexpr size_t kRecordBytes = 16u << 10;
constexpr size_t kRecvChunk = 16u << 10;

std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no OpenSSL error queued" : out;
}

SSL_SESSION* KeySession(SSL* ssl, const LinkKey& key) {
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kSuite);
  if (cipher == nullptr) return nullptr;
  SSL_SESSION* s = SSL_SESSION_new();
  if (s == nullptr) return nullptr;
  if (!SSL_SESSION_set1_master_key(s, key.bytes().data(), key.bytes().size()) || !SSL_SESSION_set_cipher(s, cipher) ||
      !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}

int UsePskSession(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* idlen, SSL_SESSION** sess) {
  const auto* key = static_cast<const LinkKey*>(SSL_get_app_data(ssl));
  SSL_SESSION* s = key ? KeySession(ssl, *key) : nullptr;
  if (s != nullptr && md != nullptr && md != SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s))) {
    SSL_SESSION_free(s);
    s = nullptr;
  }
  *sess = s;
  *id = s ? kIdentity : nullptr;
  *idlen = s ? kIdentityLen : 0;
  return s != nullptr ? 1 : 0;
}

int FindPskSession(SSL* ssl, const unsigned char* id, size_t idlen, SSL_SESSION** sess) {
  const auto* key = static_cast<const LinkKey*>(SSL_get_app_data(ssl));
  *sess = nullptr;
  if (key == nullptr || idlen != kIdentityLen || std::memcmp(id, kIdentity, idlen) != 0) return 1;  // unknown: no PSK
  *sess = KeySession(ssl, *key);
  return *sess != nullptr ? 1 : 0;
}

// A certificate can never authenticate a dsdoctor link: only the PSK does.
int RejectCertificates(int, X509_STORE_CTX*) { return 0; }

// OpenSSL's SSL init would also fill the legacy name tables of every cipher and digest, which
// costs each process ~2 ms: 250 simulated nodes' agents spent half a CPU second on it. TLS 1.3
// fetches its algorithms from the providers and never reads those tables. Config loading (system
// crypto policy) stays on.
void InitOpenSsl() {
  static const bool once = [] {
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS, nullptr);
    return true;
  }();
  (void)once;
}

SSL_CTX* MakeContext(bool server) {
  InitOpenSsl();
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return nullptr;
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
  // No tickets and no cache: every connection is a fresh handshake on the job key, and no
  // post-handshake message can appear in the middle of the frame stream.
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  // Idle links give their record buffers back (34 KB each).
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (server) {
    static const unsigned char kContext[] = "dsdoctor";
    SSL_CTX_set_session_id_context(ctx, kContext, sizeof kContext - 1);
    SSL_CTX_set_psk_find_session_callback(ctx, FindPskSession);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, RejectCertificates);
  }
  return ctx;
}

// Each made on first use: SSL_CTX_new costs a few ms in OpenSSL 3 (it loads every algorithm), and
// an agent that only serves never needs a client context.
SSL_CTX* Context(bool server) {
  if (server) {
    static SSL_CTX* const srv = MakeContext(true);
    return srv;
  }
  static SSL_CTX* const client = MakeContext(false);
  return client;
}

// Why a handshake failed, in words for logs and errors. `*denied` when the failure means the
// other side holds a different key (or none).
std::string HandshakeFailure(unsigned long err, bool* denied) {
  *denied = false;
  if (err == 0) return "handshake failed";
  int reason = ERR_GET_REASON(err);
  switch (reason) {
    case SSL_R_BINDER_DOES_NOT_VERIFY:
      *denied = true;
      return "its token differs from ours (TLS PSK binder does not verify)";
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
    case SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER:  // what OpenSSL 3.0 sends for a binder that does not verify
      *denied = true;
      return "it holds a different token (it rejected our key's binder)";
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_NO_SHARED_CIPHER:
      *denied = true;
      return "no shared key (a client without the dsdoctor job key, or a server that is not a dsdoctor)";
    case SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC:
      *denied = true;
      return "its handshake records do not decrypt under this handshake's keys (a replayed or forged handshake)";
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
      return "the peer does not speak TLS 1.3 (an older dsdoctor, or another service on this port)";
    default: {
      char buf[256];
      ERR_error_string_n(err, buf, sizeof buf);
      return std::string("TLS: ") + buf;
    }
  }
}

void SetBlocking(int fd, bool blocking) {
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK);
}

std::string Seconds(Duration d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(ms) / 1000);
  return buf;
}

int MillisLeft(MonoTime deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

}  // namespace

LinkKey LinkKey::FromToken(std::string_view token) {
  InitOpenSsl();
  LinkKey key;
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  EVP_KDF_CTX* ctx = kdf ? EVP_KDF_CTX_new(kdf) : nullptr;
  static const char kSalt[] = "dsdoctor";
  static const char kInfo[] = "dsdoctor link psk v1";
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<char*>(token.data()), token.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<char*>(kSalt), sizeof kSalt - 1),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(kInfo), sizeof kInfo - 1),
      OSSL_PARAM_construct_end()};
  key.set_ = ctx != nullptr && EVP_KDF_derive(ctx, key.bytes_.data(), key.bytes_.size(), params) == 1;
  EVP_KDF_CTX_free(ctx);
  EVP_KDF_free(kdf);
  if (!key.set_) log::Get("net")->error("HKDF-SHA256 unavailable in OpenSSL: {}", OpenSslErrors());
  return key;
}

struct Link::State {
  Fd fd;
  LinkKey key;  // SSL's app data points here
  SSL* ssl = nullptr;
  BIO* rbio = nullptr;  // owned by ssl: bytes from the socket
  BIO* wbio = nullptr;  // owned by ssl: bytes for the socket
  // Lock order: send_mu or recv_mu, then ssl_mu. ssl_mu is never held across socket I/O. wbio
  // is drained only under send_mu, so records reach the socket in the order they were sealed.
  std::mutex send_mu, recv_mu;
  mutable std::mutex ssl_mu;

  ~State() {
    if (ssl) SSL_free(ssl);
  }

  static std::unique_ptr<State> Make(Fd fd, const LinkKey& key, bool server) {
    auto s = std::make_unique<State>();
    s->fd = std::move(fd);
    s->key = key;
    SSL_CTX* ctx = Context(server);
    if (ctx == nullptr || key.empty()) return nullptr;
    s->ssl = SSL_new(ctx);
    if (s->ssl == nullptr) return nullptr;
    s->rbio = BIO_new(BIO_s_mem());
    s->wbio = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(s->rbio, -1);
    BIO_set_mem_eof_return(s->wbio, -1);
    SSL_set_bio(s->ssl, s->rbio, s->wbio);
    SSL_set_app_data(s->ssl, &s->key);
    if (server) {
      SSL_set_accept_state(s->ssl);
    } else {
      SSL_set_psk_use_session_callback(s->ssl, UsePskSession);
      SSL_set_connect_state(s->ssl);
    }
    return s;
  }

  // Moves sealed bytes out of wbio; caller holds ssl_mu.
  void DrainOutput(std::string* out) {
    char buf[16384];
    while (BIO_ctrl_pending(wbio) > 0) {
      int n = BIO_read(wbio, buf, sizeof buf);
      if (n <= 0) break;
      out->append(buf, static_cast<size_t>(n));
    }
  }

  // A memory BIO keeps the largest capacity it ever had; once drained, a big one is swapped for a
  // fresh one, so thousands of idle links hold a few KB each. Caller holds ssl_mu.
  void TrimBios() {
    rbio = Shrunk(rbio, [this](BIO* fresh) { SSL_set0_rbio(ssl, fresh); });
    wbio = Shrunk(wbio, [this](BIO* fresh) { SSL_set0_wbio(ssl, fresh); });
  }

  // `bio`, or a fresh empty one handed to `install` (which frees `bio`) when `bio` is drained but big.
  template <typename Install>
  static BIO* Shrunk(BIO* bio, Install install) {
    constexpr size_t kIdleBio = 4096;
    BUF_MEM* m = nullptr;
    if (BIO_ctrl_pending(bio) != 0 || BIO_get_mem_ptr(bio, &m) != 1 || m == nullptr || m->max <= kIdleBio) return bio;
    BIO* fresh = BIO_new(BIO_s_mem());
    if (fresh == nullptr) return bio;
    BIO_set_mem_eof_return(fresh, -1);
    install(fresh);
    return fresh;
  }

  void FeedInput(const char* data, size_t n) {
    std::lock_guard<std::mutex> lock(ssl_mu);
    BIO_write(rbio, data, static_cast<int>(n));
  }
};

Link::Link() = default;
Link::~Link() = default;
Link::Link(Link&&) noexcept = default;
Link& Link::operator=(Link&&) noexcept = default;
Link::Link(std::unique_ptr<State> state) : state_(std::move(state)) {}

int Link::fd() const { return state_ ? state_->fd.get() : -1; }

Result<Link> Link::Connect(Fd fd, const LinkKey& key, Duration timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int raw = fd.get();
  auto state = State::Make(std::move(fd), key, /*server=*/false);
  if (!state) return Internal("TLS client context: " + OpenSslErrors());
  char buf[16384];
  while (true) {
    ERR_clear_error();
    std::string out;
    int r = SSL_do_handshake(state->ssl);
    int err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(state->ssl, r);
    unsigned long queued = err == SSL_ERROR_SSL ? ERR_peek_error() : 0;
    state->DrainOutput(&out);
    if (!out.empty()) DSD_RETURN_IF_ERROR(SendAll(raw, out).WithContext("TLS handshake"));
    if (r == 1) {
      // A server could only finish without our key by presenting a certificate, which we never
      // accept; checking that the PSK was used makes that explicit.
      if (!SSL_session_reused(state->ssl))
        return PermissionDenied("authentication failed: the TLS handshake completed without the job key");
      return Link(std::move(state));
    }
    if (err != SSL_ERROR_WANT_READ) {
      bool denied = false;
      std::string why = HandshakeFailure(queued, &denied);
      ERR_clear_error();
      return denied ? PermissionDenied("authentication failed: " + why) : Unavailable("TLS handshake failed: " + why);
    }
    pollfd p{raw, POLLIN, 0};
    int pr = ::poll(&p, 1, MillisLeft(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) return ErrnoError("poll", errno);
    if (pr == 0) return Timeout("no TLS handshake reply within " + Seconds(timeout) + " s");
    ssize_t n = ::recv(raw, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("recv during TLS handshake", errno);
    if (n == 0) {
      return PermissionDenied(
          "authentication failed: the peer closed the connection during the TLS handshake (it does not hold our "
          "token, or it is not a dsdoctor of this version)");
    }
    state->FeedInput(buf, static_cast<size_t>(n));
  }
}

Status Link::Send(std::string_view bytes) {
  if (!state_) return Unavailable("link closed");
  State& s = *state_;
  std::lock_guard<std::mutex> send_lock(s.send_mu);
  size_t off = 0;
  do {
    size_t n = std::min(kSendChunk, bytes.size() - off);
    std::string out;
    {
      std::lock_guard<std::mutex> lock(s.ssl_mu);
      ERR_clear_error();
      // One record at a time through wbio, so it never holds more than one record.
      for (size_t k = 0; k < n; k += kRecordBytes) {
        if (SSL_write(s.ssl, bytes.data() + off + k, static_cast<int>(std::min(kRecordBytes, n - k))) <= 0) {
          return Internal("TLS seal: " + OpenSslErrors());
        }
        s.DrainOutput(&out);
      }
      s.DrainOutput(&out);  // an empty send still flushes what TLS queued
      s.TrimBios();
    }
    DSD_RETURN_IF_ERROR(SendAll(s.fd.get(), out));
    off += n;
  } while (off < bytes.size());
  return Status::Ok();
}

Status Link::Recv(std::string* out, Duration timeout) {
  if (!state_) return Unavailable("link closed");
  State& s = *state_;
  std::lock_guard<std::mutex> recv_lock(s.recv_mu);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char plain[16384];
  std::vector<char> wire(kRecvChunk);
  while (true) {
    int n = 0, err = SSL_ERROR_NONE;
    bool reply_pending = false;
    std::string errors;
    {
      std::lock_guard<std::mutex> lock(s.ssl_mu);
      ERR_clear_error();
      n = SSL_read(s.ssl, plain, sizeof plain);
      if (n <= 0) {
        err = SSL_get_error(s.ssl, n);
        if (err == SSL_ERROR_SSL) errors = OpenSslErrors();
      } else if (SSL_pending(s.ssl) == 0) {
        s.TrimBios();
      }
      reply_pending = BIO_ctrl_pending(s.wbio) > 0;
    }
    if (reply_pending) {  // an alert or other protocol reply: send it in order with our records
      std::lock_guard<std::mutex> send_lock(s.send_mu);
      std::string pending;
      {
        std::lock_guard<std::mutex> lock(s.ssl_mu);
        s.DrainOutput(&pending);
      }
      (void)SendAll(s.fd.get(), pending);
    }
    if (n > 0) {
      out->append(plain, static_cast<size_t>(n));
      return Status::Ok();
    }
    if (err == SSL_ERROR_ZERO_RETURN) return Unavailable("connection closed by peer");
    if (err != SSL_ERROR_WANT_READ) return Corruption("TLS record rejected: " + errors);
    pollfd p{s.fd.get(), POLLIN, 0};
    int pr = ::poll(&p, 1, MillisLeft(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) return ErrnoError("poll", errno);
    if (pr == 0) return Timeout("nothing received");
    ssize_t got = ::recv(s.fd.get(), wire.data(), wire.size(), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoError("recv", errno);
    if (got == 0) return Unavailable("connection closed by peer");
    s.FeedInput(wire.data(), static_cast<size_t>(got));
  }
}

bool Link::HasPendingInput() const {
  if (!state_) return false;
  {
    std::lock_guard<std::mutex> lock(state_->ssl_mu);
    if (SSL_pending(state_->ssl) > 0 || BIO_ctrl_pending(state_->rbio) > 0) return true;
  }
  int queued = 0;
  return ::ioctl(state_->fd.get(), FIONREAD, &queued) == 0 && queued > 0;
}

void Link::Shutdown() {
  if (state_) ::shutdown(state_->fd.get(), SHUT_RDWR);
}

std::string Link::TakeRawInput() {
  std::string raw;
  if (!state_) return raw;
  std::lock_guard<std::mutex> lock(state_->ssl_mu);
  char buf[16384];
  while (BIO_ctrl_pending(state_->rbio) > 0) {
    int n = BIO_read(state_->rbio, buf, sizeof buf);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  return raw;
}

Status SendFrame(Link& link, const nlohmann::json& message) {
  DSD_ASSIGN_OR_RETURN(std::string frame, wire::EncodeFrame(message));
  return link.Send(frame);
}

Status SendFrameText(Link& link, std::string_view payload) {
  DSD_ASSIGN_OR_RETURN(std::string frame, wire::EncodeFrameText(payload));
  return link.Send(frame);
}

namespace {

// Feeds `decoder` from the link until next() yields a message.
template <typename T, typename NextFn>
Result<T> RecvWith(Link& link, wire::FrameDecoder& decoder, Duration timeout, NextFn next_fn) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string bytes;
  while (true) {
    auto next = next_fn();
    if (!next.ok()) return next.status();
    if (next->has_value()) return std::move(**next);
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= Duration::zero())
      return Timeout("no message within " +
                     std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) + " ms");
    bytes.clear();
    Status st = link.Recv(&bytes, left);
    if (st.code() == StatusCode::kTimeout) continue;
    if (!st.ok()) return st;
    decoder.Feed(bytes);
  }
}

}  // namespace

Result<nlohmann::json> RecvFrame(Link& link, wire::FrameDecoder& decoder, Duration timeout) {
  return RecvWith<nlohmann::json>(link, decoder, timeout, [&] { return decoder.Next(); });
}

Result<std::string> RecvFrameText(Link& link, wire::FrameDecoder& decoder, Duration timeout) {
  return RecvWith<std::string>(link, decoder, timeout, [&] { return decoder.NextText(); });
}

Status SendRaw(Link& link, std::string_view bytes) { return SendAll(link.fd(), bytes); }

// ---------------------------------------------------------------------------------------------
// HandshakeAcceptor

struct HandshakeAcceptor::Pending {
  Fd fd;
  std::string source;  // the address, without the port: the unit of the per-source limits
  std::string peer;
  MonoTime deadline;
  std::string head;                    // raw bytes before the first record is complete
  std::unique_ptr<Link::State> state;  // once the ClientHello record passed the checks
  size_t received = 0;
  int socket() const { return state ? state->fd.get() : fd.get(); }
};

HandshakeAcceptor::HandshakeAcceptor(int listener, AcceptorOptions options, OnLink on_link)
    : listener_(listener), options_(std::move(options)), on_link_(std::move(on_link)) {
  SetBlocking(listener_, false);
  options_.max_pending = std::max<size_t>(options_.max_pending, 1);
  options_.max_pending_per_source = std::clamp<size_t>(options_.max_pending_per_source, 1, options_.max_pending);
  options_.early_drop_from = std::min(options_.early_drop_from, options_.max_pending);
}

void HandshakeAcceptor::EvictOldestOf(const std::string& source) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if ((*it)->source != source) continue;
    log::Get("net")->debug("{}: dropping the oldest unauthenticated connection of {} to make room", options_.what,
                           (*it)->peer);
    pending_.erase(it);
    ++stats_.evicted;
    return;
  }
}

bool HandshakeAcceptor::Admit(const std::string& source) {
  size_t mine = 0;
  bool others = false;
  for (const auto& p : pending_) {
    if (p->source == source)
      ++mine;
    else
      others = true;
  }
  // Under pressure (from early_drop_from held), an address at its cap while another address waits
  // only churns its own slots. A burst from one address alone (the agents of a simulated cluster
  // all come from 127.0.0.1) is left alone until the global cap.
  if (mine >= options_.max_pending_per_source && others && pending_.size() >= options_.early_drop_from) {
    EvictOldestOf(source);
    return true;
  }
  if (pending_.size() >= options_.max_pending) {
    std::map<std::string, size_t> by_source;
    for (const auto& p : pending_) ++by_source[p->source];
    auto most = std::max_element(by_source.begin(), by_source.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    EvictOldestOf(most->first);
  }
  return true;
}

HandshakeAcceptor::~HandshakeAcceptor() = default;

void HandshakeAcceptor::Poll(Duration timeout, std::vector<pollfd>* extra) {
  auto now = std::chrono::steady_clock::now();
  const bool accepting = now >= accept_paused_until_;
  std::vector<pollfd> fds;
  fds.reserve(1 + pending_.size() + (extra ? extra->size() : 0));
  fds.push_back({accepting ? listener_ : -1, POLLIN, 0});
  MonoTime wake = now + timeout;
  if (!accepting) wake = std::min(wake, accept_paused_until_);
  for (const auto& p : pending_) {
    fds.push_back({p->socket(), POLLIN, 0});
    wake = std::min(wake, p->deadline);
  }
  const size_t first_extra = fds.size();
  if (extra)
    for (const auto& e : *extra) fds.push_back({e.fd, e.events, 0});
  int ms = static_cast<int>(
      std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1, 0, 1 << 30));
  int pr = ::poll(fds.data(), fds.size(), ms);
  if (pr < 0 && errno != EINTR) log::Get("net")->warn("{}: poll: {}", options_.what, std::strerror(errno));
  now = std::chrono::steady_clock::now();
  if (extra)
    for (size_t i = 0; i < extra->size(); ++i) (*extra)[i].revents = pr > 0 ? fds[first_extra + i].revents : 0;
  // Pending handshakes first (indices into fds are stable until Accept adds or evicts).
  std::vector<std::unique_ptr<Pending>> keep;
  keep.reserve(pending_.size());
  for (size_t i = 0; i < pending_.size(); ++i) {
    auto& p = pending_[i];
    bool ready = pr > 0 && fds[1 + i].revents != 0;
    bool alive = true;
    if (ready || now >= p->deadline) alive = Advance(*p, now);
    if (alive) keep.push_back(std::move(p));
  }
  pending_.assign(std::make_move_iterator(keep.begin()), std::make_move_iterator(keep.end()));
  if (accepting && pr > 0 && (fds[0].revents & POLLIN)) Accept(now);
}

void HandshakeAcceptor::Accept(MonoTime now) {
  auto log = log::Get("net");
  for (int i = 0; i < 64; ++i) {  // bounded per round, so pending handshakes are not starved
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int c = ::accept4(listener_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // EMFILE, ENFILE, ENOBUFS, ENOMEM: the connection stays in the backlog. Free an fd held by
      // an unauthenticated peer and stop polling the listener for a while, instead of spinning.
      ++stats_.accept_errors;
      backoff_ = std::clamp<Duration>(backoff_ * 2, std::chrono::milliseconds(50), std::chrono::seconds(1));
      accept_paused_until_ = now + backoff_;
      if (!pending_.empty()) {
        pending_.pop_front();
        ++stats_.evicted;
      }
      log->warn("{}: accept: {}; pausing {} ms ({} unauthenticated connections held)", options_.what,
                std::strerror(errno), std::chrono::duration_cast<std::chrono::milliseconds>(backoff_).count(),
                pending_.size());
      return;
    }
    backoff_ = Duration::zero();
    ++stats_.accepted;
    char host[NI_MAXHOST] = {}, serv[NI_MAXSERV] = {};
    ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV);
    if (!Admit(host)) {
      ::close(c);
      continue;
    }
    auto p = std::make_unique<Pending>();
    p->fd = Fd(c);
    p->source = host;
    p->peer = std::string(host) + ":" + serv;
    p->deadline = now + options_.handshake_timeout;
    pending_.push_back(std::move(p));
  }
}

bool HandshakeAcceptor::Advance(Pending& p, MonoTime now) {
  char buf[4096];
  bool got_bytes = false;
  while (true) {
    ssize_t n = ::recv(p.socket(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // A connect probe (net::ProbeMany) closes with a reset rather than a FIN.
    bool reset = n < 0 && errno == ECONNRESET;
    if (n < 0 && !reset) {
      Refuse(p, std::string("recv: ") + std::strerror(errno));
      return false;
    }
    if (n == 0 || reset) {
      if (p.received == 0) {
        ++stats_.probes;
        log::Get("net")->debug("{}: connection from {} closed without a byte (a connectivity probe)", options_.what,
                               p.peer);
      } else {
        Refuse(p, "closed the connection during the TLS handshake");
      }
      return false;
    }
    p.received += static_cast<size_t>(n);
    if (p.received > kMaxPreAuthBytes) {
      Refuse(p, "sent more than " + std::to_string(kMaxPreAuthBytes) + " bytes before authenticating");
      return false;
    }
    got_bytes = true;
    if (p.state) {
      p.state->FeedInput(buf, static_cast<size_t>(n));
      continue;
    }
    p.head.append(buf, static_cast<size_t>(n));
    if (p.head.size() < 5) continue;
    // The first record must be a TLS handshake record small enough for a ClientHello; this is
    // checked on five raw bytes before OpenSSL parses anything.
    const auto* h = reinterpret_cast<const unsigned char*>(p.head.data());
    if (p.head.compare(0, 3, "DSD") == 0) {
      (void)SendFrame(p.fd.get(),
                      {{"type", "error"},
                       {"code", "unauthenticated"},
                       {"message", "this dsdoctor requires TLS links (protocol 2); upgrade the connecting side"}});
      Refuse(p, "it speaks the plaintext protocol of an older dsdoctor");
      return false;
    }
    if (h[0] != 0x16 || h[1] != 0x03) {
      Refuse(p, "not a TLS handshake");
      return false;
    }
    size_t record = (static_cast<size_t>(h[3]) << 8) | h[4];
    if (record > kMaxHelloRecordBytes) {
      Refuse(p, "a ClientHello record of " + std::to_string(record) + " bytes (at most " +
                    std::to_string(kMaxHelloRecordBytes) + " accepted)");
      return false;
    }
    if (p.head.size() < 5 + record) continue;
    p.state = Link::State::Make(Fd(p.fd.Release()), options_.key, /*server=*/true);
    if (!p.state) {
      Refuse(p, "TLS server context: " + OpenSslErrors());
      return false;
    }
    p.state->FeedInput(p.head.data(), p.head.size());
    p.head.clear();
  }
  if (p.state && got_bytes) {
    Link::State& s = *p.state;
    ERR_clear_error();
    int r = SSL_do_handshake(s.ssl);
    int err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(s.ssl, r);
    unsigned long queued = err == SSL_ERROR_SSL ? ERR_peek_error() : 0;
    std::string out;
    {
      std::lock_guard<std::mutex> lock(s.ssl_mu);
      s.DrainOutput(&out);
    }
    // Handshake flights are a few hundred bytes and the socket is fresh: they fit its buffer.
    if (!out.empty() &&
        ::send(s.fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(out.size())) {
      ERR_clear_error();
      Refuse(p, "could not send the TLS handshake reply");
      return false;
    }
    if (r == 1 && SSL_session_reused(s.ssl)) {
      ++stats_.authenticated;
      SetBlocking(s.fd.get(), true);
      int one = 1;
      ::setsockopt(s.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::string peer = p.peer;
      on_link_(Link(std::move(p.state)), peer);
      return false;
    }
    if (err != SSL_ERROR_WANT_READ) {
      bool denied = false;
      std::string why = HandshakeFailure(queued, &denied);
      ERR_clear_error();
      Refuse(p, why);
      return false;
    }
  }
  if (now >= p.deadline) {
    Refuse(p, (p.received == 0 ? "sent nothing within " : "no complete TLS handshake within ") +
                  Seconds(options_.handshake_timeout) + " s");
    return false;
  }
  return true;
}

void HandshakeAcceptor::Refuse(Pending& p, const std::string& why) {
  ++stats_.refused;
  auto log = log::Get("net");
  auto now = std::chrono::steady_clock::now();
  // Refusals are an attacker's to cause: at most 10 warnings a minute, then a count.
  if (now - log_window_start_ >= std::chrono::minutes(1)) {
    if (suppressed_in_window_ > 0) {
      log->warn("{}: {} more unauthenticated connections refused in the last minute", options_.what,
                suppressed_in_window_);
    }
    log_window_start_ = now;
    logged_in_window_ = 0;
    suppressed_in_window_ = 0;
  }
  if (logged_in_window_ < 10) {
    ++logged_in_window_;
    log->warn("{}: refused connection from {}: {}", options_.what, p.peer, why);
  } else {
    ++suppressed_in_window_;
    log->debug("{}: refused connection from {}: {}", options_.what, p.peer, why);
  }
  p.state.reset();
  p.fd.Reset();
}

}  // namespace dsd::net
