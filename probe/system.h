// This node's host facts: identity, CPUs, memory, network interfaces, /dev/shm, memlock.
// ReadSystemInfo touches the real system (uname, /proc, getifaddrs, statvfs, getrlimit); the
// structs are plain values so reports can be built and tested from fakes.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dsd::probe {

struct InterfaceAddress {
  std::string family;  // "inet" | "inet6"
  std::string address;
  int prefix = 0;
};

struct NetInterface {
  std::string name;
  bool up = false;       // IFF_UP
  bool running = false;  // IFF_RUNNING (carrier)
  bool loopback = false;
  int mtu = 0;
  std::vector<InterfaceAddress> addresses;
};

struct SystemInfo {
  std::string hostname;
  std::string kernel;   // "Linux 6.1.0-18-amd64"
  std::string machine;  // "x86_64"
  int cpus = 0;  // that this process may run on (its affinity mask: taskset, a cpuset)
  std::string cpu_model;
  uint64_t memory_total = 0, memory_available = 0;
  std::vector<NetInterface> interfaces;
  bool shm_present = false;
  uint64_t shm_size = 0, shm_free = 0;
  // RLIMIT_MEMLOCK; kUnlimited when RLIM_INFINITY.
  static constexpr uint64_t kUnlimited = UINT64_MAX;
  uint64_t memlock_soft = 0, memlock_hard = 0;
  std::vector<std::string> infiniband_devices;  // /sys/class/infiniband: RDMA needs unlimited memlock
};

SystemInfo ReadSystemInfo();
std::vector<NetInterface> ReadInterfaces();

nlohmann::json ToJson(const SystemInfo& info);

}  // namespace dsd::probe
