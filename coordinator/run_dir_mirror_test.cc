#include "coordinator/run_dir_mirror.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/file.h"

namespace dsd::coordinator {
namespace {

namespace fs = std::filesystem;

class RunDirMirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dsd_mirror_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    ::chmod(dir_.c_str(), 0700);
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

// A node's output arrives in pieces: the coordinator's copy holds every byte, in order, whatever
// the bytes are; a rank's first piece starts the file afresh (an older run's log is not kept).
TEST_F(RunDirMirrorTest, OutputIsAppendedByteForByte) {
  ASSERT_TRUE(WriteFileAtomic(RunDir(dir_).RankLog(3), "an older run's output\n").ok());
  RunDirMirror m(RunDir(dir_), "coordinator");
  const std::string odd("caf\xc3\xa9 \xff\x00\x1b[2J\n", 12);
  m.AppendLog(3, "first line\n");
  m.AppendLog(4, "rank 4\n");
  m.AppendLog(3, odd);
  EXPECT_EQ(*ReadFile(RunDir(dir_).RankLog(3)), "first line\n" + odd);
  EXPECT_EQ(*ReadFile(RunDir(dir_).RankLog(4)), "rank 4\n");
  EXPECT_EQ(m.lost_log_bytes(), 0u);
}

// A file comes in pieces and appears whole with the last one, with the zeros it did not carry; a
// second file of the same kind (a later stack) replaces the first.
TEST_F(RunDirMirrorTest, FilesAppearWholeWithTheirLastPiece) {
  RunDirMirror m(RunDir(dir_), "coordinator");
  std::string ring(4096 + 128 * 8, '\0');
  ring.replace(0, 8, "DSDTRACE");
  ring[4096 + 5] = 'r';
  auto pieces = agent::FileMessages(2, RankFile::kTrace, ring);
  ASSERT_EQ(pieces.size(), 1u);
  agent::FileMessage first = pieces[0], second = pieces[0];
  first.bytes.resize(100);
  first.end = false;
  second.offset = 100;
  second.bytes.erase(0, 100);
  m.Write(first);
  EXPECT_FALSE(fs::exists(RunDir(dir_).RankTrace(2))) << "not before its last piece";
  m.Write(second);
  EXPECT_EQ(*ReadFile(RunDir(dir_).RankTrace(2)), ring);
  for (const char* stack : {"# py-spy\nold\n", "# py-spy\nnew\n"})
    for (const auto& p : agent::FileMessages(2, RankFile::kStack, stack)) m.Write(p);
  EXPECT_EQ(*ReadFile(RunDir(dir_).RankStack(2)), "# py-spy\nnew\n");
  // A piece that does not follow the one before (a lost frame) drops that file, never a wrong one.
  agent::FileMessage stray{2, RankFile::kExit, 7, "1\n", true, 9};
  m.Write(stray);
  EXPECT_FALSE(fs::exists(RunDir(dir_).RankExit(2)));
}

// A run dir the coordinator cannot write into: the output is counted as lost and the failure is
// reported as a log dir error of the coordinator's node, never an exception or a crash.
TEST_F(RunDirMirrorTest, AWriteThatFailsIsCountedAndReported) {
  if (::geteuid() == 0) {
    // Root writes through mode bits: a file in the way of the log's name makes its open fail instead.
    fs::create_directories(RunDir(dir_).RankLog(1));
  } else {
    ::chmod(dir_.c_str(), 0500);
  }
  RunDirMirror m(RunDir(dir_), "login-1 (coordinator)");
  m.AppendLog(1, "12345");
  m.AppendLog(1, "678");
  EXPECT_EQ(m.lost_log_bytes(), 8u);
  auto status = m.Poll(1);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->node, "login-1 (coordinator)");
  ASSERT_EQ(status->write_errors.size(), 1u) << "one line per rank, not per write";
  EXPECT_EQ(status->write_errors[0].rfind("rank-1.log: ", 0), 0u) << status->write_errors[0];
  EXPECT_FALSE(RunDirMirror(RunDir(dir_), "x").Poll(1).has_value()) << "nothing mirrored, nothing reported";
}

}  // namespace
}  // namespace dsd::coordinator
