// The cost of TLS on dsdoctor's links (docs/security.md): a handshake over loopback, and bytes
// through an established link against the same bytes through the bare socket.
#include <benchmark/benchmark.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "common/tls_link.h"

namespace {

using namespace std::chrono_literals;
using dsd::net::Link;

// A listener whose acceptor keeps the newest authenticated link; handshakes on its own thread.
struct Server {
  dsd::net::Fd listener;
  int port = 0;
  std::atomic<bool> stop{false};
  std::mutex mu;
  Link last;
  std::thread thread;
  Server() {
    listener = std::move(dsd::net::Listen("127.0.0.1", 0, &port, 1024).value());
    thread = std::thread([this] {
      dsd::net::AcceptorOptions o;
      o.key = dsd::net::LinkKey::FromToken("bench");
      dsd::net::HandshakeAcceptor acceptor(listener.get(), o, [this](Link link, const std::string&) {
        std::lock_guard<std::mutex> lock(mu);
        last = std::move(link);
      });
      while (!stop) acceptor.Poll(10ms);
    });
  }
  ~Server() {
    stop = true;
    thread.join();
  }
};

void BM_Handshake(benchmark::State& state) {
  Server server;
  auto key = dsd::net::LinkKey::FromToken("bench");
  for (auto _ : state) {
    auto c = dsd::net::Connect("127.0.0.1", server.port, 2s);
    auto link = Link::Connect(std::move(c.fd), key, 5s);
    if (!link.ok()) state.SkipWithError(link.status().ToString().c_str());
  }
}
BENCHMARK(BM_Handshake)->UseRealTime();

// Sends state.range(0)-byte chunks; a reader thread on the other end drains them.
void BM_LinkSend(benchmark::State& state) {
  Server server;
  auto c = dsd::net::Connect("127.0.0.1", server.port, 2s);
  auto link = Link::Connect(std::move(c.fd), dsd::net::LinkKey::FromToken("bench"), 5s);
  Link* peer = nullptr;
  for (int i = 0; i < 500 && !peer; ++i) {
    std::this_thread::sleep_for(2ms);
    std::lock_guard<std::mutex> lock(server.mu);
    if (server.last.valid()) peer = &server.last;
  }
  std::atomic<bool> done{false};
  std::thread reader([&] {
    std::string sink;
    while (!done) {
      sink.clear();
      (void)peer->Recv(&sink, 100ms);
    }
  });
  std::string chunk(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) (void)link->Send(chunk);
  state.SetBytesProcessed(state.iterations() * state.range(0));
  done = true;
  link->Shutdown();
  reader.join();
}
BENCHMARK(BM_LinkSend)->Arg(4096)->Arg(1 << 20)->UseRealTime();

// The same through the bare socket: what the links cost over plaintext.
void BM_PlainSend(benchmark::State& state) {
  int port = 0;
  auto listener = std::move(dsd::net::Listen("127.0.0.1", 0, &port).value());
  auto c = dsd::net::Connect("127.0.0.1", port, 2s);
  dsd::net::Fd peer(::accept(listener.get(), nullptr, nullptr));
  std::thread reader([&] {
    std::vector<char> buf(1 << 20);
    while (::recv(peer.get(), buf.data(), buf.size(), 0) > 0) {
    }
  });
  std::string chunk(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) (void)dsd::net::SendAll(c.fd.get(), chunk);
  state.SetBytesProcessed(state.iterations() * state.range(0));
  ::shutdown(c.fd.get(), SHUT_RDWR);
  reader.join();
}
BENCHMARK(BM_PlainSend)->Arg(4096)->Arg(1 << 20)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
