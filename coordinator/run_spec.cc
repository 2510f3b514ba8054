#include "coordinator/run_spec.h"

#include <elf.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "agent/token.h"
#include "collectors/debug_profile.h"
#include "common/file.h"
#include "common/strings.h"
#include "coordinator/launcher.h"

namespace dsd::coordinator {

namespace {

std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool PythonName(std::string_view path) {
  const std::string_view name = BaseName(path);
  return StartsWith(name, "python") || StartsWith(name, "pypy") || StartsWith(name, "ipython");
}

// argv[0] as exec would find it: itself when it has a slash, else the first match on PATH.
std::string Resolve(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  for (const auto& dir : Split(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return program;
}

}  // namespace

bool IsPythonCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return false;
  if (BaseName(argv[0]) == "env") {  // env [-i] [-u NAME] [NAME=VALUE …] PROGRAM …
    size_t i = 1;
    while (i < argv.size() && (StartsWith(argv[i], "-") || argv[i].find('=') != std::string::npos))
      i += argv[i] == "-u" || argv[i] == "--unset" ? 2 : 1;
    return i < argv.size() && IsPythonCommand(std::vector<std::string>(argv.begin() + i, argv.end()));
  }
  if (PythonName(argv[0])) return true;
  // A script run directly (./train.py): its interpreter line says, `#!/usr/bin/env python3` included.
  auto head = ReadFile(Resolve(argv[0]), 1u << 20);
  if (!head.ok() || !StartsWith(*head, "#!")) return false;
  const std::string_view line = std::string_view(*head).substr(0, head->find('\n'));
  for (const auto& word : SplitWhitespace(line.substr(2)))
    if (PythonName(word)) return true;
  return false;
}

std::vector<std::string> ElfNeeded(const std::string& path) {
  // Only the headers, the dynamic section and its string table are read: a program may be large.
  std::vector<std::string> needed;
  auto head = ReadFileRange(path, 0, sizeof(Elf64_Ehdr));
  if (!head.ok() || head->size() < sizeof(Elf64_Ehdr) || head->compare(0, 4, ELFMAG) != 0 ||
      (*head)[EI_CLASS] != ELFCLASS64)
    return needed;
  Elf64_Ehdr eh;
  std::memcpy(&eh, head->data(), sizeof eh);
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 4096) return needed;
  auto phdrs = ReadFileRange(path, eh.e_phoff, size_t{eh.e_phnum} * sizeof(Elf64_Phdr));
  if (!phdrs.ok() || phdrs->size() != size_t{eh.e_phnum} * sizeof(Elf64_Phdr)) return needed;
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  std::memcpy(ph.data(), phdrs->data(), phdrs->size());
  // The string table is named by its address: the loadable segment that holds it gives its offset.
  auto file_offset = [&](uint64_t vaddr) -> std::optional<uint64_t> {
    for (const auto& p : ph)
      if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && vaddr - p.p_vaddr < p.p_filesz)
        return p.p_offset + (vaddr - p.p_vaddr);
    return std::nullopt;
  };
  for (const auto& p : ph) {
    if (p.p_type != PT_DYNAMIC || p.p_filesz > (size_t{1} << 20)) continue;
    auto dyn_bytes = ReadFileRange(path, p.p_offset, p.p_filesz);
    if (!dyn_bytes.ok()) continue;
    std::vector<Elf64_Dyn> dyn(dyn_bytes->size() / sizeof(Elf64_Dyn));
    if (dyn.empty()) continue;  // (memcpy of nothing from an empty string is still undefined)
    std::memcpy(dyn.data(), dyn_bytes->data(), dyn.size() * sizeof(Elf64_Dyn));
    std::optional<uint64_t> strtab;
    uint64_t strsz = 64 << 10;
    for (const auto& d : dyn) {
      if (d.d_tag == DT_STRTAB) strtab = file_offset(d.d_un.d_ptr);
      if (d.d_tag == DT_STRSZ) strsz = std::min<uint64_t>(d.d_un.d_val, 4 << 20);
    }
    if (!strtab) return needed;
    auto strings = ReadFileRange(path, *strtab, strsz);
    if (!strings.ok()) return needed;
    for (const auto& d : dyn) {
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag != DT_NEEDED || d.d_un.d_val >= strings->size()) continue;
      const char* name = strings->data() + d.d_un.d_val;
      needed.emplace_back(name, strnlen(name, strings->size() - d.d_un.d_val));
    }
  }
  return needed;
}

bool IsMpiCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return false;
  if (IsPythonCommand(argv)) {
    // The script: the first argument that is a file (python [-u …] train.py), or argv[0] itself.
    for (size_t i = PythonName(argv[0]) ? 1 : 0; i < argv.size(); ++i) {
      // `python -m mpi4py script.py`: mpi4py's own runner; any other module or code: no file to read.
      if (argv[i] == "-m") return i + 1 < argv.size() && argv[i + 1] == "mpi4py";
      if (argv[i] == "-c") return false;
      if (argv[i] == "-W" || argv[i] == "-X") {  // an option with a value
        ++i;
        continue;
      }
      if (StartsWith(argv[i], "-")) continue;
      auto text = ReadFile(Resolve(argv[i]), 4u << 20);
      if (!text.ok()) return false;
      for (const char* use : {"import mpi4py", "from mpi4py"})
        if (text->find(use) != std::string::npos) return true;
      return false;
    }
    return false;
  }
  // A program that also links another collective library (Gloo, NCCL, RCCL, oneCCL, PyTorch)
  // picks its backend at run time, and its env:// ranks need no mpirun: only --trace-mpi says so.
  bool mpi = false, other = false;
  for (const auto& lib : ElfNeeded(Resolve(argv[0]))) {
    mpi |= StartsWith(lib, "libmpi.so") || StartsWith(lib, "libmpi_") || StartsWith(lib, "libmpich");
    for (const char* backend : {"libgloo", "libnccl", "librccl", "libccl", "libtorch", "libc10"})
      other |= StartsWith(lib, backend);
  }
  return mpi && !other;
}

std::vector<RankLaunch> RunSpec::NodeRanks(size_t index) const {
  std::vector<RankLaunch> out;
  for (const auto& l : ranks.ranks)
    if (static_cast<size_t>(l.node_index) == index) out.push_back(l);
  return out;
}

Result<RunSpec> PlanRun(const RunPlanOptions& o) {
  DSD_ASSIGN_OR_RETURN(JobNodes nodes, PlanJobNodes(o.nodes));
  RunSpec s;
  s.simulated = nodes.simulated || o.launcher == "local";
  s.launcher = o.direct              ? "direct"
               : !o.launcher.empty() ? o.launcher
                                     : DefaultLauncher(!o.agents.empty(), s.simulated, nodes.slurm);
  if (o.direct && !s.simulated)
    return InvalidArgument("--direct starts ranks on this machine only; a hostfile's nodes need agents");
  s.command = o.command;
  s.python = IsPythonCommand(o.command);
  std::error_code ec;
  s.cwd = std::filesystem::current_path(ec).string();
  s.run_dir = RunDir(std::filesystem::absolute(o.log_dir, ec).lexically_normal().string());
  if (!o.dry_run) {
    DSD_ASSIGN_OR_RETURN(s.run_id, agent::GenerateToken());
    s.run_id.resize(32);  // 128 bits tell two runs apart
  }
  s.trace_python = o.trace;
  s.mpi = o.mpi == "on" || (o.mpi.empty() && !o.direct && IsMpiCommand(o.command));
  if (s.mpi && o.direct)
    return InvalidArgument(
        "--direct cannot run an MPI program: mpirun starts its ranks, each handed to its "
        "node's agent (--launcher local, mpirun, ssh, …); without --trace-mpi each rank is "
        "an MPI singleton");
  if (s.mpi && o.mpi.empty())
    nodes.notes.push_back(o.command[0] +
                          " is an MPI program: mpirun starts its ranks, each handed to its node's agent (--no-mpi: the "
                          "agents start them, each an MPI singleton)");
  s.share_group = o.share_group;
  s.timeout_s = o.timeout_s;
  s.hang_after_s = o.hang_after_s;
  // --tui: a hang is shown, not acted on, until the person presses q.
  s.stop_on_hang = (!o.on_hang.empty() ? o.on_hang : o.tui ? "wait" : "stop") == "stop";
  s.tui = o.tui;
  s.quiet = o.quiet;
  s.serve = o.serve;
  s.reattach_window = std::chrono::milliseconds(static_cast<int64_t>(o.reattach_window_s * 1000));
  // MASTER_ADDR as deepspeed picks it: --master_addr, else the first node, which is its agent's
  // address when simulated (local agents listen on 127.0.0.2, …) or attached without a hostfile.
  s.master_addr = !o.master_addr.empty()       ? o.master_addr
                  : o.direct                   ? "127.0.0.1"
                  : s.simulated                ? LocalLauncherOptions{}.first_address
                  : nodes.source == "--agents" ? o.agents.at(0).host
                                               : nodes.nodes.at(0).host;
  s.master_port = o.master_port > 0 ? o.master_port : !s.simulated ? 29500 : o.dry_run ? 0 : net::PickUnusedPort();
  s.ranks = PlanRanks(nodes, {}, s.master_addr, s.master_port);
  s.nodes = std::move(nodes);
  // Every rank's environment: what travels from this shell (job_env.h), the diagnostic profile
  // (NCCL's WARN lines always; every library's debug output at the debug level; a variable the
  // user set wins), and what run itself sets.
  s.env = JobEnvironment();
  collectors::ApplyDiagnosticProfile(o.debug, &s.env);
  if (!s.env.count("DSDOCTOR_TIMEOUT")) {
    char timeout[32];
    std::snprintf(timeout, sizeof timeout, "%g", o.timeout_s);
    s.env["DSDOCTOR_TIMEOUT"] = timeout;  // the bundled runtime's watchdog
  }
  s.env["PYTHONUNBUFFERED"] = "1";  // tracebacks and prints reach the log as they happen
  // The agents add NCCL's profiler plugin to traced ranks (collectors/python_tracer.h) unless told.
  if (!o.nccl_profiler) s.env["DSDOCTOR_NCCL_PROFILER"] = "off";
  if (o.share_group) s.env["DSDOCTOR_TRACE_MODE"] = "0640";
  return s;
}

}  // namespace dsd::coordinator
