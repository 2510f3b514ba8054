#include "coordinator/slurm.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
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

// Slurm's host list ("node-[0-3],gpu7") expanded by `scontrol show hostnames`, Slurm's own grammar.
// Errors quote scontrol.
Result<std::vector<std::string>> ExpandHostlist(const std::string& list, const std::string& scontrol) {
  CommandOptions opts;
  opts.timeout = std::chrono::seconds(30);
  auto res = RunCommand({scontrol, "show", "hostnames", list}, opts);
  if (!res.ok()) return Unavailable("cannot expand '" + list + "' with " + scontrol + ": " + res.status().message());
  if (res->exit_code != 0)
    return Unavailable("`" + scontrol + " show hostnames " + list + "` failed (exit " + std::to_string(res->exit_code) +
                       "): " + std::string(Trim(res->err + res->out)));
  std::vector<std::string> hosts;
  for (const auto& line : Split(res->out, '\n'))
    if (auto host = Trim(line); !host.empty()) hosts.emplace_back(host);
  return hosts;
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
  auto hosts = ExpandHostlist(nodelist, scontrol);
  if (!hosts.ok()) return InvalidArgument("SLURM_JOB_NODELIST: " + hosts.status().message());
  a.hosts = std::move(*hosts);
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
  for (auto& r : out.records) {
    if (r.node_list.empty() || r.node_list == "None assigned") continue;
    auto [it, fresh] = expanded.try_emplace(r.node_list);
    if (fresh) {
      auto hosts = ExpandHostlist(r.node_list, scontrol);
      it->second = hosts.ok() && !hosts->empty() ? std::move(*hosts) : std::vector<std::string>{r.node_list};
    }
    r.nodes = it->second;
  }
  // The job's output files, which hold slurmstepd's own lines (killed for memory, cancelled):
  // slurmctld forgets a job MinJobAge (300 s) after it ends.
  CommandOptions opts;
  opts.timeout = std::chrono::seconds(30);
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

namespace {

std::string PendingReason(const std::string& squeue, const std::string& job_id) {
  CommandOptions opts;
  opts.timeout = std::chrono::seconds(10);
  auto res = RunCommand({squeue, "-h", "-j", job_id, "-o", "%r"}, opts);
  if (!res.ok() || res->exit_code != 0) return "";
  return std::string(Trim(res->out));
}

// "salloc: Granted job allocation 12" / "salloc: Pending job allocation 12" → "12".
std::string JobIdAfter(std::string_view line, std::string_view what) {
  const size_t at = line.find(what);
  if (at == std::string_view::npos) return "";
  std::string id;
  for (size_t i = at + what.size(); i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])); ++i)
    id += line[i];
  return id;
}

}  // namespace

Result<SallocOutcome> RunInSlurmAllocation(const SallocRequest& req) {
  std::vector<std::string> argv = {req.salloc, "--immediate=" + std::to_string(std::max(1, req.wait_s)), "-J",
                                   "dsdoctor"};
  argv.insert(argv.end(), req.args.begin(), req.args.end());
  // The command gets our own stderr back (fd 3 through salloc): only salloc's lines pass our relay.
  argv.insert(argv.end(), {"/bin/sh", "-c", "exec 2>&3 3>&-; exec \"$@\"", "dsdoctor-in-allocation"});
  argv.insert(argv.end(), req.command.begin(), req.command.end());
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // fd 3 becomes our stderr without O_CLOEXEC (salloc hands it on to the command); the pipe's
    // write end moves off fd 3 first, should it be there.
    const int write_end = err_pipe[1] == 3 ? ::dup(err_pipe[1]) : err_pipe[1];
    ::dup2(2, 3);
    ::dup2(write_end, 2);
    ::execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "exec %s: %s\n", cargv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(err_pipe[1]);
  SallocOutcome out;
  std::string pending;
  std::string partial;
  std::vector<std::string> lines;
  auto last_poll = std::chrono::steady_clock::now() - std::chrono::seconds(10);
  for (;;) {
    struct pollfd p {
      err_pipe[0], POLLIN, 0
    };
    const int ready = ::poll(&p, 1, 1000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0) {
      char buf[4096];
      const ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
      if (n <= 0) break;
      (void)!::write(2, buf, static_cast<size_t>(n));  // the person sees what salloc says
      partial.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = partial.find('\n')) != std::string::npos) {
        const std::string line = partial.substr(0, nl);
        partial.erase(0, nl + 1);
        if (auto id = JobIdAfter(line, "Granted job allocation "); !id.empty()) out.granted = true, out.job_id = id;
        if (auto id = JobIdAfter(line, "Pending job allocation "); !id.empty()) pending = out.job_id = id;
        if (!out.granted && lines.size() < 20) lines.push_back(line);
      }
    }
    // While it waits, what Slurm says it waits for (the reason is gone once salloc gives up).
    if (!out.granted && !pending.empty() && std::chrono::steady_clock::now() - last_poll >= std::chrono::seconds(2)) {
      last_poll = std::chrono::steady_clock::now();
      if (auto reason = PendingReason(req.squeue, pending); !reason.empty() && reason != "None")
        out.pending_reason = reason;
    }
  }
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!out.granted) {
    for (auto& l : lines)
      if (l.find("exec ") == 0 && out.exit_code == 127)
        return Unavailable(l + " (scripts/setup.sh installs slurm-client)");
    out.error = std::move(lines);
  }
  return out;
}

diagnosis::Finding NoAllocationFinding(const SallocRequest& req, const SallocOutcome& o) {
  struct ReasonRemedy {
    const char* reason;  // squeue's %r, or words of salloc's error
    const char* remedy;
  };
  static constexpr ReasonRemedy kRemedies[] = {
      {"Resources",
       "every node that fits the request is busy: wait longer (--slurm-wait), ask for fewer nodes or GPUs, or use "
       "another partition (`sinfo -s` shows idle nodes)"},
      {"Priority", "jobs ahead of this one come first: `squeue -p PARTITION --start` estimates when it would run"},
      {"ReqNodeNotAvail",
       "a node the request needs is down, drained or reserved: `sinfo -R` names it and why; --exclude it"},
      {"PartitionNodeLimit",
       "the partition cannot give that many nodes (or that much per node): `sinfo -p PARTITION -o '%D %c %m %G'` "
       "shows what it has"},
      {"PartitionConfig", "the partition has no nodes that fit the request: `sinfo -o '%P %D %c %m %G'`"},
      {"not available",
       "no node of the partition has what was asked (-N, --gpus, --mem, --constraint): `sinfo -o '%P %D %c %m %G "
       "%f'` shows what each partition has"},
      {"Node count specification invalid",
       "the partition has fewer nodes than asked (-N): `sinfo -p PARTITION` counts them"},
      {"PartitionDown", "the partition is down: ask the cluster's admins or use another (`sinfo -s`)"},
      {"PartitionInactive", "the partition is inactive: use another (`sinfo -s`)"},
      {"invalid partition", "no partition of that name: `sinfo -s` lists them (-p NAME)"},
      {"QOS", "a QOS limit of your account holds the job: `sacctmgr show qos` and `squeue -j ID -o %r`"},
      {"Assoc", "a limit of your account or user holds the job: `sacctmgr show assoc user=$USER`"},
      {"Invalid account", "no such account for you: `sacctmgr show assoc user=$USER` lists yours (-A NAME)"},
      {"JobHeld", "the job is held: `scontrol release ID`"},
  };
  diagnosis::Finding f;
  f.code = diagnosis::codes::kSlurmAllocation;
  f.severity = diagnosis::Severity::kError;
  const std::string asked = Join(req.args, " ");
  std::string said;
  for (const auto& l : o.error)
    if (l.find("error") != std::string::npos) said += (said.empty() ? "" : "; ") + std::string(Trim(l));
  if (said.empty() && !o.error.empty()) said = std::string(Trim(o.error.back()));
  f.summary = "Slurm granted no allocation" + std::string(asked.empty() ? "" : " for `" + asked + "`") +
              (o.job_id.empty() ? "" : " (job " + o.job_id + ")") + " within " + std::to_string(req.wait_s) + " s" +
              (o.pending_reason.empty() ? "" : ": pending (" + o.pending_reason + ")");
  f.evidence.push_back("salloc --immediate=" + std::to_string(req.wait_s) + (asked.empty() ? "" : " " + asked) +
                       " exited " + std::to_string(o.exit_code) + " after " +
                       std::to_string(static_cast<int>(o.waited_s)) + " s");
  if (!said.empty()) f.evidence.push_back(said.starts_with("salloc:") ? said : "salloc: " + said);
  if (!o.pending_reason.empty()) f.evidence.push_back("squeue -j " + o.job_id + " -o %r: " + o.pending_reason);
  const std::string text = o.pending_reason + " " + said;
  for (const auto& r : kRemedies)
    if (text.find(r.reason) != std::string::npos) {
      f.remedy = r.remedy;
      break;
    }
  if (f.remedy.empty())
    f.remedy =
        "Slurm's own words above say why; `squeue -u $USER` and `sinfo -s` show the queue and the partitions. "
        "Nothing was started: run again with other --slurm-args or a longer --slurm-wait";
  f.proof = diagnosis::proof::kScheduler;
  return f;
}

}  // namespace dsd::coordinator
