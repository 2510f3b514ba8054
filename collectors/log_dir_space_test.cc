#include "collectors/log_dir_space.h"

#include <gtest/gtest.h>

namespace dsd::collectors {
namespace {

constexpr const char* kMountinfo =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "30 22 0:26 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw,size=1024k\n"
    "31 22 0:27 / /scratch rw - nfs4 server:/export rw\n"
    "32 31 0:28 / /scratch/run\\040dir rw - tmpfs tmpfs rw\n"
    "33 22 0:29 / /tmpx rw - xfs /dev/sdb rw\n"
    "garbage line\n";

TEST(LogDirSpaceTest, MountIsTheLongestPathPrefix) {
  struct Case {
    const char* path;
    const char* mount;
    const char* type;
  } cases[] = {
      {"/home/u/logs", "/", "ext4"},
      {"/tmp/run1", "/tmp", "tmpfs"},
      {"/tmp", "/tmp", "tmpfs"},
      {"/tmpx/logs", "/tmpx", "xfs"},  // a prefix of characters is not a parent directory
      {"/scratch/logs", "/scratch", "nfs4"},
      {"/scratch/run dir/logs", "/scratch/run dir", "tmpfs"},  // mountinfo escapes the space as \040
  };
  for (const auto& c : cases) {
    std::string mount, type;
    MountOf(kMountinfo, c.path, &mount, &type);
    EXPECT_EQ(mount, c.mount) << c.path;
    EXPECT_EQ(type, c.type) << c.path;
  }
}

TEST(LogDirSpaceTest, ProbesARealDirectory) {
  auto s = ProbeLogDir(::testing::TempDir());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_GT(s->total_bytes, 0u);
  EXPECT_LE(s->free_bytes, s->total_bytes);
  EXPECT_FALSE(s->mount.empty());
  EXPECT_FALSE(s->fs_type.empty());
  EXPECT_FALSE(ProbeLogDir("/nonexistent/dsdoctor/dir").ok());
}

}  // namespace
}  // namespace dsd::collectors
