#include "common/net.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <thread>
#include <vector>

namespace dsd::net {
namespace {

using namespace std::chrono_literals;

// A port with nothing listening on it: bound, then closed.
int ClosedPort() {
  int port = 0;
  auto fd = Listen("127.0.0.1", 0, &port);
  EXPECT_TRUE(fd.ok());
  return port;
}

// A port for another process's listener: bindable on every address, and not one the kernel would
// give an outgoing connection (below ip_local_port_range where the range leaves room).
TEST(PickUnusedPortTest, IsFreeOnEveryAddressAndOutsideTheEphemeralRange) {
  int eph_lo = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    EXPECT_EQ(std::fscanf(f, "%d", &eph_lo), 1);
    std::fclose(f);
  }
  for (int i = 0; i < 20; ++i) {
    const int port = PickUnusedPort();
    if (eph_lo > 21000) {
      EXPECT_GE(port, 20000);
      EXPECT_LT(port, eph_lo);
    }
    EXPECT_TRUE(Listen("0.0.0.0", port).ok()) << port;
  }
  // A port held by a listener is never picked: hold many, and none comes back while held.
  std::vector<Fd> held;
  std::set<int> ports;
  for (int i = 0; i < 50; ++i) {
    const int port = PickUnusedPort();
    EXPECT_FALSE(ports.count(port)) << port << " was picked while a listener held it";
    auto l = Listen("0.0.0.0", port);
    ASSERT_TRUE(l.ok()) << port;
    held.push_back(std::move(*l));
    ports.insert(port);
  }
}

TEST(ProbeManyTest, ClassifiesEveryTargetInOrder) {
  int open_port = 0;
  auto listener = Listen("127.0.0.1", 0, &open_port);
  ASSERT_TRUE(listener.ok());
  int closed = ClosedPort();
  std::vector<ProbeTarget> targets;
  for (int i = 0; i < 50; ++i) targets.push_back({"127.0.0.1", i % 2 ? closed : open_port});
  ProbeOptions options;
  options.timeout = 2s;
  options.max_in_flight = 4;  // more targets than in flight: the loop refills its slots
  auto results = ProbeMany(targets, options);
  ASSERT_EQ(results.size(), 50u);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].outcome, i % 2 ? ConnectOutcome::kRefused : ConnectOutcome::kOk) << i;
    EXPECT_FALSE(results[i].retried);
    if (i % 2) {
      EXPECT_EQ(results[i].error, "Connection refused");
    }
  }
}

TEST(ProbeManyTest, ASynDroppedByAFullListenQueueSucceedsOnTheSecondTry) {
  // Backlog 8: nine connections fit in the accept queue of a listener that never accepts; the
  // kernel drops the other SYNs, as when thousands of nodes probe one listener at once. Then the
  // queue grows (listen() again), as it empties on a listener that catches up, and the retries fit.
  int port = 0;
  auto listener = Listen("127.0.0.1", 0, &port, 8);
  ASSERT_TRUE(listener.ok());
  std::thread grow([&] {
    std::this_thread::sleep_for(100ms);  // after the first attempts, well before their timeout
    ::listen(listener->get(), 128);
  });
  std::vector<ProbeTarget> targets(40, {"127.0.0.1", port});
  ProbeOptions options;
  options.timeout = 900ms;  // shorter than the kernel's first SYN retransmission (1 s)
  auto results = ProbeMany(targets, options);
  grow.join();
  int retried = 0;
  for (const auto& r : results) {
    EXPECT_EQ(r.outcome, ConnectOutcome::kOk) << r.error;
    retried += r.retried;
  }
  EXPECT_GE(retried, 20);  // most SYNs were dropped on the first pass
}

TEST(ProbeManyTest, WithoutRetryAFullQueueTimesOut) {
  int port = 0;
  auto listener = Listen("127.0.0.1", 0, &port, 0);
  ASSERT_TRUE(listener.ok());
  std::vector<ProbeTarget> targets(6, {"127.0.0.1", port});
  ProbeOptions options;
  options.timeout = 300ms;
  options.retry_timeouts = false;
  auto results = ProbeMany(targets, options);
  int timeouts = 0;
  for (const auto& r : results) timeouts += r.outcome == ConnectOutcome::kTimeout;
  EXPECT_GE(timeouts, 1);
}

TEST(ProbeManyTest, RetriesStopAfter32InARowTimeOutAgain) {
  // A listener that never accepts, with room for one connection: every later SYN is dropped, on
  // the first pass and on the retry alike, as behind a DROP rule. The retry pass gives up after 32
  // timeouts in a row instead of retrying all 200 targets (those already
  // started when the 32nd timed out finish).
  int port = 0;
  auto listener = Listen("127.0.0.1", 0, &port, 0);
  ASSERT_TRUE(listener.ok());
  std::vector<ProbeTarget> targets(200, {"127.0.0.1", port});
  ProbeOptions options;
  options.timeout = 300ms;
  auto results = ProbeMany(targets, options);
  int timeouts = 0, retried = 0;
  for (const auto& r : results) {
    timeouts += r.outcome == ConnectOutcome::kTimeout;
    retried += r.retried;
  }
  EXPECT_GE(timeouts, 190);
  EXPECT_GE(retried, 32);
  EXPECT_LT(retried, 150);  // 8 start every 50 ms: ~72 have started when the 32nd times out
}

// Waits up to `timeout` for a connection to accept.
bool Acceptable(int listener, std::chrono::milliseconds timeout) {
  pollfd p{listener, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

TEST(DeferAcceptTest, ProbesAreAnsweredButNeverAccepted) {
  int port = 0;
  auto listener = Listen("127.0.0.1", 0, &port);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE(DeferAccept(listener->get(), 5s).ok());
  auto results = ProbeMany(std::vector<ProbeTarget>(20, {"127.0.0.1", port}), ProbeOptions{});
  for (const auto& r : results) EXPECT_EQ(r.outcome, ConnectOutcome::kOk) << r.error;
  // Without TCP_DEFER_ACCEPT the 20 reset connections would wait in the accept queue.
  EXPECT_FALSE(Acceptable(listener->get(), 200ms));
}

TEST(DeferAcceptTest, AClientThatSpeaksIsAcceptedWithItsBytesAndASilentOneWaits) {
  int port = 0;
  auto listener = Listen("127.0.0.1", 0, &port);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE(DeferAccept(listener->get(), 5s).ok());
  auto silent = Connect("127.0.0.1", port, 2s);
  ASSERT_EQ(silent.outcome, ConnectOutcome::kOk) << silent.error;
  // The kernel holds a silent connection at least until its first SYN-ACK retransmission (1 s).
  EXPECT_FALSE(Acceptable(listener->get(), 300ms));
  auto speaker = Connect("127.0.0.1", port, 2s);
  ASSERT_EQ(speaker.outcome, ConnectOutcome::kOk) << speaker.error;
  ASSERT_TRUE(SendAll(speaker.fd.get(), "hello").ok());
  ASSERT_TRUE(Acceptable(listener->get(), 5s));
  Fd accepted(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  char buf[8] = {};
  ASSERT_TRUE(Acceptable(accepted.get(), 5s));  // readable: the bytes, or the end of a silent one
  EXPECT_EQ(::recv(accepted.get(), buf, sizeof buf, MSG_DONTWAIT), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
}

TEST(ProbeManyTest, EmptyListIsFine) { EXPECT_TRUE(ProbeMany({}, ProbeOptions{}).empty()); }

}  // namespace
}  // namespace dsd::net
