#include "probe/nccl.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "probe/system.h"

namespace dsd::probe {
namespace {

// CI sets DSDOCTOR_REQUIRE_NCCL=1 (NCCL ships with this machine's CUDA toolkit), so a missing
// NCCL fails there instead of skipping.
NcclInfo RealNcclOrSkip() {
  NcclInfo info = InspectNccl();
  if (!info.found) {
    if (std::getenv("DSDOCTOR_REQUIRE_NCCL")) ADD_FAILURE() << "NCCL required but not found: " << info.error;
  }
  return info;
}

TEST(NcclVersionTest, DecodesBothEncodings) {
  auto v = DecodeNcclVersion(22809);
  EXPECT_EQ(v.major, 2);
  EXPECT_EQ(v.minor, 28);
  EXPECT_EQ(v.patch, 9);
  EXPECT_EQ(v.ToString(), "2.28.9");
  auto old = DecodeNcclVersion(2708);  // 2.7.8 in the pre-2.9 encoding
  EXPECT_EQ(old.ToString(), "2.7.8");
}

TEST(NcclBootstrapLogTest, ParsesNewAndOldFormats) {
  NcclBootstrapInfo a;
  ParseNcclBootstrapLog("vm:1:1 [0] NCCL INFO ENV/Plugin: Could not find: libnccl-env.so\n"
                        "vm:1:1 [0] NCCL INFO Bootstrap: Using eth0:192.0.2.2<0>\n", &a);
  EXPECT_EQ(a.interface, "eth0");
  EXPECT_EQ(a.address, "192.0.2.2");
  EXPECT_EQ(a.log.size(), 2u);
  NcclBootstrapInfo b;
  ParseNcclBootstrapLog("host:2:2 [0] NCCL INFO Bootstrap : Using ib0:fd00::7<0>\n", &b);
  EXPECT_EQ(b.interface, "ib0");
  EXPECT_EQ(b.address, "fd00::7");
  NcclBootstrapInfo c;
  ParseNcclBootstrapLog("[2026-12-02 12:56:33] vm:2385:2385 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket "
                        "interface found\nvm:2385:2385 [0] NCCL INFO init.cc:126 -> 5\n", &c);
  EXPECT_TRUE(c.interface.empty());
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0], "Bootstrap : no socket interface found");
}

TEST(RealNcclTest, VersionMatchesTheLibrarysOwnAnswer) {
  NcclInfo info = RealNcclOrSkip();
  if (!info.found) GTEST_SKIP() << "no NCCL on this machine";
  ASSERT_TRUE(info.error.empty()) << info.error;
  // Ask the same file directly, without our loader.
  void* h = ::dlopen(info.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto get_version = reinterpret_cast<int (*)(int*)>(::dlsym(h, "ncclGetVersion"));
  ASSERT_NE(get_version, nullptr);
  int code = 0;
  ASSERT_EQ(get_version(&code), 0);
  EXPECT_EQ(info.version.code, code);
  EXPECT_EQ(info.version.major * 10000 + info.version.minor * 100 + info.version.patch, code);
  ::dlclose(h);
}

TEST(RealNcclTest, BootstrapPicksAnInterfaceThatExists) {
  NcclInfo info = RealNcclOrSkip();
  if (!info.found) GTEST_SKIP() << "no NCCL on this machine";
  auto b = ProbeNcclBootstrap(info.path, {{"NCCL_SOCKET_IFNAME", ""}});
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_TRUE(b.ok) << b.result_text;
  auto nics = ReadInterfaces();
  EXPECT_TRUE(std::any_of(nics.begin(), nics.end(), [&](const NetInterface& n) { return n.name == b.interface; }))
      << "NCCL picked '" << b.interface << "'";
  EXPECT_FALSE(b.address.empty());
}

TEST(RealNcclTest, BootstrapHonoursTheJobEnvironment) {
  NcclInfo info = RealNcclOrSkip();
  if (!info.found) GTEST_SKIP() << "no NCCL on this machine";
  auto lo = ProbeNcclBootstrap(info.path, {{"NCCL_SOCKET_IFNAME", "lo"}});
  EXPECT_TRUE(lo.ok);
  EXPECT_EQ(lo.interface, "lo");
  EXPECT_EQ(lo.address, "127.0.0.1");
}

TEST(RealNcclTest, MissingSocketInterfaceIsReportedWithNcclsWarning) {
  NcclInfo info = RealNcclOrSkip();
  if (!info.found) GTEST_SKIP() << "no NCCL on this machine";
  auto b = ProbeNcclBootstrap(info.path, {{"NCCL_SOCKET_IFNAME", "nosuch0"}});
  ASSERT_TRUE(b.ran);
  EXPECT_FALSE(b.ok);
  EXPECT_NE(b.result, 0);
  EXPECT_TRUE(b.interface.empty());
  EXPECT_TRUE(std::any_of(b.warnings.begin(), b.warnings.end(),
                          [](const std::string& w) { return w.find("no socket interface") != std::string::npos; }))
      << "warnings: " << b.warnings.size();
}

TEST(RealNcclTest, AKeptLibraryStaysLoadedAndTheOtherIsUnloaded) {
  auto loaded = [](const std::string& path) {
    void* h = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (h) ::dlclose(h);
    return h != nullptr;
  };
  NcclInfo info = RealNcclOrSkip();
  if (!info.found) GTEST_SKIP() << "no NCCL";
  EXPECT_FALSE(loaded(info.path)) << "InspectNccl without `keep` unloads it";
  DynamicLibrary kept;
  NcclInfo again = InspectNccl(NcclLibrarySearch(), &kept);
  ASSERT_TRUE(kept.loaded());
  EXPECT_EQ(kept.path(), again.path);
  EXPECT_TRUE(loaded(again.path));
  kept = DynamicLibrary();
  EXPECT_FALSE(loaded(again.path));
}

TEST(RealNcclTest, UnloadablePathIsAnErrorNotACrash) {
  auto b = ProbeNcclBootstrap("/nonexistent/libnccl.so.2", {});
  EXPECT_FALSE(b.ok);
  EXPECT_EQ(b.result, -1);
}

}  // namespace
}  // namespace dsd::probe
