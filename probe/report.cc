#include "probe/report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/log.h"
#include "common/strings.h"

#ifndef DSDOCTOR_VERSION
#define DSDOCTOR_VERSION "0.0.0"
#endif

namespace dsd::probe {
namespace {

bool IsContainerOrVirtualBridge(const std::string& nic) {
  for (const char* p : {"docker", "virbr", "veth", "br-", "cni", "flannel", "cali"}) {
    if (StartsWith(nic, p)) return true;
  }
  return false;
}

std::string DescribeInterface(const NetInterface& n) {
  std::string s = n.name + (n.up ? " up" : " down");
  if (n.up && !n.running && !n.loopback) s += " (no carrier)";
  for (const auto& a : n.addresses) {
    if (a.family == "inet6" && StartsWith(a.address, "fe80")) continue;  // link-local: noise
    s += " " + a.address + "/" + std::to_string(a.prefix);
  }
  s += " mtu " + std::to_string(n.mtu);
  return s;
}

CheckRow HostRow(const SystemInfo& s) {
  CheckRow r{"host", CheckStatus::kInfo, "", {}, ""};
  r.summary = s.hostname + " · " + s.kernel + " " + s.machine + " · " + std::to_string(s.cpus) + " CPUs · " +
              FormatBytes(static_cast<double>(s.memory_total)) + " memory (" +
              FormatBytes(static_cast<double>(s.memory_available)) + " available)";
  if (!s.cpu_model.empty()) r.details.push_back("cpu: " + s.cpu_model);
  if (s.cpu_quota > 0) {
    char quota[32];
    std::snprintf(quota, sizeof quota, "%.2g", s.cpu_quota);
    r.details.push_back(std::string("cgroup CPU quota: ") + quota + " CPUs (the CPU count above is capped by it)");
  }
  return r;
}

CheckRow InterfacesRow(const SystemInfo& s) {
  CheckRow r{"interfaces", CheckStatus::kOk, "", {}, ""};
  int usable = 0;
  for (const auto& n : s.interfaces) {
    r.details.push_back(DescribeInterface(n));
    bool has_inet =
        std::any_of(n.addresses.begin(), n.addresses.end(), [](const auto& a) { return a.family == "inet"; });
    if (!n.loopback && n.up && has_inet) ++usable;
  }
  r.summary = std::to_string(s.interfaces.size()) + " interfaces, " + std::to_string(usable) +
              " up with an IPv4 address besides loopback";
  if (usable == 0) {
    r.status = CheckStatus::kWarn;
    r.remedy = "multi-node jobs need a non-loopback interface that is up with an address; check `ip addr`";
  }
  return r;
}

CheckRow ShmRow(const SystemInfo& s) {
  CheckRow r{"/dev/shm", CheckStatus::kOk, "", {}, ""};
  if (!s.shm_present) {
    r.status = CheckStatus::kFail;
    r.summary = "not mounted";
    r.remedy = "mount a tmpfs on /dev/shm; NCCL and PyTorch DataLoader workers need shared memory";
    return r;
  }
  r.summary =
      FormatBytes(static_cast<double>(s.shm_size)) + " (" + FormatBytes(static_cast<double>(s.shm_free)) + " free)";
  if (s.shm_size < kMinShmBytes) {
    r.status = CheckStatus::kWarn;
    r.summary += ", below " + FormatBytes(static_cast<double>(kMinShmBytes));
    r.remedy =
        "NCCL's shared-memory transport and DataLoader workers can fail with 'No space left on device' or "
        "bus errors; in a container start it with --shm-size=8g (or --ipc=host)";
  }
  return r;
}

CheckRow MemlockRow(const SystemInfo& s) {
  CheckRow r{"memlock", CheckStatus::kOk, "", {}, ""};
  auto fmt = [](uint64_t v) { return v == SystemInfo::kUnlimited ? std::string("unlimited") : FormatBytes(double(v)); };
  r.summary = "soft " + fmt(s.memlock_soft) + ", hard " + fmt(s.memlock_hard);
  if (s.memlock_soft != SystemInfo::kUnlimited) {
    if (!s.infiniband_devices.empty()) {
      r.status = CheckStatus::kWarn;
      r.summary += "; InfiniBand devices present: " + Join(s.infiniband_devices, ",");
      r.remedy =
          "RDMA memory registration needs `ulimit -l unlimited` (limits.conf memlock, or docker "
          "--ulimit memlock=-1); otherwise NCCL's IB transport fails or falls back to sockets";
    } else {
      r.status = CheckStatus::kInfo;
      r.summary += " (matters only for InfiniBand/RDMA, none found)";
    }
  }
  return r;
}

CheckRow NcclRow(const NcclInfo& n) {
  CheckRow r{"NCCL", CheckStatus::kOk, "", {}, ""};
  if (!n.found) {
    r.status = CheckStatus::kWarn;
    r.summary = "not found";
    r.details.push_back(n.error);
    r.remedy =
        "install NCCL (libnccl2, or the nvidia-nccl wheel PyTorch uses) and put its directory on "
        "LD_LIBRARY_PATH, or set DSDOCTOR_NCCL_LIBRARY to the library";
    return r;
  }
  if (!n.error.empty()) {
    r.status = CheckStatus::kFail;
    r.summary = "loaded from " + n.path + " but unusable";
    r.details.push_back(n.error);
    r.remedy = "the file is not a working NCCL; reinstall it";
    return r;
  }
  r.summary = n.version.ToString() + " at " + n.path;
  return r;
}

CheckRow BootstrapRow(const NodeInventory& inv) {
  const auto& b = inv.nccl_bootstrap;
  CheckRow r{"NCCL bootstrap", CheckStatus::kOk, "", {}, ""};
  if (!b.ran) {
    r.status = CheckStatus::kInfo;
    r.summary = "not run (no NCCL)";
    return r;
  }
  auto ifname = inv.env.count("NCCL_SOCKET_IFNAME") ? inv.env.at("NCCL_SOCKET_IFNAME") : std::string();
  std::string under = ifname.empty() ? "" : " under NCCL_SOCKET_IFNAME=" + ifname;
  for (const auto& w : b.warnings) r.details.push_back("NCCL WARN " + w);
  if (!b.error.empty()) {
    r.status = CheckStatus::kFail;
    r.summary = "probe failed: " + b.error;
    r.remedy = "run with DSDOCTOR_LOG_LEVEL=debug to see NCCL's output";
    return r;
  }
  if (!b.ok) {
    r.status = CheckStatus::kFail;
    r.summary = "ncclGetUniqueId failed" + under + ": " + b.result_text;
    bool no_iface = std::any_of(b.warnings.begin(), b.warnings.end(), [](const std::string& w) {
      return w.find("no socket interface") != std::string::npos;
    });
    if (no_iface && !ifname.empty()) {
      std::vector<std::string> names;
      for (const auto& n : inv.system.interfaces) {
        if (n.up && !n.loopback) names.push_back(n.name);
      }
      r.remedy = "NCCL_SOCKET_IFNAME=" + ifname +
                 " matches no interface here; set it to one that exists on every "
                 "node (up here: " +
                 (names.empty() ? "none" : Join(names, ", ")) + "), a prefix such as 'eth', or '^docker,lo' to exclude";
    } else {
      r.remedy = "see NCCL's WARN lines above; NCCL_DEBUG=INFO shows the full bootstrap log";
    }
    return r;
  }
  r.summary = "uses " + b.interface + " " + b.address + under;
  if (b.interface == "lo") {
    r.status = CheckStatus::kWarn;
    r.remedy =
        "NCCL would bootstrap over loopback: peers on other nodes cannot reach it; set NCCL_SOCKET_IFNAME "
        "to the cluster interface";
  } else if (IsContainerOrVirtualBridge(b.interface)) {
    r.status = CheckStatus::kWarn;
    r.remedy =
        "a container/virtual bridge is usually not routable between nodes; set NCCL_SOCKET_IFNAME to the "
        "cluster interface (or '^docker,lo,veth')";
  }
  return r;
}

CheckRow CudaRow(const CudaInfo& c) {
  CheckRow r{"CUDA", CheckStatus::kInfo, "", {}, ""};
  if (!c.runtime_found) {
    r.summary = "no CUDA runtime found";
    r.details.push_back(c.error);
    return r;
  }
  r.summary = "runtime " + FormatCudaVersion(c.runtime_version);
  if (c.no_driver()) {
    r.summary += ", no NVIDIA driver";
    if (!c.device_error_text.empty()) r.summary += " (cudart: " + c.device_error_text + ")";
    return r;
  }
  r.summary +=
      ", driver supports " + FormatCudaVersion(c.driver_version) + ", " + std::to_string(c.device_count) + " GPUs";
  r.status = CheckStatus::kOk;
  if (c.driver_version < c.runtime_version) {
    r.status = CheckStatus::kWarn;
    r.remedy = "the driver is older than the CUDA runtime (" + c.device_error_text +
               "); upgrade the driver or use a runtime <= " + FormatCudaVersion(c.driver_version);
  } else if (c.device_error != 0) {
    r.status = CheckStatus::kWarn;
    r.summary += " (" + c.device_error_text + ")";
    r.remedy = "check CUDA_VISIBLE_DEVICES and `nvidia-smi`";
  }
  return r;
}

CheckRow GpuRow(const NvmlInfo& n) {
  CheckRow r{"GPUs", CheckStatus::kInfo, "", {}, ""};
  if (!n.found) {
    r.summary = "none (NVML not found)";
    return r;
  }
  if (!n.error.empty()) {
    r.status = CheckStatus::kWarn;
    r.summary = "NVML unusable: " + n.error;
    r.remedy = "check the driver with `nvidia-smi`";
    return r;
  }
  r.status = CheckStatus::kOk;
  r.summary = std::to_string(n.gpus.size()) + " GPUs, driver " + n.driver_version;
  for (const auto& g : n.gpus) {
    r.details.push_back(std::to_string(g.index) + ": " + g.name + " " + FormatBytes(double(g.memory_total)) + " " +
                        g.pci_bus_id + " " + g.uuid);
  }
  return r;
}

CheckRow EnvRow(const EnvMap& env) {
  CheckRow r{"environment", CheckStatus::kInfo, "", {}, ""};
  r.summary = env.empty() ? "no NCCL_*/CUDA_VISIBLE_DEVICES/MASTER_* variables set"
                          : std::to_string(env.size()) + " job-relevant variables";
  for (const auto& [k, v] : env) r.details.push_back(k + "=" + v);
  return r;
}

std::vector<CheckRow> DsEnvRows(const std::vector<DsEnvFile>& files) {
  std::vector<CheckRow> rows;
  if (files.empty()) {
    rows.push_back({".deepspeed_env", CheckStatus::kInfo, "none found (looked in cwd, $HOME, $DS_ENV_FILE)", {}, ""});
    return rows;
  }
  for (const auto& f : files) {
    CheckRow r{".deepspeed_env", CheckStatus::kOk, "", {}, ""};
    if (!f.error.empty()) {
      r.status = CheckStatus::kFail;
      r.summary = f.path + ": " + f.error;
      rows.push_back(r);
      continue;
    }
    r.summary = f.path + " (" + f.source + "): " + std::to_string(f.entries.size()) + " variables";
    bool fatal = false;
    for (const auto& p : f.problems) {
      fatal |= p.fatal;
      r.details.push_back(f.path + ":" + std::to_string(p.line) + ": " + p.reason + ": '" + p.text + "'");
    }
    if (!f.problems.empty()) {
      r.status = fatal ? CheckStatus::kFail : CheckStatus::kWarn;
      r.summary += ", " + std::to_string(f.problems.size()) + " bad lines";
      r.remedy = "one KEY=VALUE per line, no blank lines, no comments, no quotes";
    }
    rows.push_back(r);
  }
  return rows;
}

}  // namespace

const char* CheckStatusName(CheckStatus s) {
  switch (s) {
    case CheckStatus::kOk:
      return "ok";
    case CheckStatus::kInfo:
      return "info";
    case CheckStatus::kWarn:
      return "warn";
    case CheckStatus::kFail:
      return "fail";
  }
  return "?";
}

std::vector<CheckRow> EvaluateNode(const NodeInventory& inv) {
  std::vector<CheckRow> rows = {HostRow(inv.system),    InterfacesRow(inv.system), ShmRow(inv.system),
                                MemlockRow(inv.system), NcclRow(inv.nccl),         BootstrapRow(inv),
                                CudaRow(inv.cuda),      GpuRow(inv.nvml),          EnvRow(inv.env)};
  for (auto& r : DsEnvRows(inv.deepspeed_env)) rows.push_back(std::move(r));
  log::Get("probe")->debug("evaluated {} report rows", rows.size());
  return rows;
}

std::string RenderChecksText(const std::string& title, const std::vector<CheckRow>& rows, const RenderOptions& opts) {
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.name.size());
  auto mark = [&](CheckStatus s) -> std::string {
    static const char* kPlain[] = {"[ ok ]", "[info]", "[warn]", "[FAIL]"};
    static const char* kColor[] = {"\033[32m", "\033[36m", "\033[33m", "\033[1;31m"};
    int i = static_cast<int>(s);
    return opts.color ? std::string(kColor[i]) + kPlain[i] + "\033[0m" : kPlain[i];
  };
  std::ostringstream out;
  out << title << "\n\n";
  std::string indent(6 + 2 + width + 2, ' ');
  for (const auto& r : rows) {
    out << mark(r.status) << "  " << r.name << std::string(width - r.name.size(), ' ') << "  " << r.summary << "\n";
    for (const auto& d : r.details) out << indent << d << "\n";
    if (!r.remedy.empty()) out << indent << "remedy: " << r.remedy << "\n";
  }
  CheckCounts counts = CountChecks(rows);
  out << "\n" << counts.fail << " failed, " << counts.warn << " warnings, " << rows.size() << " checks\n";
  return out.str();
}

CheckCounts CountChecks(const std::vector<CheckRow>& rows) {
  CheckCounts c;
  for (const auto& r : rows) {
    c.fail += r.status == CheckStatus::kFail;
    c.warn += r.status == CheckStatus::kWarn;
  }
  return c;
}

nlohmann::json ChecksJson(const std::vector<CheckRow>& rows) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& r : rows) {
    checks.push_back({{"name", r.name},
                      {"status", CheckStatusName(r.status)},
                      {"summary", r.summary},
                      {"details", r.details},
                      {"remedy", r.remedy}});
  }
  return checks;
}

nlohmann::json ReportJson(const NodeInventory& inv, const std::vector<CheckRow>& rows) {
  CheckCounts counts = CountChecks(rows);
  return {{"schema", "dsdoctor.report/1"},
          {"dsdoctor_version", DSDOCTOR_VERSION},
          {"inventory", ToJson(inv)},
          {"checks", ChecksJson(rows)},
          {"summary", {{"fail", counts.fail}, {"warn", counts.warn}, {"checks", rows.size()}}}};
}

int ReportExitCode(const std::vector<CheckRow>& rows) { return CountChecks(rows).fail > 0 ? 1 : 0; }

}  // namespace dsd::probe
