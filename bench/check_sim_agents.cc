// Simulated agents for the coordinator-only scale benchmark (bench/check_scale.sh): one process,
// one port, any number of TLS links, each answered as a separate node would answer. The
// coordinator under test (`dsdoctor check --agents …`) does all of its real work (TLS handshakes,
// requests, parsing replies, aggregation, reports); only the agents' side is synthetic:
//   inventory  this machine's real report (collected once), with a hostname per link
//   ping       every target ok with a plausible latency, except the node given by --blocked,
//              whose agent port times out from everyone (the finding must name that one node)
//   listen, shutdown  as an agent answers
// Single-threaded: one poll loop (HandshakeAcceptor plus the links). Not part of the product.
//
// Usage: check_sim_agents --token-file F [--port P] [--blocked NODE_INDEX]
// Prints "port=P" on stdout once listening.
#include <poll.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "agent/ping.h"
#include "agent/token.h"
#include "common/framing.h"
#include "common/net.h"
#include "common/tls_link.h"
#include "probe/inventory.h"
#include "probe/report.h"

namespace {

using nlohmann::json;
using namespace dsd;

constexpr const char* kHostMarker = "__SIM_HOST__";

struct SimLink {
  net::Link link;
  wire::FrameDecoder decoder;
  std::string name;
  bool closed = false;
};

class Sim {
 public:
  Sim(std::string report_text, long blocked) : report_text_(std::move(report_text)), blocked_(blocked) {}

  void Add(net::Link link) {
    auto l = std::make_unique<SimLink>();
    l->link = std::move(link);
    l->name = "sim-" + std::to_string(links_.size());
    links_.push_back(std::move(l));
  }

  void Extra(std::vector<pollfd>& fds) const {
    fds.clear();
    for (const auto& l : links_) fds.push_back({l->closed ? -1 : l->link.fd(), POLLIN, 0});
  }

  // Serves every link that has input; `fds` are the revents of Extra's list.
  void Serve(const std::vector<pollfd>& fds) {
    for (size_t i = 0; i < fds.size() && i < links_.size(); ++i) {
      SimLink& l = *links_[i];
      if (l.closed || (fds[i].revents == 0 && !l.link.HasPendingInput())) continue;
      std::string bytes;
      Status st = l.link.Recv(&bytes, Duration::zero());
      if (st.code() == StatusCode::kTimeout) continue;
      if (!st.ok()) {
        l.closed = true;
        continue;
      }
      l.decoder.Feed(bytes);
      while (true) {
        auto next = l.decoder.NextText();
        if (!next.ok() || !next->has_value()) break;
        HandleText(l, **next);
      }
    }
  }

 private:
  void Reply(SimLink& l, const std::string& text) {
    auto frame = wire::EncodeFrameText(text);
    if (!frame.ok() || !l.link.Send(*frame).ok()) l.closed = true;
  }

  // Every ping request holds the same target table (thousands of entries): it is parsed once, and
  // later requests parse only their small head, so this process keeps up with 16,000 links.
  void HandleText(SimLink& l, const std::string& text) {
    constexpr std::string_view kTargets = ",\"targets\":";
    const size_t at = text.find(kTargets);
    if (at != std::string::npos && text.find("\"type\":\"ping\"") < at) {
      const std::string_view table = std::string_view(text).substr(at + kTargets.size());
      if (table != table_text_) {
        auto full = wire::ParseFramePayload(text);
        if (!full.ok()) return;
        auto parsed = agent::ParsePingRequest(*full);
        if (!parsed.ok()) return Handle(l, *full);
        table_text_ = std::string(table);
        targets_ = parsed->targets;
      }
      auto head = wire::ParseFramePayload(text.substr(0, at) + ",\"targets\":[]}");
      if (!head.ok()) return;
      auto parsed = agent::ParsePingRequest(*head);
      if (!parsed.ok()) return Handle(l, *head);
      Reply(l, PingReply(*parsed, (*head).contains("id") ? (*head)["id"].dump() : "0", targets_.size()));
      return;
    }
    auto request = wire::ParseFramePayload(text);
    if (request.ok()) Handle(l, *request);
  }

  void Handle(SimLink& l, const json& request) {
    std::string type = request.value("type", "");
    std::string id = request.contains("id") ? request["id"].dump() : "0";
    if (type == "hello") {
      Reply(l, json{{"type", "welcome"}, {"name", l.name}, {"protocol", wire::kProtocolVersion}}.dump());
    } else if (type == "inventory") {
      std::string report = report_text_;
      for (size_t at; (at = report.find(kHostMarker)) != std::string::npos;)
        report.replace(at, std::strlen(kHostMarker), l.name);
      Reply(l, "{\"id\":" + id + ",\"type\":\"inventory\",\"name\":\"" + l.name + "\",\"report\":" + report + "}");
    } else if (type == "listen") {
      Reply(l, "{\"id\":" + id + ",\"type\":\"listening\",\"port\":" + std::to_string(request.value("port", 0)) + "}");
    } else if (type == "ping") {
      auto parsed = agent::ParsePingRequest(request);
      if (!parsed.ok()) {
        Reply(l,
              json{{"id", request.value("id", 0)}, {"type", "error"}, {"message", parsed.status().message()}}.dump());
        return;
      }
      Reply(l, PingReply(*parsed, id, parsed->targets.size()));
    } else if (type == "shutdown") {
      Reply(l, "{\"id\":" + id + ",\"type\":\"bye\"}");
    } else {
      Reply(l, json{{"id", request.value("id", 0)}, {"type", "error"}, {"message", "not simulated: " + type}}.dump());
    }
  }

  // The reply text built directly: this process's cost is not what the benchmark measures, but
  // thousands of 4,000-entry replies must not make the run wait on it.
  std::string PingReply(const agent::PingRequest& r, const std::string& id, size_t n) {
    if (latency_text_n_ != n) {
      std::mt19937 rng(42);
      std::uniform_int_distribution<int> us(40, 400);
      latency_text_ = "[";
      for (size_t k = 0; k < n; ++k) latency_text_ += (k ? "," : "") + std::to_string(us(rng));
      latency_text_ += "]";
      latency_text_n_ = n;
    }
    std::string outcomes(n, 'o');
    for (size_t s : r.skip) {
      if (s < n) outcomes[s] = '-';
    }
    std::string errors = "[";
    if (blocked_ >= 0 && static_cast<size_t>(blocked_) < n && outcomes[blocked_] == 'o') {
      outcomes[blocked_] = 'D';
      errors += "[" + std::to_string(blocked_) + ",\"no answer within 2000 ms, twice\"]";
    }
    errors += "]";
    // As an agent answers a request with "ok_latency": false: the failed targets' latencies only.
    const std::string latencies =
        r.ok_latency ? latency_text_ : (outcomes.find('D') != std::string::npos ? "[4000000]" : "[]");
    return "{\"id\":" + id + ",\"type\":\"ping_result\",\"from\":\"sim\",\"outcomes\":\"" + outcomes +
           "\",\"latency_us\":" + latencies + (r.ok_latency ? "" : ",\"latency_of\":\"failed\"") +
           ",\"errors\":" + errors + ",\"retried\":[],\"listening\":[]}";
  }

  std::string report_text_;
  long blocked_;
  std::vector<std::unique_ptr<SimLink>> links_;
  std::string latency_text_;
  size_t latency_text_n_ = SIZE_MAX;
  std::string table_text_;  // the last ping table seen, and its parsed targets
  std::vector<net::ProbeTarget> targets_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string token_file;
  int port = 0;
  long blocked = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--token-file") token_file = argv[i + 1];
    if (flag == "--port") port = std::atoi(argv[i + 1]);
    if (flag == "--blocked") blocked = std::atol(argv[i + 1]);
  }
  auto token = agent::LoadTokenFile(token_file);
  if (!token.ok()) {
    std::fprintf(stderr, "check_sim_agents: %s\n", token.status().message().c_str());
    return 2;
  }
  probe::RealInventorySource source;
  auto inv = probe::CollectInventory(source);
  inv.system.hostname = kHostMarker;
  std::string report_text = probe::ReportJson(inv, probe::EvaluateNode(inv)).dump();
  int bound = 0;
  auto listener = net::Listen("127.0.0.1", port, &bound);
  if (!listener.ok()) {
    std::fprintf(stderr, "check_sim_agents: %s\n", listener.status().message().c_str());
    return 2;
  }
  Sim sim(report_text, blocked);
  net::AcceptorOptions options;
  options.key = net::LinkKey::FromToken(*token);
  options.what = "simulated agents";
  options.max_pending = 8192;
  net::HandshakeAcceptor acceptor(listener->get(), options,
                                  [&](net::Link link, const std::string&) { sim.Add(std::move(link)); });
  std::printf("port=%d\n", bound);
  std::fflush(stdout);
  std::vector<pollfd> fds;
  while (true) {
    sim.Extra(fds);
    acceptor.Poll(std::chrono::milliseconds(200), &fds);
    sim.Serve(fds);
  }
}
