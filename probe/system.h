// This node's host facts: identity, CPUs, memory, network interfaces, /dev/shm, memlock.
// ReadSystemInfo touches the real system (uname, /proc, getifaddrs, statvfs, getrlimit); the
// structs are plain values so reports can be built and tested from fakes.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

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
  // CPUs this process can keep busy: those its affinity mask allows (taskset, a cpuset), fewer when
  // a cgroup CPU quota allows less (Kubernetes CPU limits, Slurm, docker --cpus): the whole CPUs of
  // the quota, at least 1.
  int cpus = 0;
  double cpu_quota = 0;  // the cgroup quota in CPUs (2.5: 250 ms per 100 ms); 0 when there is none
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

// The CPU quota of this process's cgroups, in CPUs: cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` /
// `cpu.cfs_period_us`, the lowest on the path from its cgroup up to the hierarchy's mount; 0 when no
// level sets one. From the texts of /proc/self/cgroup and /proc/self/mountinfo; `read` returns a
// file's contents (ReadFile).
double CgroupCpuQuota(std::string_view self_cgroup, std::string_view mountinfo,
                      const std::function<Result<std::string>(const std::string&)>& read);
std::vector<NetInterface> ReadInterfaces();

nlohmann::json ToJson(const SystemInfo& info);

}  // namespace dsd::probe
