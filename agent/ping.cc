#include "agent/ping.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

namespace dsd::agent {

using nlohmann::json;

// One letter per net::ConnectOutcome, in the enum's order; both directions read this table.
constexpr std::string_view kLetters = "oDRUNE";

char OutcomeLetter(net::ConnectOutcome outcome) {
  size_t i = static_cast<size_t>(outcome);
  return i < kLetters.size() ? kLetters[i] : 'E';
}

std::optional<net::ConnectOutcome> OutcomeFromLetter(char letter) {
  size_t i = kLetters.find(letter);
  if (i == std::string_view::npos) return std::nullopt;
  return static_cast<net::ConnectOutcome>(i);
}

std::string PingRequestText(int id, const std::string& targets_json, size_t start, const std::vector<size_t>& skip,
                            int timeout_ms, int max_in_flight, bool ok_latency) {
  std::string text = "{\"id\":" + std::to_string(id) + ",\"type\":\"ping\",\"start\":" + std::to_string(start) +
                     ",\"skip\":" + json(skip).dump() + ",\"timeout_ms\":" + std::to_string(timeout_ms) +
                     ",\"max_in_flight\":" + std::to_string(max_in_flight) +
                     (ok_latency ? "" : ",\"ok_latency\":false") + ",\"targets\":";
  text += targets_json;
  text += "}";
  return text;
}

namespace {

constexpr size_t kMaxTargets = 100000;
constexpr size_t kMaxHost = 255;

Status Bad(const std::string& where, const std::string& what) { return InvalidArgument("ping." + where + ": " + what); }

bool UnsignedIn(const json& v, uint64_t lo, uint64_t hi) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() >= lo && v.get<uint64_t>() <= hi;
  if (v.is_number_integer())
    return v.get<int64_t>() >= 0 && static_cast<uint64_t>(v.get<int64_t>()) >= lo &&
           static_cast<uint64_t>(v.get<int64_t>()) <= hi;
  return false;
}

}  // namespace

Result<PingRequest> ParsePingRequest(const json& request) {
  PingRequest r;
  if (!request.is_object()) return Bad("", "not an object");
  auto targets = request.find("targets");
  if (targets == request.end()) return Bad("targets", "field is missing");
  if (!targets->is_array()) return Bad("targets", "not a list");
  if (targets->size() > kMaxTargets) return Bad("targets", "more than " + std::to_string(kMaxTargets) + " entries");
  r.targets.reserve(targets->size());
  for (size_t i = 0; i < targets->size(); ++i) {
    const json& t = (*targets)[i];
    std::string at = "targets[" + std::to_string(i) + "]";
    if (!t.is_array() || t.size() != 2) return Bad(at, "not a [host, port] pair");
    if (!t[0].is_string() || t[0].get_ref<const std::string&>().empty() ||
        t[0].get_ref<const std::string&>().size() > kMaxHost)
      return Bad(at + "[0]", "not a host name of 1-255 bytes");
    if (!UnsignedIn(t[1], 1, 65535)) return Bad(at + "[1]", "not a port in 1..65535");
    r.targets.push_back({t[0].get<std::string>(), t[1].get<int>()});
  }
  if (auto v = request.find("start"); v != request.end()) {
    if (!UnsignedIn(*v, 0, kMaxTargets)) return Bad("start", "not an index");
    r.start = v->get<size_t>();
  }
  if (auto v = request.find("skip"); v != request.end()) {
    if (!v->is_array() || v->size() > kMaxTargets) return Bad("skip", "not a list of indices");
    for (const auto& s : *v) {
      if (!UnsignedIn(s, 0, kMaxTargets)) return Bad("skip", "not a list of indices");
      r.skip.push_back(s.get<size_t>());
    }
  }
  if (auto v = request.find("timeout_ms"); v != request.end()) {
    if (!UnsignedIn(*v, 1, 600000)) return Bad("timeout_ms", "not in 1..600000");
    r.timeout_ms = v->get<int>();
  }
  if (auto v = request.find("max_in_flight"); v != request.end()) {
    if (!UnsignedIn(*v, 1, 4096)) return Bad("max_in_flight", "not in 1..4096");
    r.max_in_flight = v->get<int>();
  }
  if (auto v = request.find("ok_latency"); v != request.end()) {
    if (!v->is_boolean()) return Bad("ok_latency", "not true or false");
    r.ok_latency = v->get<bool>();
  }
  return r;
}

uint64_t NeighbourTableFulls() {
  uint64_t total = 0;
  for (const char* path : {"/proc/net/stat/arp_cache", "/proc/net/stat/ndisc_cache"}) {
    std::ifstream in(path);
    std::string header;
    if (!std::getline(in, header)) continue;
    std::istringstream names(header);
    std::string name;
    size_t column = 0, at = SIZE_MAX;
    while (names >> name) {
      if (name == "table_fulls") at = column;
      ++column;
    }
    if (at == SIZE_MAX) continue;
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string field;
      for (size_t k = 0; k <= at && fields >> field; ++k)
        if (k == at) total += std::strtoull(field.c_str(), nullptr, 16);
    }
  }
  return total;
}

PingReply RunPing(const PingRequest& request, const std::string& source_addr, const std::atomic<bool>* cancel) {
  const uint64_t fulls_before = NeighbourTableFulls();
  const size_t n = request.targets.size();
  PingReply reply;
  reply.outcomes.assign(n, '-');
  reply.latency_us.assign(n, 0);
  std::vector<bool> skipped(n, false);
  for (size_t s : request.skip) {
    if (s < n) skipped[s] = true;
  }
  // The staggered order: start, start+1, … wrapping around.
  std::vector<size_t> order;
  std::vector<net::ProbeTarget> targets;
  for (size_t k = 0; k < n; ++k) {
    size_t i = (request.start + k) % n;
    if (skipped[i]) continue;
    order.push_back(i);
    targets.push_back(request.targets[i]);
  }
  net::ProbeOptions options;
  options.timeout = std::chrono::milliseconds(request.timeout_ms);
  options.source_addr = source_addr;
  options.max_in_flight = static_cast<size_t>(request.max_in_flight);
  options.cancel = cancel;
  auto results = net::ProbeMany(targets, options);
  const uint64_t fulls_after = NeighbourTableFulls();
  reply.neigh_table_fulls = fulls_after > fulls_before ? fulls_after - fulls_before : 0;
  if (std::ifstream gc("/proc/sys/net/ipv4/neigh/default/gc_thresh3"); gc) gc >> reply.neigh_gc_thresh3;
  for (size_t k = 0; k < order.size(); ++k) {
    size_t i = order[k];
    const auto& r = results[k];
    reply.outcomes[i] = OutcomeLetter(r.outcome);
    reply.latency_us[i] = static_cast<uint32_t>(std::clamp(r.latency_ms * 1000.0, 0.0, 4.0e9));
    if (r.outcome != net::ConnectOutcome::kOk) reply.errors.emplace_back(i, r.error);
    if (r.retried) reply.retried.push_back(i);
  }
  return reply;
}

json PingReplyJson(const PingReply& reply, const std::string& from, bool ok_latency) {
  json errors = json::array();
  for (const auto& [i, text] : reply.errors) errors.push_back(json::array({i, text}));
  json j = {{"type", "ping_result"},      {"from", from},
            {"outcomes", reply.outcomes}, {"errors", errors},
            {"retried", reply.retried},   {"listening", reply.listening}};
  if (reply.neigh_table_fulls) {
    j["neigh_table_fulls"] = reply.neigh_table_fulls;
    j["neigh_gc_thresh3"] = reply.neigh_gc_thresh3;
  }
  if (ok_latency) {
    j["latency_us"] = reply.latency_us;
  } else {
    json failed = json::array();
    for (size_t i = 0; i < reply.outcomes.size() && i < reply.latency_us.size(); ++i)
      if (reply.outcomes[i] != 'o' && reply.outcomes[i] != '-') failed.push_back(reply.latency_us[i]);
    j["latency_us"] = std::move(failed);
    j["latency_of"] = "failed";
  }
  return j;
}

Result<PingReply> ParsePingReply(const json& reply, size_t targets) {
  auto bad = [](const std::string& what) { return InvalidArgument("ping_result: " + what); };
  if (!reply.is_object()) return bad("not an object");
  PingReply r;
  auto outcomes = reply.find("outcomes");
  if (outcomes == reply.end() || !outcomes->is_string()) return bad("'outcomes' is not a string");
  r.outcomes = outcomes->get<std::string>();
  if (r.outcomes.size() != targets)
    return bad("'outcomes' has " + std::to_string(r.outcomes.size()) + " letters for " + std::to_string(targets) +
               " targets");
  for (char c : r.outcomes) {
    if (c != '-' && !OutcomeFromLetter(c)) return bad(std::string("unknown outcome letter '") + c + "'");
  }
  auto latency = reply.find("latency_us");
  auto of = reply.find("latency_of");
  const bool failed_only = of != reply.end() && of->is_string() && of->get_ref<const std::string&>() == "failed";
  size_t failed = 0;
  if (failed_only)
    for (char c : r.outcomes) failed += c != 'o' && c != '-';
  const size_t expected = failed_only ? failed : targets;
  if (latency == reply.end() || !latency->is_array() || latency->size() != expected)
    return bad(failed_only ? "'latency_us' is not a list of one number per failed target"
                           : "'latency_us' is not a list of one number per target");
  r.latency_us.assign(targets, 0);
  size_t at = 0;
  for (const auto& v : *latency) {
    if (!UnsignedIn(v, 0, UINT32_MAX)) return bad("'latency_us' holds a value that is not a count of microseconds");
    if (failed_only)
      while (r.outcomes[at] == 'o' || r.outcomes[at] == '-') ++at;
    r.latency_us[at++] = v.get<uint32_t>();
  }
  if (auto e = reply.find("errors"); e != reply.end() && e->is_array()) {
    for (const auto& pair : *e) {
      if (pair.is_array() && pair.size() == 2 && UnsignedIn(pair[0], 0, targets ? targets - 1 : 0) &&
          pair[1].is_string() && targets > 0)
        r.errors.emplace_back(pair[0].get<size_t>(), pair[1].get<std::string>());
    }
  }
  if (auto e = reply.find("retried"); e != reply.end() && e->is_array()) {
    for (const auto& i : *e) {
      if (targets > 0 && UnsignedIn(i, 0, targets - 1)) r.retried.push_back(i.get<size_t>());
    }
  }
  if (auto e = reply.find("neigh_table_fulls"); e != reply.end() && UnsignedIn(*e, 0, UINT64_MAX))
    r.neigh_table_fulls = e->get<uint64_t>();
  if (auto e = reply.find("neigh_gc_thresh3"); e != reply.end() && UnsignedIn(*e, 0, UINT64_MAX))
    r.neigh_gc_thresh3 = e->get<uint64_t>();
  if (auto e = reply.find("listening"); e != reply.end() && e->is_array()) {
    for (const auto& p : *e) {
      if (UnsignedIn(p, 1, 65535)) r.listening.push_back(p.get<int>());
    }
  }
  return r;
}

}  // namespace dsd::agent
