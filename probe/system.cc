#include "probe/system.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"

namespace dsd::probe {
namespace {

int PrefixLength(const sockaddr* mask) {
  if (!mask) return 0;
  int bits = 0;
  if (mask->sa_family == AF_INET) {
    bits = std::popcount(reinterpret_cast<const sockaddr_in*>(mask)->sin_addr.s_addr);
  } else if (mask->sa_family == AF_INET6) {
    const auto* b = reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr.s6_addr;
    for (int i = 0; i < 16; ++i) bits += std::popcount(static_cast<unsigned>(b[i]));
  }
  return bits;
}

uint64_t MeminfoKiB(const std::string& meminfo, const std::string& key) {
  for (const auto& line : Split(meminfo, '\n')) {
    if (StartsWith(line, key + ":")) {
      auto parts = SplitWhitespace(line.substr(key.size() + 1));
      if (!parts.empty()) return std::stoull(parts[0]) * 1024;
    }
  }
  return 0;
}

}  // namespace

std::vector<NetInterface> ReadInterfaces() {
  std::map<std::string, NetInterface> by_name;
  std::vector<std::string> order;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_name) continue;
    auto [it, inserted] = by_name.try_emplace(a->ifa_name);
    NetInterface& nic = it->second;
    if (inserted) {
      order.push_back(a->ifa_name);
      nic.name = a->ifa_name;
      nic.up = a->ifa_flags & IFF_UP;
      nic.running = a->ifa_flags & IFF_RUNNING;
      nic.loopback = a->ifa_flags & IFF_LOOPBACK;
      auto mtu = ReadFile("/sys/class/net/" + nic.name + "/mtu");
      if (mtu.ok()) nic.mtu = std::atoi(mtu->c_str());
    }
    if (!a->ifa_addr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
      nic.addresses.push_back({"inet", buf, PrefixLength(a->ifa_netmask)});
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, buf, sizeof buf);
      nic.addresses.push_back({"inet6", buf, PrefixLength(a->ifa_netmask)});
    }
  }
  ::freeifaddrs(list);
  std::vector<NetInterface> out;
  for (const auto& name : order) out.push_back(by_name[name]);
  return out;
}

namespace {

// quota / period in CPUs when both are positive numbers; 0 for "max" (v2) or "-1" (v1): no limit.
double QuotaRatio(std::string_view quota, std::string_view period) {
  auto number = [](std::string_view s, double* out) {
    const std::string text(Trim(s));
    char* end = nullptr;
    *out = std::strtod(text.c_str(), &end);
    return !text.empty() && end && *end == '\0';
  };
  double q = 0, p = 0;
  return number(quota, &q) && number(period, &p) && q > 0 && p > 0 ? q / p : 0;
}

}  // namespace

double CgroupCpuQuota(std::string_view self_cgroup, std::string_view mountinfo,
                      const std::function<Result<std::string>(const std::string&)>& read) {
  // This process's cgroup path in each hierarchy: "0::/path" (v2), "4:cpu,cpuacct:/path" (v1).
  std::string v2_path, v1_path;
  for (const auto& line : Split(self_cgroup, '\n')) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && controllers.empty()) v2_path = path;
    for (const auto& c : Split(controllers, ','))
      if (c == "cpu") v1_path = path;
  }
  double lowest = 0;
  for (const auto& line : Split(mountinfo, '\n')) {
    // "36 25 0:31 <root> <mount point> <options> [optional…] - <fs type> <source> <super options>"
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const auto before = SplitWhitespace(line.substr(0, dash)), after = SplitWhitespace(line.substr(dash + 3));
    if (before.size() < 5 || after.empty()) continue;
    const std::string& root = before[3];
    const std::string& mount = before[4];
    bool v2 = after[0] == "cgroup2", v1 = false;
    if (after[0] == "cgroup" && after.size() >= 3)
      for (const auto& o : Split(after[2], ','))
        if (o == "cpu") v1 = true;
    const std::string& path = v2 ? v2_path : v1_path;
    if ((!v2 && !v1) || path.empty()) continue;
    // The part of our cgroup below the mount's root; a path outside it (a container that sees the
    // host's path) is taken as the mount itself.
    const bool below = path == root || StartsWith(path, root + "/");  // "/docker/abcdef" is not below "/docker/abc"
    std::string rel = root == "/" ? path : below ? path.substr(root.size()) : "/";
    if (rel.empty() || rel[0] != '/') rel = "/" + rel;
    while (true) {
      const std::string dir = mount + (rel == "/" ? "" : rel);
      double q = 0;
      if (v2) {
        // "250000 100000", or "max 100000"
        if (auto max = read(dir + "/cpu.max"); max.ok())
          if (const auto parts = SplitWhitespace(*max); parts.size() == 2) q = QuotaRatio(parts[0], parts[1]);
      } else if (auto quota = read(dir + "/cpu.cfs_quota_us"), period = read(dir + "/cpu.cfs_period_us");
                 quota.ok() && period.ok()) {
        q = QuotaRatio(*quota, *period);
      }
      if (q > 0 && (lowest == 0 || q < lowest)) lowest = q;
      if (rel == "/") break;
      const size_t slash = rel.rfind('/');
      rel = slash == 0 ? "/" : rel.substr(0, slash);
    }
  }
  return lowest;
}

SystemInfo ReadSystemInfo() {
  SystemInfo info;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) info.hostname = host;
  utsname u{};
  if (::uname(&u) == 0) {
    info.kernel = std::string(u.sysname) + " " + u.release;
    info.machine = u.machine;
  }
  // The CPUs this process may run on (taskset, a container's cpuset), not every CPU the machine has.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  info.cpus = ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed)
                                                                    : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  // A CPU quota (a container's CPU limit) allows fewer: spinning on more cores than it pays for
  // gets the whole cgroup throttled.
  auto read = [](const std::string& path) { return ReadFile(path, 4096); };
  if (auto cg = read("/proc/self/cgroup"); cg.ok()) {
    info.cpu_quota = CgroupCpuQuota(*cg, ReadFile("/proc/self/mountinfo", 1 << 20).value_or(""), read);
    if (info.cpu_quota > 0)
      info.cpus = std::max(1, std::min(info.cpus, static_cast<int>(std::floor(info.cpu_quota + 1e-9))));
  }
  if (auto cpuinfo = ReadFile("/proc/cpuinfo"); cpuinfo.ok()) {
    for (const auto& line : Split(*cpuinfo, '\n')) {
      if (StartsWith(line, "model name")) {
        info.cpu_model = std::string(Trim(line.substr(line.find(':') + 1)));
        break;
      }
    }
  }
  if (auto meminfo = ReadFile("/proc/meminfo"); meminfo.ok()) {
    info.memory_total = MeminfoKiB(*meminfo, "MemTotal");
    info.memory_available = MeminfoKiB(*meminfo, "MemAvailable");
  }
  info.interfaces = ReadInterfaces();
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) == 0) {
    info.shm_present = true;
    info.shm_size = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    info.shm_free = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  rlimit rl{};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    info.memlock_soft = rl.rlim_cur == RLIM_INFINITY ? SystemInfo::kUnlimited : rl.rlim_cur;
    info.memlock_hard = rl.rlim_max == RLIM_INFINITY ? SystemInfo::kUnlimited : rl.rlim_max;
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    info.infiniband_devices.push_back(e.path().filename().string());
  }
  log::Get("probe")->debug("system: {} {} cpus={} interfaces={} shm={}", info.hostname, info.kernel, info.cpus,
                           info.interfaces.size(), info.shm_size);
  return info;
}

nlohmann::json ToJson(const SystemInfo& info) {
  nlohmann::json nics = nlohmann::json::array();
  for (const auto& n : info.interfaces) {
    nlohmann::json addrs = nlohmann::json::array();
    for (const auto& a : n.addresses)
      addrs.push_back({{"family", a.family}, {"address", a.address}, {"prefix", a.prefix}});
    nics.push_back({{"name", n.name},
                    {"up", n.up},
                    {"running", n.running},
                    {"loopback", n.loopback},
                    {"mtu", n.mtu},
                    {"addresses", addrs}});
  }
  auto limit = [](uint64_t v) -> nlohmann::json {
    if (v == SystemInfo::kUnlimited) return "unlimited";
    return v;
  };
  return {{"hostname", info.hostname},
          {"kernel", info.kernel},
          {"machine", info.machine},
          {"cpus", info.cpus},
          {"cpu_quota", info.cpu_quota},
          {"cpu_model", info.cpu_model},
          {"memory_total_bytes", info.memory_total},
          {"memory_available_bytes", info.memory_available},
          {"interfaces", nics},
          {"shm", {{"present", info.shm_present}, {"size_bytes", info.shm_size}, {"free_bytes", info.shm_free}}},
          {"memlock", {{"soft", limit(info.memlock_soft)}, {"hard", limit(info.memlock_hard)}}},
          {"infiniband_devices", info.infiniband_devices}};
}

}  // namespace dsd::probe
