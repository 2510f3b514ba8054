#include "probe/system.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

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
