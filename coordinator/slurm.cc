#include "coordinator/slurm.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>
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

std::optional<int> ParseSlurmGpuCount(std::string_view text) {
  if (Trim(text).empty()) return std::nullopt;
  int total = 0;
  for (const auto& part : Split(std::string(Trim(text)), ',')) {
    // The count is the last ':'-separated field ("gpu:a100:4"), possibly followed by "(S:0-1)".
    std::string_view p(part);
    p = p.substr(0, p.find('('));
    auto n = Number(p.substr(p.rfind(':') == std::string_view::npos ? 0 : p.rfind(':') + 1));
    if (!n || *n > 4096) return std::nullopt;
    total += *n;
  }
  return total;
}

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
  // The GPUs of each node: SLURM_GPUS_ON_NODE is what this node got; SLURM_GPUS_PER_NODE what was
  // asked for each; SLURM_JOB_GPUS lists this node's GPU indices.
  if (auto n = ParseSlurmGpuCount(get("SLURM_GPUS_ON_NODE")); n && *n > 0) {
    a.gpus_per_node = *n;
    a.gpus_from = "SLURM_GPUS_ON_NODE=" + get("SLURM_GPUS_ON_NODE");
  } else if (auto p = ParseSlurmGpuCount(get("SLURM_GPUS_PER_NODE")); p && *p > 0) {
    a.gpus_per_node = *p;
    a.gpus_from = "SLURM_GPUS_PER_NODE=" + get("SLURM_GPUS_PER_NODE");
  } else if (const std::string ids = get("SLURM_JOB_GPUS"); !ids.empty()) {
    a.gpus_per_node = static_cast<int>(Split(ids, ',').size());
    a.gpus_from = "SLURM_JOB_GPUS=" + ids;
  }
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

namespace {

bool IsJobId(const std::string& id) {
  // 1234, an array task 1234_7, a het job component 1234+1.
  if (id.empty() || id.size() > 40 || !std::isdigit(static_cast<unsigned char>(id[0]))) return false;
  return std::all_of(id.begin(), id.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '+'; });
}

constexpr const char* kSacctFields = "JobID,JobName,State,ExitCode,DerivedExitCode,NodeList,Elapsed,Start,End";

// One sacct query: its records, or why there are none (sacct's own words).
Result<std::vector<collectors::SacctRecord>> RunSacct(const std::vector<std::string>& argv) {
  CommandOptions opts;
  opts.timeout = std::chrono::seconds(60);
  auto res = RunCommand(argv, opts);
  if (!res.ok()) return Unavailable(argv[0] + ": " + res.status().message());
  const std::string said(Trim(res->err));
  if (res->exit_code != 0 || said.find("disabled") != std::string::npos)
    return Unavailable("`" + Join(argv, " ") + "` failed (exit " + std::to_string(res->exit_code) +
                       "): " + std::string(Trim(said.empty() ? res->out : said)));
  auto records = collectors::ParseSacct(res->out);
  if (!records.ok()) return Unavailable(records.status().message());
  if (records->empty())
    return Unavailable("`" + Join(argv, " ") + "` lists no such job" + (said.empty() ? "" : ": " + said));
  return records;
}

}  // namespace

Result<SlurmJobRecords> QuerySlurmJob(const std::string& job_id, const std::string& sacct,
                                      const std::string& scontrol) {
  if (!IsJobId(job_id))
    return InvalidArgument("--slurm-job '" + job_id + "' is not a Slurm job id (digits, as sbatch printed it)");
  SlurmJobRecords out;
  auto records = RunSacct({sacct, "-j", job_id, "--parsable2", "--format", kSacctFields});
  out.source = "sacct";
  if (!records.ok()) {
    // No slurmdbd: the job completion log (JobCompType=jobcomp/filetxt) has the job's end.
    auto completion = RunSacct({sacct, "--completion", "-j", job_id, "--parsable2", "--format", kSacctFields});
    if (!completion.ok())
      return Unavailable("Slurm has no record of job " + job_id + ": " + records.status().message() + "; " +
                         completion.status().message());
    out.notes.push_back(records.status().message() + " (the job completion log was read instead: job-level only)");
    records = std::move(completion);
    out.source = "sacct --completion";
  }
  out.records = std::move(*records);
  std::map<std::string, std::vector<std::string>> expanded;
  CommandOptions opts;
  opts.timeout = std::chrono::seconds(30);
  for (auto& r : out.records) {
    if (r.node_list.empty() || r.node_list == "None assigned") continue;
    auto [it, fresh] = expanded.try_emplace(r.node_list);
    if (fresh) {
      auto res = RunCommand({scontrol, "show", "hostnames", r.node_list}, opts);
      if (res.ok() && res->exit_code == 0)
        for (const auto& line : Split(res->out, '\n'))
          if (auto host = Trim(line); !host.empty()) it->second.emplace_back(host);
      if (it->second.empty()) it->second.push_back(r.node_list);
    }
    r.nodes = it->second;
  }
  // The job's output files, which hold slurmstepd's own lines (killed for memory, cancelled):
  // slurmctld forgets a job MinJobAge (300 s) after it ends.
  auto show = RunCommand({scontrol, "show", "job", "-o", job_id}, opts);
  if (show.ok() && show->exit_code == 0) {
    for (const auto& token : SplitWhitespace(show->out))
      for (const char* key : {"StdOut=", "StdErr="})
        if (token.starts_with(key) && token.size() > std::strlen(key)) {
          std::string path = token.substr(std::strlen(key));
          if (std::find(out.output_files.begin(), out.output_files.end(), path) == out.output_files.end())
            out.output_files.push_back(std::move(path));
        }
  } else {
    out.notes.push_back("scontrol no longer knows job " + job_id +
                        " (it forgets a job minutes after it ends): its output file is not read; give it to analyze");
  }
  return out;
}

}  // namespace dsd::coordinator
