#include "coordinator/hostfile.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"

namespace dsd::coordinator {
namespace {

// Python's str.strip() and \s (ASCII part): space, \t, \n, \v, \f, \r.
bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

std::string_view StripPy(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Why DeepSpeed's `^(\S+)\s+slots=(\d+)` does not match `line` (OpenMPI accepts some of these).
std::string WhyBadEntry(std::string_view line) {
  auto tokens = SplitWhitespace(std::string(line));
  if (StartsWith(tokens[0], "slots")) return "no host name before slots=";
  if (line.find("slots") == std::string_view::npos)
    return "no slots=N (OpenMPI would take 1 slot; deepspeed rejects the line)";
  if (line.find("slots =") != std::string_view::npos || line.find("slots= ") != std::string_view::npos)
    return "no spaces allowed around '=' in slots=N";
  if (tokens.size() > 1 && StartsWith(tokens[1], "slots=")) return "slots= must be followed by a whole number";
  return "'" + (tokens.size() > 1 ? tokens[1] : std::string()) +
         "' stands between the host name and slots=N (deepspeed reads only 'HOST slots=N'; max_slots is OpenMPI-only)";
}

struct FilterEntry {
  std::string host;
  std::vector<int> slots;  // sorted, unique; empty: the whole host
};

// DeepSpeed's parse_node_config_list: "a:0,1@b@a:2" → {a: [0,1,2], b: []}, in order of first
// mention. A host named both alone and with slots gets the slots only, as in DeepSpeed.
Result<std::vector<FilterEntry>> ParseFilter(const std::string& flag, const std::string& text) {
  std::vector<FilterEntry> out;
  for (const auto& part : Split(text, '@')) {
    std::string where = flag + " '" + Printable(text) + "'";
    if (part.empty())
      return InvalidArgument(where +
                             ": empty host name between '@' (deepspeed: \"Hostname '' not found in hostfile\")");
    auto fields = Split(part, ':');
    if (fields.size() > 2)
      return InvalidArgument(where + ": '" + Printable(part) +
                             "' has more than one ':' (the form is HOST:SLOT,SLOT; deepspeed fails on it)");
    std::vector<int> slots;
    if (fields.size() == 2) {
      for (const auto& s : Split(fields[1], ',')) {
        std::string_view v = StripPy(s);
        int slot = -1;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), slot);
        if (v.empty() || ec != std::errc() || p != v.data() + v.size())
          return InvalidArgument(where + ": slot '" + Printable(s) + "' of host '" + Printable(fields[0]) +
                                 "' is not a slot number (0, 1, …; deepspeed fails on it)");
        if (slot < 0 || slot >= kMaxSlotsPerHost)
          return InvalidArgument(
              where + ": slot '" + Printable(s) + "' of host '" + Printable(fields[0]) +
              "' is not a slot number (0, 1, …; deepspeed would pass it on as CUDA_VISIBLE_DEVICES)");
        slots.push_back(slot);
      }
    }
    auto it = std::find_if(out.begin(), out.end(), [&](const FilterEntry& e) { return e.host == fields[0]; });
    if (it == out.end()) it = out.insert(out.end(), {fields[0], {}});
    it->slots.insert(it->slots.end(), slots.begin(), slots.end());
    std::sort(it->slots.begin(), it->slots.end());
    it->slots.erase(std::unique(it->slots.begin(), it->slots.end()), it->slots.end());
  }
  return out;
}

}  // namespace

std::vector<int> FirstSlots(int n) {
  std::vector<int> v;
  for (int s = 0; s < n; ++s) v.push_back(s);
  return v;
}

std::string SlotList(const std::vector<int>& slots) {
  std::string s;
  for (int v : slots) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

Result<Hostfile> ParseHostfile(const std::string& path, const std::string& content) {
  Hostfile hf;
  hf.path = path;
  std::map<std::string, int> first_line;
  // Python's readlines() in text mode ends a line at \n, \r\n or a lone \r (universal newlines).
  std::string text = content;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\r') text[i] = i + 1 < text.size() && text[i + 1] == '\n' ? ' ' : '\n';
  auto lines = Split(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    const int n = static_cast<int>(i) + 1;
    const std::string where = path + ":" + std::to_string(n);
    std::string_view line = StripPy(lines[i]);
    if (line.empty() || line.front() == '#') continue;
    // ^(\S+)\s+slots=(\d+), matched at the start of the stripped line; the rest is ignored.
    size_t host_end = 0;
    while (host_end < line.size() && !IsSpace(line[host_end])) ++host_end;
    size_t p = host_end;
    while (p < line.size() && IsSpace(line[p])) ++p;
    size_t digits = p + 6;
    bool match = p > host_end && line.substr(p, 6) == "slots=" && digits < line.size() && IsDigit(line[digits]);
    if (!match) {
      return InvalidArgument(where + ": bad entry '" + Printable(line) + "': " + Printable(WhyBadEntry(line)) +
                             "; deepspeed expects 'HOST slots=N' (deepspeed: \"Hostfile contains a bad entry\")");
    }
    size_t end = digits;
    while (end < line.size() && IsDigit(line[end])) ++end;
    std::string_view count = line.substr(digits, end - digits);
    while (count.size() > 1 && count.front() == '0') count.remove_prefix(1);
    HostEntry e{std::string(line.substr(0, host_end)), 0, n};
    if (Printable(e.host) != e.host) {
      return InvalidArgument(where + ": host '" + Printable(e.host) +
                             "' holds control characters, which no host name has (a file edited on another system, "
                             "or pasted with escape sequences?)");
    }
    if (count.size() > 5 || std::stoi(std::string(count)) > kMaxSlotsPerHost) {
      return InvalidArgument(where + ": slots=" + std::string(line.substr(digits, end - digits)) + " for host '" +
                             e.host + "' is more than " + std::to_string(kMaxSlotsPerHost) + " slots (a typo?)");
    }
    e.slots = std::stoi(std::string(count));
    if (e.slots == 0) {
      return InvalidArgument(where + ": slots=0 for host '" + e.host +
                             "': deepspeed accepts the line but starts no rank there while still counting the node; "
                             "give its GPU count or remove the line");
    }
    if (std::string_view rest = StripPy(line.substr(end)); !rest.empty() && rest.front() != '#') {
      hf.notes.push_back(where + ": '" + Printable(rest) + "' after slots=" + std::to_string(e.slots) +
                         " is ignored by deepspeed" +
                         (rest.find("slots") != std::string_view::npos ? " (max_slots is OpenMPI-only)" : ""));
    }
    if (auto [it, inserted] = first_line.emplace(e.host, n); !inserted) {
      return InvalidArgument(where + ": duplicate host '" + e.host + "' (first at line " + std::to_string(it->second) +
                             "; deepspeed: \"Hostfile contains multiple entries for " + e.host + "\")");
    }
    hf.hosts.push_back(std::move(e));
  }
  if (hf.hosts.empty()) {
    return InvalidArgument(path + ": no hosts (deepspeed: \"Hostfile is empty or not formatted correctly\")");
  }
  log::Get("coordinator")->debug("hostfile {}: {} hosts, {} notes", path, hf.hosts.size(), hf.notes.size());
  return hf;
}

Result<Hostfile> LoadHostfile(const std::string& path) {
  auto content = ReadFile(path, 16 << 20);
  if (!content.ok()) return content.status().WithContext("hostfile");
  return ParseHostfile(path, *content);
}

Result<NodeSelection> PlanNodes(const Hostfile& hf, const PlanOptions& options) {
  NodeSelection out;
  out.notes = hf.notes;
  const bool filtered = !options.include.empty() || !options.exclude.empty();
  if (!options.include.empty() && !options.exclude.empty()) {
    return InvalidArgument("--include and --exclude are mutually exclusive (deepspeed refuses both)");
  }
  if (filtered && (options.num_nodes >= 0 || options.num_gpus >= 0)) {
    return InvalidArgument(std::string(options.num_nodes >= 0 ? "--num_nodes" : "--num_gpus") + " with " +
                           (options.include.empty() ? "--exclude" : "--include") +
                           ": deepspeed refuses this (\"Cannot specify num_nodes/gpus with include/exclude\"); "
                           "name the slots in the filter instead");
  }
  auto entry = [&](const std::string& host) -> const HostEntry* {
    for (const auto& h : hf.hosts)
      if (h.host == host) return &h;
    return nullptr;
  };
  auto where = [&](const HostEntry& h) {
    return h.line > 0 ? " (" + hf.path + ":" + std::to_string(h.line) + ")" : std::string();
  };
  std::vector<NodePlan> nodes;
  if (!options.include.empty()) {
    DSD_ASSIGN_OR_RETURN(auto f, ParseFilter("--include", options.include));
    for (const auto& e : f) {
      const HostEntry* h = entry(e.host);
      if (!h) return InvalidArgument("--include: host '" + Printable(e.host) + "' is not in " + hf.path);
      for (int s : e.slots) {
        if (s >= h->slots) {
          out.notes.push_back("--include: slot " + std::to_string(s) + " is not among the " + std::to_string(h->slots) +
                              " slots of '" + h->host + "'" + where(*h) +
                              "; deepspeed accepts it and sets CUDA_VISIBLE_DEVICES=" + SlotList(e.slots) + " there");
        }
      }
      if (e.slots.empty()) {
        out.notes.push_back(
            "--include: '" + e.host +
            "' without slots means all its slots, but deepspeed's launcher (0.19.8) plans no slot for a "
            "host named this way; write " +
            e.host + ":" + SlotList(FirstSlots(h->slots)) + " to run the same under deepspeed");
      }
    }
    for (const auto& h : hf.hosts) {  // hostfile order
      auto it = std::find_if(f.begin(), f.end(), [&](const FilterEntry& e) { return e.host == h.host; });
      if (it == f.end()) continue;
      nodes.push_back({h.host, it->slots.empty() ? FirstSlots(h.slots) : it->slots});
    }
  } else {
    for (const auto& h : hf.hosts) nodes.push_back({h.host, FirstSlots(h.slots)});
    if (!options.exclude.empty()) {
      DSD_ASSIGN_OR_RETURN(auto f, ParseFilter("--exclude", options.exclude));
      for (const auto& e : f) {
        const HostEntry* h = entry(e.host);
        if (!h) return InvalidArgument("--exclude: host '" + Printable(e.host) + "' is not in " + hf.path);
        auto node = std::find_if(nodes.begin(), nodes.end(), [&](const NodePlan& n) { return n.host == e.host; });
        for (int s : e.slots) {
          if (s >= h->slots) {
            return InvalidArgument("--exclude: slot " + std::to_string(s) + " is not on host '" + e.host +
                                   "' (it has " + std::to_string(h->slots) + " slots" + where(*h) +
                                   "; deepspeed: \"No slot '" + std::to_string(s) + "' specified on host '" + e.host +
                                   "'\")");
          }
        }
        if (e.slots.empty()) {
          node->slots.clear();
        } else {
          for (int s : e.slots)
            node->slots.erase(std::remove(node->slots.begin(), node->slots.end(), s), node->slots.end());
        }
      }
      nodes.erase(std::remove_if(nodes.begin(), nodes.end(), [](const NodePlan& n) { return n.slots.empty(); }),
                  nodes.end());
    }
  }
  if (options.num_nodes > 0) {
    if (options.num_nodes > static_cast<int>(nodes.size())) {
      out.notes.push_back("--num_nodes " + std::to_string(options.num_nodes) + " but " + hf.path + " has " +
                          std::to_string(nodes.size()) + " nodes: deepspeed runs on those " +
                          std::to_string(nodes.size()));
    } else {
      nodes.resize(static_cast<size_t>(options.num_nodes));
    }
  }
  if (options.num_gpus > 0) {
    if (options.num_gpus > kMaxSlotsPerHost) {
      return InvalidArgument("--num_gpus " + std::to_string(options.num_gpus) + " is more than " +
                             std::to_string(kMaxSlotsPerHost) + " slots per node");
    }
    for (auto& n : nodes) {
      const HostEntry* h = entry(n.host);
      if (h && options.num_gpus > h->slots) {
        out.notes.push_back("--num_gpus " + std::to_string(options.num_gpus) + " is more than the " +
                            std::to_string(h->slots) + " slots of '" + n.host + "'" + where(*h) +
                            ": deepspeed starts " + std::to_string(options.num_gpus) + " ranks there anyway");
      }
      n.slots = FirstSlots(options.num_gpus);
    }
  }
  if (nodes.empty()) return InvalidArgument("no nodes left after filtering " + hf.path + " (deepspeed fails here too)");
  out.nodes = std::move(nodes);
  return out;
}

std::optional<std::string> DefaultHostfilePath(const std::string& job_hostfile) {
  if (FileExists(job_hostfile)) return job_hostfile;
  return std::nullopt;
}

}  // namespace dsd::coordinator
