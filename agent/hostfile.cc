#include "agent/hostfile.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"

namespace dsd::agent {
namespace {

Result<int> ParseCount(std::string_view s, const std::string& where, const std::string& what) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    return InvalidArgument(where + ": " + what + " '" + std::string(s) + "' is not a whole number");
  }
  return v;
}

// "a:0,1@b" → {a: {0,1}, b: {}} (empty = every slot). Order of first mention is kept.
Result<std::vector<std::pair<std::string, std::vector<int>>>> ParseFilter(const std::string& flag,
                                                                           const std::string& text) {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  for (const auto& part : Split(text, '@')) {
    if (part.empty()) return InvalidArgument(flag + " '" + text + "': empty host between '@'");
    size_t colon = part.find(':');
    std::string host = part.substr(0, colon);
    if (host.empty()) return InvalidArgument(flag + " '" + text + "': missing host name in '" + part + "'");
    std::vector<int> slots;
    if (colon != std::string::npos) {
      for (const auto& s : Split(part.substr(colon + 1), ',')) {
        DSD_ASSIGN_OR_RETURN(int slot, ParseCount(s, flag + " '" + text + "'", "slot"));
        slots.push_back(slot);
      }
    }
    out.emplace_back(host, slots);
  }
  return out;
}

}  // namespace

Result<Hostfile> ParseHostfile(const std::string& path, const std::string& content) {
  Hostfile hf;
  hf.path = path;
  std::map<std::string, int> first_line;
  auto lines = Split(content, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    int n = static_cast<int>(i) + 1;
    std::string where = path + ":" + std::to_string(n);
    std::string line = lines[i];
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    auto tokens = SplitWhitespace(Trim(line));
    if (tokens.empty()) continue;
    HostEntry e;
    e.host = tokens[0];
    e.line = n;
    if (e.host.find('=') != std::string::npos) {
      return InvalidArgument(where + ": expected 'HOST slots=N', got '" + std::string(Trim(lines[i])) + "'");
    }
    bool have_slots = false;
    for (size_t t = 1; t < tokens.size(); ++t) {
      const std::string& tok = tokens[t];
      if (StartsWith(tok, "slots=")) {
        if (have_slots) return InvalidArgument(where + ": slots= given twice");
        DSD_ASSIGN_OR_RETURN(e.slots, ParseCount(tok.substr(6), where, "slots"));
        if (e.slots < 1) return InvalidArgument(where + ": slots must be at least 1, got " + tok.substr(6));
        have_slots = true;
      } else if (StartsWith(tok, "max_slots=") || StartsWith(tok, "max-slots=")) {
        hf.warnings.push_back(where + ": '" + tok + "' is OpenMPI-only; DeepSpeed ignores it");
      } else {
        hf.warnings.push_back(where + ": '" + tok + "' is ignored (DeepSpeed silently drops trailing tokens)");
      }
    }
    if (!have_slots) {
      hf.warnings.push_back(where + ": no slots= (taken as slots=1, as OpenMPI does; DeepSpeed rejects this line)");
    }
    if (auto [it, inserted] = first_line.emplace(e.host, n); !inserted) {
      return InvalidArgument(where + ": duplicate host '" + e.host + "' (first at line " + std::to_string(it->second) + ")");
    }
    hf.hosts.push_back(e);
  }
  if (hf.hosts.empty()) return InvalidArgument(path + ": no hosts");
  log::Get("agent")->debug("hostfile {}: {} hosts, {} warnings", path, hf.hosts.size(), hf.warnings.size());
  return hf;
}

Result<Hostfile> LoadHostfile(const std::string& path) {
  auto content = ReadFile(path, 16 << 20);
  if (!content.ok()) return content.status().WithContext("hostfile");
  return ParseHostfile(path, *content);
}

Result<std::vector<NodePlan>> PlanNodes(const Hostfile& hf, const PlanOptions& options) {
  if (!options.include.empty() && !options.exclude.empty()) {
    return InvalidArgument("--include and --exclude are mutually exclusive");
  }
  std::vector<NodePlan> nodes;
  for (const auto& h : hf.hosts) {
    NodePlan p{h.host, {}};
    for (int s = 0; s < h.slots; ++s) p.slots.push_back(s);
    nodes.push_back(p);
  }
  auto find = [&](const std::string& host) {
    return std::find_if(nodes.begin(), nodes.end(), [&](const NodePlan& n) { return n.host == host; });
  };
  auto check_filter = [&](const std::string& flag, const std::vector<std::pair<std::string, std::vector<int>>>& f) -> Status {
    for (const auto& [host, slots] : f) {
      auto it = find(host);
      if (it == nodes.end()) return InvalidArgument(flag + ": host '" + host + "' is not in " + hf.path);
      for (int s : slots) {
        if (std::find(it->slots.begin(), it->slots.end(), s) == it->slots.end()) {
          return InvalidArgument(flag + ": slot " + std::to_string(s) + " is not on host '" + host + "' (it has " +
                                 std::to_string(it->slots.size()) + " slots)");
        }
      }
    }
    return Status::Ok();
  };
  if (!options.include.empty()) {
    DSD_ASSIGN_OR_RETURN(auto f, ParseFilter("--include", options.include));
    DSD_RETURN_IF_ERROR(check_filter("--include", f));
    std::vector<NodePlan> kept;
    for (const auto& node : nodes) {  // keep hostfile order
      for (const auto& [host, slots] : f) {
        if (host != node.host) continue;
        NodePlan p{node.host, slots.empty() ? node.slots : slots};
        std::sort(p.slots.begin(), p.slots.end());
        p.slots.erase(std::unique(p.slots.begin(), p.slots.end()), p.slots.end());
        kept.push_back(p);
        break;
      }
    }
    nodes = kept;
  } else if (!options.exclude.empty()) {
    DSD_ASSIGN_OR_RETURN(auto f, ParseFilter("--exclude", options.exclude));
    DSD_RETURN_IF_ERROR(check_filter("--exclude", f));
    for (const auto& [host, slots] : f) {
      auto it = find(host);
      if (slots.empty()) {
        it->slots.clear();
      } else {
        for (int s : slots) it->slots.erase(std::remove(it->slots.begin(), it->slots.end(), s), it->slots.end());
      }
    }
    nodes.erase(std::remove_if(nodes.begin(), nodes.end(), [](const NodePlan& n) { return n.slots.empty(); }),
                nodes.end());
  }
  if (options.num_nodes != -1) {
    if (options.num_nodes < 1 || options.num_nodes > static_cast<int>(nodes.size())) {
      return InvalidArgument("--num_nodes " + std::to_string(options.num_nodes) + " but " +
                             std::to_string(nodes.size()) + " nodes are available");
    }
    nodes.resize(static_cast<size_t>(options.num_nodes));
  }
  if (options.num_gpus != -1) {
    for (auto& n : nodes) {
      if (options.num_gpus < 1 || options.num_gpus > static_cast<int>(n.slots.size())) {
        return InvalidArgument("--num_gpus " + std::to_string(options.num_gpus) + " but host '" + n.host + "' has " +
                               std::to_string(n.slots.size()) + " slots");
      }
      n.slots.resize(static_cast<size_t>(options.num_gpus));
    }
  }
  if (nodes.empty()) return InvalidArgument("no nodes left after filtering");
  return nodes;
}

std::optional<std::string> DefaultHostfilePath(const std::string& job_hostfile) {
  if (FileExists(job_hostfile)) return job_hostfile;
  return std::nullopt;
}

}  // namespace dsd::agent
