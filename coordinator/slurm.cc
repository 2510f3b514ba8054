#include "coordinator/slurm.h"

#include <charconv>
#include <cstdlib>
#include <set>

#include "common/process.h"
#include "common/strings.h"

extern char** environ;

namespace dsd::coordinator {

namespace {

std::optional<int> Number(std::string_view s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

Result<std::vector<int>> ExpandTasksPerNode(std::string_view text) {
  std::vector<int> out;
  const auto bad = [&] {
    return InvalidArgument("SLURM_TASKS_PER_NODE '" + std::string(text) + "' is not N or N(xM),…");
  };
  for (const auto& part : Split(std::string(text), ',')) {
    const size_t paren = part.find('(');
    auto count = Number(std::string_view(part).substr(0, paren));
    if (!count) return bad();
    int times = 1;
    if (paren != std::string::npos) {
      if (part.size() < paren + 4 || part.compare(paren, 2, "(x") != 0 || part.back() != ')') return bad();
      auto t = Number(std::string_view(part).substr(paren + 2, part.size() - paren - 3));
      if (!t || *t == 0 || *t > 1000000) return bad();
      times = *t;
    }
    out.insert(out.end(), static_cast<size_t>(times), *count);
  }
  if (out.empty()) return bad();
  return out;
}

Result<std::optional<SlurmAllocation>> SlurmAllocationFrom(const std::map<std::string, std::string>& env,
                                                           const std::string& scontrol) {
  const auto get = [&](const char* key) -> std::string {
    auto it = env.find(key);
    return it == env.end() ? "" : it->second;
  };
  SlurmAllocation a;
  a.job_id = get("SLURM_JOB_ID");
  if (a.job_id.empty()) return std::optional<SlurmAllocation>();
  std::string nodelist = get("SLURM_JOB_NODELIST");
  if (nodelist.empty()) nodelist = get("SLURM_NODELIST");
  if (nodelist.empty())
    return InvalidArgument("Slurm job " + a.job_id + ": SLURM_JOB_NODELIST is not set, so its nodes are unknown");
  CommandOptions opts;
  opts.timeout = std::chrono::seconds(30);
  auto res = RunCommand({scontrol, "show", "hostnames", nodelist}, opts);
  if (!res.ok())
    return InvalidArgument("cannot expand SLURM_JOB_NODELIST '" + nodelist + "' with " + scontrol + ": " +
                           res.status().message());
  if (res->exit_code != 0)
    return InvalidArgument("`" + scontrol + " show hostnames " + nodelist + "` failed (exit " +
                           std::to_string(res->exit_code) + "): " + std::string(Trim(res->err + res->out)));
  for (const auto& line : Split(res->out, '\n'))
    if (auto host = Trim(line); !host.empty()) a.hosts.emplace_back(host);
  if (a.hosts.empty()) return InvalidArgument("SLURM_JOB_NODELIST '" + nodelist + "' names no node");
  if (const std::string tasks = get("SLURM_TASKS_PER_NODE"); !tasks.empty()) {
    DSD_ASSIGN_OR_RETURN(a.tasks_per_node, ExpandTasksPerNode(tasks));
    if (a.tasks_per_node.size() != a.hosts.size())
      return InvalidArgument("SLURM_TASKS_PER_NODE '" + tasks + "' gives " + std::to_string(a.tasks_per_node.size()) +
                             " nodes, SLURM_JOB_NODELIST " + std::to_string(a.hosts.size()));
  }
  return std::optional<SlurmAllocation>(std::move(a));
}

Result<std::optional<SlurmAllocation>> SlurmAllocationFromEnv() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    if (kv.substr(0, 6) != "SLURM_") continue;
    const size_t eq = kv.find('=');
    if (eq != std::string_view::npos) env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return SlurmAllocationFrom(env);
}

std::vector<SlurmNodeState> ParseSinfoNodes(std::string_view text) {
  std::vector<SlurmNodeState> out;
  std::set<std::string> seen;
  for (const auto& line : Split(std::string(text), '\n')) {
    auto fields = Split(std::string(Trim(line)), '|');
    if (fields.size() < 2 || fields[0].empty()) continue;
    if (!seen.insert(fields[0]).second) continue;
    std::string reason;
    for (size_t i = 2; i < fields.size(); ++i) reason += (i > 2 ? "|" : "") + fields[i];  // a reason may hold '|'
    out.push_back({fields[0], fields[1], std::string(Trim(reason))});
  }
  return out;
}

Result<std::vector<SlurmNodeState>> SlurmNodeStates(const std::vector<std::string>& hosts, const std::string& sinfo) {
  CommandOptions opts;
  opts.timeout = std::chrono::seconds(30);
  auto res = RunCommand({sinfo, "-h", "-N", "-n", Join(hosts, ","), "-o", "%N|%T|%E"}, opts);
  if (!res.ok()) return Unavailable(sinfo + ": " + res.status().message());
  if (res->exit_code != 0)
    return Unavailable("`" + sinfo + "` failed (exit " + std::to_string(res->exit_code) +
                       "): " + std::string(Trim(res->err + res->out)));
  return ParseSinfoNodes(res->out);
}

}  // namespace dsd::coordinator
