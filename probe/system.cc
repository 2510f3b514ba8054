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
          {"cpu_model", info.cpu_model},
          {"memory_total_bytes", info.memory_total},
          {"memory_available_bytes", info.memory_available},
          {"interfaces", nics},
          {"shm", {{"present", info.shm_present}, {"size_bytes", info.shm_size}, {"free_bytes", info.shm_free}}},
          {"memlock", {{"soft", limit(info.memlock_soft)}, {"hard", limit(info.memlock_hard)}}},
          {"infiniband_devices", info.infiniband_devices}};
}

}  // namespace dsd::probe
