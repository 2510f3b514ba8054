#include "probe/gpu.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

namespace dsd::probe {
namespace {

TEST(CudaVersionTest, Formats) {
  EXPECT_EQ(FormatCudaVersion(13000), "13.0");
  EXPECT_EQ(FormatCudaVersion(12040), "12.4");
  EXPECT_EQ(FormatCudaVersion(0), "none");
}

// On a machine without a driver cudart must say so; on a GPU machine the driver must be seen.
TEST(RealCudaTest, DriverPresenceAgreesWithLibcuda) {
  CudaInfo c = InspectCuda();
  void* libcuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  EXPECT_EQ(c.driver_library_found, libcuda != nullptr);
  if (!c.runtime_found) GTEST_SKIP() << "no CUDA runtime: " << c.error;
  EXPECT_GT(c.runtime_version, 0);
  if (!libcuda) {
    EXPECT_TRUE(c.no_driver());
    EXPECT_NE(c.device_error, 0);
    EXPECT_EQ(c.device_count, 0);
  } else {
    EXPECT_FALSE(c.no_driver());
    ::dlclose(libcuda);
  }
}

TEST(RealNvmlTest, FoundExactlyWhenTheLibraryLoads) {
  NvmlInfo n = InspectNvml();
  void* h = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  EXPECT_EQ(n.found, h != nullptr);
  if (h) ::dlclose(h);
  auto j = ToJson(n);
  EXPECT_TRUE(j.contains("gpus"));
}

}  // namespace
}  // namespace dsd::probe
