#include "runtime/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "common/file.h"

namespace dsd::runtime {
namespace {

TEST(CheckpointFormatTest, RoundTripAndEveryCorruptionIsNamed) {
  Shard s;
  s.meta = {{"rank", 1}, {"client_state", {{"step", 5}}}};
  s.arrays = {{"params", {1.5f, -2, 3}}, {"optimizer.exp_avg", {0.25f}}};
  std::string bytes = EncodeShard(s);
  auto back = DecodeShard(bytes, "x.ckpt");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->meta["client_state"]["step"], 5);
  ASSERT_NE(back->Find("params"), nullptr);
  EXPECT_EQ(*back->Find("params"), (std::vector<float>{1.5f, -2, 3}));
  EXPECT_EQ(back->Find("nope"), nullptr);

  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  EXPECT_EQ(DecodeShard(flipped, "x.ckpt").status().message(),
            "checkpoint x.ckpt: checksum mismatch (torn or corrupted file)");
  EXPECT_EQ(DecodeShard(bytes.substr(0, bytes.size() / 2), "x.ckpt").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeShard("DSDCKPT0" + bytes.substr(8), "x.ckpt").status().message(),
            "checkpoint x.ckpt: bad magic (not a dsdoctor checkpoint shard)");
  EXPECT_EQ(DecodeShard("short", "x.ckpt").status().message(), "checkpoint x.ckpt: truncated (5 bytes)");
}

TEST(CheckpointFormatTest, TagsAreSafeDirectoryNames) {
  EXPECT_TRUE(ValidateTag("global_step10").ok());
  EXPECT_TRUE(ValidateTag("v1.2-rc").ok());
  EXPECT_FALSE(ValidateTag("..").ok());
  EXPECT_FALSE(ValidateTag("a/b").ok());
  EXPECT_FALSE(ValidateTag("").ok());
}

TEST(CheckpointFileTest, LatestNamesTheTag) {
  char tmpl[] = "/tmp/dsdckpt-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  EXPECT_EQ(ReadLatest(dir).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteLatest(dir, "step3").ok());
  EXPECT_EQ(*ReadLatest(dir), "step3");
  Shard s;
  s.arrays = {{"params", {1, 2}}};
  std::string path = ShardPath(dir, "step3", 0, 2);
  EXPECT_EQ(path, dir + "/step3/rank-0-of-2.ckpt");
  ASSERT_TRUE(WriteShard(path, s).ok());
  auto r = ReadShard(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r->Find("params"), (std::vector<float>{1, 2}));
  EXPECT_EQ(ReadShard(dir + "/nope.ckpt").status().code(), StatusCode::kNotFound);
  std::system(("rm -rf " + dir).c_str());
}

// A rank killed mid-save leaves its temp shard; the next save of that shard removes it, but never
// the temp file of a writer that still runs.
TEST(CheckpointFileTest, StaleTempShardsAreRemovedOnTheNextSave) {
  char tmpl[] = "/tmp/dsdckpt-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string path = ShardPath(dir, "step4", 1, 2);
  Shard s;
  s.arrays = {{"params", {3}}};
  ASSERT_TRUE(WriteShard(path, s).ok());
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);  // a pid that no longer runs
  std::string stale = path + ".tmp." + std::to_string(dead);
  std::string live = path + ".tmp." + std::to_string(::getppid());  // our parent runs
  ASSERT_TRUE(WriteFileAtomic(stale, "half a shard").ok());
  ASSERT_TRUE(WriteFileAtomic(live, "being written").ok());
  ASSERT_TRUE(WriteShard(path, s).ok());
  EXPECT_FALSE(FileExists(stale));
  EXPECT_TRUE(FileExists(live));
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace dsd::runtime
