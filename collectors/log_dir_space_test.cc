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

TEST(LogDirSpaceTest, MonitorReportsOnceASecondOrOnANewFailedWrite) {
  constexpr int64_t kSec = 1'000'000'000;
  LogDirMonitor m(::testing::TempDir(), "node-3");
  auto first = m.Poll(10 * kSec);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->node, "node-3");
  EXPECT_TRUE(first->write_errors.empty());
  EXPECT_FALSE(m.Poll(10 * kSec + kSec / 2).has_value());
  m.NoteWriteError("rank-0.exit: No space left on device");
  auto after_error = m.Poll(10 * kSec + kSec / 2 + 1);
  ASSERT_TRUE(after_error.has_value());
  EXPECT_EQ(after_error->write_errors, std::vector<std::string>{"rank-0.exit: No space left on device"});
  m.NoteWriteError("rank-0.exit: No space left on device");  // the same failure again is not news
  EXPECT_FALSE(m.Poll(11 * kSec).has_value());
  for (int i = 1; i <= 9; ++i) m.NoteWriteError("rank-" + std::to_string(i) + ".stack: No space left on device");
  auto many = m.Poll(11 * kSec + 1);
  ASSERT_TRUE(many.has_value());
  ASSERT_EQ(many->write_errors.size(), 8u);  // the newest 8
  EXPECT_EQ(many->write_errors.back(), "rank-9.stack: No space left on device");
  EXPECT_TRUE(m.Poll(13 * kSec).has_value());
}

}  // namespace
}  // namespace dsd::collectors
