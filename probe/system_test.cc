#include "probe/system.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <map>

namespace dsd::probe {
namespace {

TEST(SystemInfoTest, MatchesTheSystemCalls) {
  SystemInfo s = ReadSystemInfo();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_EQ(s.hostname, host);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (s.cpu_quota > 0)
    EXPECT_EQ(s.cpus, std::max(1, std::min(CPU_COUNT(&allowed), static_cast<int>(s.cpu_quota))));
  else
    EXPECT_EQ(s.cpus, CPU_COUNT(&allowed));
  EXPECT_LE(s.cpus, ::sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_GT(s.memory_total, 0u);
  EXPECT_LE(s.memory_available, s.memory_total);
  rlimit rl{};
  ::getrlimit(RLIMIT_MEMLOCK, &rl);
  EXPECT_EQ(s.memlock_soft, rl.rlim_cur == RLIM_INFINITY ? SystemInfo::kUnlimited : rl.rlim_cur);
  EXPECT_TRUE(s.shm_present);
  EXPECT_GT(s.shm_size, 0u);
}

// cgroup CPU quotas, one table entry per layout seen on real machines; the files are fakes.
struct QuotaCase {
  const char* name;
  const char* self_cgroup;
  const char* mountinfo;
  std::map<std::string, std::string> files;
  double want;
};

const char* kV2Mount = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
const char* kV1Mounts =
    "35 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:11 - cgroup cgroup rw,cpu,cpuacct\n"
    "36 30 0:31 / /sys/fs/cgroup/memory rw,nosuid shared:12 - cgroup cgroup rw,memory\n";

const QuotaCase kQuotaCases[] = {
    {"v2 Kubernetes limit of 2.5 CPUs",
     "0::/kubepods/burstable/pod1/c1\n",
     kV2Mount,
     {{"/sys/fs/cgroup/kubepods/burstable/pod1/c1/cpu.max", "250000 100000\n"},
      {"/sys/fs/cgroup/kubepods/burstable/pod1/cpu.max", "max 100000\n"}},
     2.5},
    {"v2 no limit anywhere",
     "0::/user.slice/session-1.scope\n",
     kV2Mount,
     {{"/sys/fs/cgroup/user.slice/session-1.scope/cpu.max", "max 100000\n"},
      {"/sys/fs/cgroup/user.slice/cpu.max", "max 100000\n"}},
     0},
    {"v2 a parent's limit is lower",
     "0::/slurm/uid_1/job_7/step_0\n",
     kV2Mount,
     {{"/sys/fs/cgroup/slurm/uid_1/job_7/step_0/cpu.max", "800000 100000"},
      {"/sys/fs/cgroup/slurm/uid_1/job_7/cpu.max", "400000 100000"}},
     4},
    {"v2 inside a container's cgroup namespace (its cgroup is the mount's root)",
     "0::/\n",
     kV2Mount,
     {{"/sys/fs/cgroup/cpu.max", "200000 100000\n"}},
     2},
    {"v1 docker --cpus=1.5",
     "4:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n",
     kV1Mounts,
     {{"/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n"},
      {"/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n"}},
     1.5},
    {"v1 unlimited",
     "4:cpu,cpuacct:/user.slice\n",
     kV1Mounts,
     {{"/sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.cfs_quota_us", "-1\n"},
      {"/sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.cfs_period_us", "100000\n"}},
     0},
    {"v1 container that sees the host's path but has its cgroup mounted as the root",
     "4:cpu,cpuacct:/docker/abc\n",
     "35 30 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n",
     {{"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "300000"},
      {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000"}},
     3},
    {"v1 mount root that only shares a name prefix with our cgroup (a sibling, not an ancestor)",
     "4:cpu,cpuacct:/docker/abcdef\n",
     "35 30 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n",
     {{"/sys/fs/cgroup/cpu,cpuacct/def/cpu.cfs_quota_us", "100000"},
      {"/sys/fs/cgroup/cpu,cpuacct/def/cpu.cfs_period_us", "100000"},
      {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "300000"},
      {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000"}},
     3},
    {"no cgroup files readable", "0::/a/b\n", kV2Mount, {}, 0},
    {"malformed files are ignored",
     "0::/a\n",
     kV2Mount,
     {{"/sys/fs/cgroup/a/cpu.max", "lots 100000"}, {"/sys/fs/cgroup/cpu.max", "100000 0"}},
     0},
};

class CgroupQuotaTest : public ::testing::TestWithParam<QuotaCase> {};

TEST_P(CgroupQuotaTest, ReadsTheLowestQuotaOnTheCgroupsPath) {
  const QuotaCase& c = GetParam();
  auto read = [&](const std::string& path) -> Result<std::string> {
    auto it = c.files.find(path);
    if (it == c.files.end()) return NotFound(path);
    return it->second;
  };
  EXPECT_DOUBLE_EQ(CgroupCpuQuota(c.self_cgroup, c.mountinfo, read), c.want) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Layouts, CgroupQuotaTest, ::testing::ValuesIn(kQuotaCases),
                         [](const auto& info) { return "Case" + std::to_string(info.index); });

TEST(SystemInfoTest, LoopbackIsListedWithItsAddress) {
  auto nics = ReadInterfaces();
  auto lo = std::find_if(nics.begin(), nics.end(), [](const NetInterface& n) { return n.name == "lo"; });
  ASSERT_NE(lo, nics.end());
  EXPECT_TRUE(lo->loopback);
  EXPECT_GT(lo->mtu, 0);
  EXPECT_TRUE(std::any_of(lo->addresses.begin(), lo->addresses.end(), [](const InterfaceAddress& a) {
    return a.family == "inet" && a.address == "127.0.0.1" && a.prefix == 8;
  }));
}

}  // namespace
}  // namespace dsd::probe
