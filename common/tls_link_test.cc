#include "common/tls_link.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace dsd::net {
namespace {

using namespace std::chrono_literals;

// A listener served by a HandshakeAcceptor on its own thread; authenticated links are kept.
class Server {
 public:
  explicit Server(const std::string& token, size_t max_pending = 64, Duration handshake_timeout = 5s) {
    listener_ = std::move(Listen("127.0.0.1", 0, &port_, 1024).value());
    AcceptorOptions o;
    o.key = LinkKey::FromToken(token);
    o.max_pending = max_pending;
    o.handshake_timeout = handshake_timeout;
    acceptor_ = std::make_unique<HandshakeAcceptor>(listener_.get(), o, [this](Link link, const std::string&) {
      std::lock_guard<std::mutex> lock(mu_);
      links_.push_back(std::move(link));
    });
    thread_ = std::thread([this] {
      while (!stop_) {
        acceptor_->Poll(20ms);
        std::lock_guard<std::mutex> lock(mu_);
        stats_ = acceptor_->stats();
        pending_ = acceptor_->pending();
      }
    });
  }
  ~Server() {
    stop_ = true;
    thread_.join();
  }
  int port() const { return port_; }
  AcceptorStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_;
  }
  // Waits for the n-th authenticated link.
  Link* WaitLink(size_t n = 1) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (links_.size() >= n) return &links_[n - 1];
      }
      std::this_thread::sleep_for(10ms);
    }
    return nullptr;
  }
  template <typename Pred>
  bool WaitStats(Pred pred) {
    for (int i = 0; i < 1000; ++i) {
      if (pred(stats())) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

 private:
  Fd listener_;
  int port_ = 0;
  std::unique_ptr<HandshakeAcceptor> acceptor_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::deque<Link> links_;
  AcceptorStats stats_;
  size_t pending_ = 0;
};

Fd Dial(int port) {
  auto c = net::Connect("127.0.0.1", port, 2s);
  EXPECT_EQ(c.outcome, ConnectOutcome::kOk) << c.error;
  return std::move(c.fd);
}

Result<Link> ConnectLink(int port, const std::string& token) {
  return Link::Connect(Dial(port), LinkKey::FromToken(token), 5s);
}

std::string ReadSome(int fd, Duration timeout) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

TEST(LinkKeyTest, SameTokenSameKeyAndTheKeyIsNotTheToken) {
  LinkKey a = LinkKey::FromToken("t0ken"), b = LinkKey::FromToken("t0ken"), c = LinkKey::FromToken("t0keN");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.bytes(), b.bytes());
  EXPECT_NE(a.bytes(), c.bytes());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(a.bytes().data()), 5).find("t0ken"), std::string::npos);
}

TEST(TlsLinkTest, FramesBothWaysIncludingLargeOnes) {
  Server server("secret");
  auto client = ConnectLink(server.port(), "secret");
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Link* peer = server.WaitLink();
  ASSERT_NE(peer, nullptr);
  wire::FrameDecoder client_dec, server_dec;
  ASSERT_TRUE(SendFrame(*client, {{"type", "hello"}, {"role", "coordinator"}}).ok());
  auto hello = RecvFrame(*peer, server_dec, 5s);
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  EXPECT_EQ((*hello)["role"], "coordinator");
  std::string big(5u << 20, 'z');
  big[12345] = 'A';
  // The receiver reads while the sender writes: 5 MiB is more than the socket buffers hold.
  std::thread sender([&] { EXPECT_TRUE(SendFrame(*peer, {{"type", "log"}, {"data", big}}).ok()); });
  auto got = RecvFrame(*client, client_dec, 10s);
  sender.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["data"].get<std::string>(), big);
  EXPECT_FALSE(client->HasPendingInput());
}

TEST(TlsLinkTest, TheTokenNeverCrossesTheWire) {
  // A recording relay between client and server sees every byte in both directions.
  const std::string token = "0123456789abcdef-the-job-token";
  Server server(token);
  int relay_port = 0;
  Fd relay_listener = std::move(Listen("127.0.0.1", 0, &relay_port).value());
  std::string seen;
  std::mutex seen_mu;
  std::thread relay([&] {
    int c = ::accept(relay_listener.get(), nullptr, nullptr);
    Fd in(c), out = Dial(server.port());
    for (int round = 0; round < 200; ++round) {
      pollfd p[2] = {{in.get(), POLLIN, 0}, {out.get(), POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      char buf[65536];
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP))) continue;
        ssize_t n = ::recv(p[i].fd, buf, sizeof buf, 0);
        if (n <= 0) return;
        {
          std::lock_guard<std::mutex> lock(seen_mu);
          seen.append(buf, static_cast<size_t>(n));
        }
        ASSERT_TRUE(SendAll(i == 0 ? out.get() : in.get(), std::string_view(buf, static_cast<size_t>(n))).ok());
      }
    }
  });
  auto client = ConnectLink(relay_port, token);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE(SendFrame(*client, {{"type", "hello"}, {"note", "plain words"}}).ok());
  Link* peer = server.WaitLink();
  ASSERT_NE(peer, nullptr);
  wire::FrameDecoder dec;
  ASSERT_TRUE(RecvFrame(*peer, dec, 5s).ok());
  client->Shutdown();
  relay.join();
  std::lock_guard<std::mutex> lock(seen_mu);
  EXPECT_GT(seen.size(), 200u);
  EXPECT_EQ(seen.find(token), std::string::npos);
  EXPECT_EQ(seen.find("plain words"), std::string::npos);  // frames are encrypted too
  EXPECT_EQ(seen.find("hello"), std::string::npos);
}

TEST(TlsLinkTest, WrongTokenIsPermissionDeniedOnBothSides) {
  Server server("right");
  auto client = ConnectLink(server.port(), "wrong");
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kPermissionDenied) << client.status().ToString();
  EXPECT_TRUE(server.WaitStats([](const AcceptorStats& s) { return s.refused == 1; }));
  EXPECT_EQ(server.stats().authenticated, 0u);
}

TEST(TlsLinkTest, ReplayedHandshakeAuthenticatesNothing) {
  const std::string token = "replay-me";
  // Record what a real client sends to a listener that plays no part.
  int rec_port = 0;
  Fd recorder = std::move(Listen("127.0.0.1", 0, &rec_port).value());
  std::string captured;
  std::thread rec([&] {
    Fd c(::accept(recorder.get(), nullptr, nullptr));
    captured = ReadSome(c.get(), 1s);
  });
  auto nothing = Link::Connect(Dial(rec_port), LinkKey::FromToken(token), 1500ms);
  rec.join();
  ASSERT_FALSE(nothing.ok());
  ASSERT_GT(captured.size(), 100u);

  // Replay those bytes, byte for byte, to a server that holds the token.
  Server server(token, 64, 2s);
  Fd replay = Dial(server.port());
  ASSERT_TRUE(SendAll(replay.get(), captured).ok());
  std::string answer = ReadSome(replay.get(), 3s);
  ASSERT_TRUE(server.WaitStats([](const AcceptorStats& s) { return s.refused == 1; }));
  EXPECT_EQ(server.stats().authenticated, 0u);
  EXPECT_EQ(server.WaitLink(1), nullptr);
}

TEST(TlsLinkTest, InjectedRecordIsRejected) {
  Server server("k");
  auto client = ConnectLink(server.port(), "k");
  ASSERT_TRUE(client.ok());
  Link* peer = server.WaitLink();
  ASSERT_NE(peer, nullptr);
  // An application-data record of 32 bytes that was not sealed with the session key.
  std::string forged = std::string("\x17\x03\x03\x00\x20", 5) + std::string(32, '\x42');
  ASSERT_TRUE(SendAll(client->fd(), forged).ok());
  std::string out;
  Status st = peer->Recv(&out, 5s);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_TRUE(out.empty());
}

TEST(TlsLinkTest, OversizedOrForeignFirstRecordIsRefusedBeforeParsing) {
  Server server("k");
  {
    Fd c = Dial(server.port());
    // A handshake record header announcing 16 KiB, then a flood.
    std::string flood = std::string("\x16\x03\x01\x40\x00", 5) + std::string(1u << 20, '\x01');
    (void)SendAll(c.get(), flood);  // the server may close mid-way
  }
  {
    Fd c = Dial(server.port());
    ASSERT_TRUE(SendAll(c.get(), "GET / HTTP/1.1\r\n\r\n").ok());
  }
  {
    // An older dsdoctor's plaintext hello gets a plaintext error frame it can show.
    Fd c = Dial(server.port());
    ASSERT_TRUE(SendFrame(c.get(), {{"type", "hello"}, {"token", "k"}}).ok());
    wire::FrameDecoder dec;
    auto reply = RecvFrame(c.get(), dec, 5s);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ((*reply)["code"], "unauthenticated");
    EXPECT_NE((*reply)["message"].get<std::string>().find("TLS"), std::string::npos);
  }
  EXPECT_TRUE(server.WaitStats([](const AcceptorStats& s) { return s.refused == 3; }));
  auto client = ConnectLink(server.port(), "k");
  EXPECT_TRUE(client.ok()) << client.status().ToString();
}

TEST(TlsLinkTest, ConnectivityProbeIsCountedNotRefused) {
  Server server("k");
  { Fd c = Dial(server.port()); }
  EXPECT_TRUE(server.WaitStats([](const AcceptorStats& s) { return s.probes == 1; }));
  EXPECT_EQ(server.stats().refused, 0u);
}

TEST(TlsLinkTest, IdleFloodDoesNotKeepARealClientOut) {
  Server server("k", /*max_pending=*/16);
  std::vector<Fd> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(Dial(server.port()));
  ASSERT_TRUE(server.WaitStats([](const AcceptorStats& s) { return s.accepted == 100; }));
  EXPECT_LE(server.pending(), 16u);
  EXPECT_GE(server.stats().evicted, 84u);
  auto client = ConnectLink(server.port(), "k");
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_NE(server.WaitLink(), nullptr);
}

// A connection to 127.0.0.1 from another loopback address: a second source on one machine.
Fd DialFrom(const char* source, int port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0)
    return Fd();
  return fd;
}

// One address churning one-byte connections as fast as it can (the case that failed 6 checks in
// 10): its connections only evict each other (the address holding the most loses its oldest; while
// another address waits, it holds at most max_pending_per_source), so every real handshake from
// another address completes.
TEST(TlsLinkTest, AChurningSourceCannotKeepAnotherAddressOut) {
  Server server("k", /*max_pending=*/16);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> churned{0};
  std::thread churn([&] {
    std::deque<Fd> held;  // each kept open a while, as a slow attacker would
    while (!stop) {
      Fd c = DialFrom("127.0.0.2", server.port());
      if (!c.valid()) continue;
      (void)::send(c.get(), "\x16", 1, MSG_NOSIGNAL);
      held.push_back(std::move(c));
      if (held.size() > 200) held.pop_front();
      ++churned;
    }
  });
  ASSERT_TRUE(server.WaitStats([](const AcceptorStats& s) { return s.evicted > 100; }));
  size_t most_pending = 0;
  std::vector<Link> clients;  // kept open: the server hands each over
  for (int i = 0; i < 10; ++i) {
    auto client = ConnectLink(server.port(), "k");
    EXPECT_TRUE(client.ok()) << "handshake " << i << ": " << client.status().ToString();
    if (client.ok()) clients.push_back(std::move(*client));
    most_pending = std::max(most_pending, server.pending());
  }
  stop = true;
  churn.join();
  EXPECT_NE(server.WaitLink(10), nullptr);
  EXPECT_LE(most_pending, 16u) << "never past max_pending";
  EXPECT_GT(churned.load(), 100u);
}

TEST(TlsLinkTest, SilentConnectionTimesOut) {
  Server server("k", 64, 300ms);
  Fd c = Dial(server.port());
  ASSERT_TRUE(SendAll(c.get(), std::string("\x16\x03", 2)).ok());  // a partial header, then nothing
  EXPECT_TRUE(server.WaitStats([](const AcceptorStats& s) { return s.refused == 1; }));
  EXPECT_EQ(server.pending(), 0u);
}

TEST(TlsLinkTest, OutOfDescriptorsBacksOffAndRecovers) {
  Server server("k");
  { Fd warm = Dial(server.port()); }  // the server's thread runs before descriptors run out
  ASSERT_TRUE(server.WaitStats([](const AcceptorStats& s) { return s.probes == 1; }));
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  // Leave exactly enough descriptors for a few dials: the server's accept() then fails EMFILE.
  std::vector<Fd> held;
  int probe = ::dup(0);
  ::close(probe);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(probe + 2);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<Fd> dials;
  for (int i = 0; i < 2; ++i) {
    auto c = net::Connect("127.0.0.1", server.port(), 2s);
    if (c.outcome == ConnectOutcome::kOk) dials.push_back(std::move(c.fd));
  }
  std::this_thread::sleep_for(1s);
  AcceptorStats during = server.stats();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_GE(during.accept_errors, 1u);
  // With back-off from 50 ms doubling to 1 s, one second holds a handful of attempts, not a spin.
  EXPECT_LE(during.accept_errors, 10u);
  dials.clear();
  auto client = ConnectLink(server.port(), "k");
  EXPECT_TRUE(client.ok()) << client.status().ToString();
}

TEST(TlsLinkTest, SendAndRecvRunConcurrently) {
  Server server("k");
  auto client = ConnectLink(server.port(), "k");
  ASSERT_TRUE(client.ok());
  Link* peer = server.WaitLink();
  ASSERT_NE(peer, nullptr);
  constexpr int kFrames = 300;
  auto pump = [](Link& link, int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(SendFrame(link, {{"i", i}, {"pad", std::string(i * 37, 'p')}}).ok());
  };
  auto drain = [](Link& link, int n) {
    wire::FrameDecoder dec;
    for (int i = 0; i < n; ++i) {
      auto f = RecvFrame(link, dec, 10s);
      ASSERT_TRUE(f.ok()) << f.status().ToString();
      ASSERT_EQ((*f)["i"], i);
    }
  };
  std::thread a(pump, std::ref(*client), kFrames), b(drain, std::ref(*peer), kFrames);
  std::thread c(pump, std::ref(*peer), kFrames), d(drain, std::ref(*client), kFrames);
  a.join();
  b.join();
  c.join();
  d.join();
}

TEST(TlsLinkTest, RawStreamAfterARecord) {
  // The p2p probe: a "sink" frame inside TLS, then raw filler on the same socket.
  Server server("k");
  auto client = ConnectLink(server.port(), "k");
  ASSERT_TRUE(client.ok());
  Link* peer = server.WaitLink();
  ASSERT_NE(peer, nullptr);
  ASSERT_TRUE(SendFrame(*client, {{"type", "sink"}}).ok());
  ASSERT_TRUE(SendRaw(*client, std::string(100000, 'x')).ok());
  ::shutdown(client->fd(), SHUT_WR);
  wire::FrameDecoder dec;
  auto sink = RecvFrame(*peer, dec, 5s);
  ASSERT_TRUE(sink.ok());
  size_t raw = dec.TakeBuffered().size() + peer->TakeRawInput().size();
  raw += ReadSome(peer->fd(), 2s).size();
  EXPECT_EQ(raw, 100000u);
  ASSERT_TRUE(SendFrame(*peer, {{"type", "sunk"}, {"bytes", raw}}).ok());
  wire::FrameDecoder cdec;
  auto ack = RecvFrame(*client, cdec, 5s);
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  EXPECT_EQ((*ack)["bytes"], 100000);
}

}  // namespace
}  // namespace dsd::net
