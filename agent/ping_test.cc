#include "agent/ping.h"

#include <gtest/gtest.h>

namespace dsd::agent {
namespace {

using nlohmann::json;

TEST(PingTest, RequestTextRoundTrips) {
  json table = json::array({json::array({"127.0.0.2", 47000}), json::array({"node-b", 47001})});
  std::string text = PingRequestText(7, table.dump(), 1, {0}, 1500, 16);
  EXPECT_TRUE(ParsePingRequest(json::parse(text))->ok_latency);
  EXPECT_FALSE(ParsePingRequest(json::parse(PingRequestText(7, table.dump(), 1, {0}, 1500, 16, false)))->ok_latency);
  json parsed = json::parse(text);
  EXPECT_EQ(parsed["id"], 7);
  EXPECT_EQ(parsed["type"], "ping");
  auto request = ParsePingRequest(parsed);
  ASSERT_TRUE(request.ok()) << request.status().message();
  ASSERT_EQ(request->targets.size(), 2u);
  EXPECT_EQ(request->targets[1].host, "node-b");
  EXPECT_EQ(request->targets[1].port, 47001);
  EXPECT_EQ(request->start, 1u);
  EXPECT_EQ(request->skip, std::vector<size_t>{0});
  EXPECT_EQ(request->timeout_ms, 1500);
  EXPECT_EQ(request->max_in_flight, 16);
}

TEST(PingTest, BadRequestsNameTheField) {
  struct Case {
    json request;
    std::string message;
  };
  std::vector<Case> cases = {
      {{{"type", "ping"}}, "ping.targets: field is missing"},
      {{{"targets", json::array({json::array({"a"})})}}, "ping.targets[0]: not a [host, port] pair"},
      {{{"targets", json::array({json::array({"", 1})})}}, "ping.targets[0][0]: not a host name"},
      {{{"targets", json::array({json::array({"a", 0})})}}, "ping.targets[0][1]: not a port in 1..65535"},
      {{{"targets", json::array({json::array({"a", 70000})})}}, "ping.targets[0][1]: not a port"},
      {{{"targets", json::array()}, {"skip", json::array({-1})}}, "ping.skip: not a list of indices"},
      {{{"targets", json::array()}, {"max_in_flight", 0}}, "ping.max_in_flight: not in 1..4096"},
  };
  for (const auto& c : cases) {
    auto r = ParsePingRequest(c.request);
    ASSERT_FALSE(r.ok()) << c.request.dump();
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
}

TEST(PingTest, RunPingProbesInTheStaggeredOrderAndSkips) {
  int open_port = 0;
  auto listener = net::Listen("127.0.0.1", 0, &open_port);
  ASSERT_TRUE(listener.ok());
  int closed_port = 0;
  { auto l = net::Listen("127.0.0.1", 0, &closed_port); }
  PingRequest request;
  request.targets = {{"127.0.0.1", open_port}, {"127.0.0.1", closed_port}, {"127.0.0.1", open_port}};
  request.start = 2;
  request.skip = {0};
  auto reply = RunPing(request, "127.0.0.1");
  EXPECT_EQ(reply.outcomes, "-Ro");
  ASSERT_EQ(reply.errors.size(), 1u);
  EXPECT_EQ(reply.errors[0].first, 1u);
  EXPECT_EQ(reply.latency_us[0], 0u);
  auto parsed = ParsePingReply(PingReplyJson(reply, "node-0"), 3);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->outcomes, "-Ro");
  EXPECT_EQ(parsed->errors, reply.errors);
  // A coordinator of thousands of nodes asks for the failed targets' latencies only.
  const json failed_only = PingReplyJson(reply, "node-0", /*ok_latency=*/false);
  EXPECT_EQ(failed_only["latency_us"].size(), 1u) << failed_only.dump();
  auto slim = ParsePingReply(failed_only, 3);
  ASSERT_TRUE(slim.ok()) << slim.status().message();
  EXPECT_EQ(slim->outcomes, "-Ro");
  EXPECT_EQ(slim->latency_us[1], reply.latency_us[1]);
  EXPECT_EQ(slim->latency_us[2], 0u);
  // A neighbour-table overflow during the probes travels with the reply.
  PingReply full = reply;
  full.neigh_table_fulls = 3;
  full.neigh_gc_thresh3 = 1024;
  auto with_fulls = ParsePingReply(PingReplyJson(full, "node-0"), 3);
  ASSERT_TRUE(with_fulls.ok());
  EXPECT_EQ(with_fulls->neigh_table_fulls, 3u);
  EXPECT_EQ(with_fulls->neigh_gc_thresh3, 1024u);
  EXPECT_EQ(reply.neigh_table_fulls, 0u) << "a handful of loopback probes overflow nothing";
  // A count that does not match the failed letters is refused.
  json wrong = failed_only;
  wrong["latency_us"] = json::array({1, 2});
  EXPECT_FALSE(ParsePingReply(wrong, 3).ok());
}

TEST(PingTest, MalformedRepliesAreErrorsNotCrashes) {
  std::vector<json> bad = {
      json("x"),
      json::object(),
      {{"outcomes", "oo"}, {"latency_us", json::array({1})}},       // wrong length
      {{"outcomes", "o"}, {"latency_us", json::array({1})}},        // fewer targets than asked
      {{"outcomes", "oX"}, {"latency_us", json::array({1, 2})}},    // unknown letter
      {{"outcomes", "oo"}, {"latency_us", json::array({1, -2})}},   // negative latency
      {{"outcomes", "oo"}, {"latency_us", json::array({1, "2"})}},  // not a number
  };
  for (const auto& b : bad) EXPECT_FALSE(ParsePingReply(b, 2).ok()) << b.dump();
  // Junk in the optional lists is dropped, not trusted.
  json junk = {{"outcomes", "oD"},
               {"latency_us", json::array({1, 2})},
               {"errors", json::array({json::array({9, "x"}), json::array({1, "timeout"}), 3})},
               {"retried", json::array({5, 1, "a"})},
               {"listening", json::array({0, 47000, 70000})}};
  auto r = ParsePingReply(junk, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->errors.size(), 1u);
  EXPECT_EQ(r->retried, std::vector<size_t>{1});
  EXPECT_EQ(r->listening, std::vector<int>{47000});
}

}  // namespace
}  // namespace dsd::agent
