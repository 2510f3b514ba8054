#include "coordinator/run_dir_mirror.h"

#include <fcntl.h>
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
// the bytes are. An earlier run's files of the adopted ranks are gone (never read as this run's),
// and a rank that never prints has an empty log.
TEST_F(RunDirMirrorTest, OutputIsAppendedByteForByteOverNothingStale) {
  const RunDir d(dir_);
  ASSERT_TRUE(WriteFileAtomic(d.RankLog(3), "an older run's output\n").ok());
  ASSERT_TRUE(WriteFileAtomic(d.RankTrace(3), "an older run's ring").ok());
  ASSERT_TRUE(WriteFileAtomic(d.RankStack(4), "# py-spy\nold").ok());
  ASSERT_TRUE(WriteFileAtomic(d.RankExit(9), "0\n").ok());
  // The earlier run's log is older than this run's run.id.
  const struct timespec long_ago[2] = {{1, 0}, {1, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, d.RankLog(3).c_str(), long_ago, 0), 0);
  ASSERT_TRUE(WriteFileAtomic(d.RunId(), "this-run\n").ok());
  RunDirMirror m(d, "coordinator");
  ASSERT_TRUE(m.Adopt({3, 4, 5}));
  EXPECT_FALSE(fs::exists(d.RankTrace(3)));
  EXPECT_FALSE(fs::exists(d.RankStack(4)));
  EXPECT_TRUE(fs::exists(d.RankExit(9))) << "not an adopted rank";
  EXPECT_EQ(*ReadFile(d.RankLog(5)), "") << "a silent rank still has its log";
  const std::string odd("caf\xc3\xa9 \xff\x00\x1b[2J\n", 12);
  m.AppendLog(3, "first line\n");
  m.AppendLog(4, "rank 4\n");
  m.AppendLog(3, odd);
  EXPECT_EQ(*ReadFile(RunDir(dir_).RankLog(3)), "first line\n" + odd);
  EXPECT_EQ(*ReadFile(RunDir(dir_).RankLog(4)), "rank 4\n");
  EXPECT_EQ(m.lost_log_bytes(), 0u);
  m.AppendLog(7, "not adopted");
  EXPECT_EQ(m.lost_log_bytes(), 11u) << "output of a rank never adopted is counted, not written";
  EXPECT_FALSE(fs::exists(d.RankLog(7)));
}

// A node that did not find run.id, but whose ranks' logs are here, made after run.id: the file system
// is shared after all (slow to show run.id to the node). Nothing is copied over the node's own files.
TEST_F(RunDirMirrorTest, LogsMadeSinceTheRunStartedMeanTheDirIsSharedAfterAll) {
  const RunDir d(dir_);
  ASSERT_TRUE(WriteFileAtomic(d.RunId(), "this-run\n").ok());
  const struct timespec long_ago[2] = {{1, 0}, {1, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, d.RunId().c_str(), long_ago, 0), 0);
  ASSERT_TRUE(WriteFileAtomic(d.RankLog(1), "written by the node's rank\n").ok());
  RunDirMirror m(d, "coordinator");
  EXPECT_FALSE(m.Adopt({0, 1}));
  EXPECT_EQ(*ReadFile(d.RankLog(1)), "written by the node's rank\n");
  EXPECT_FALSE(fs::exists(d.RankLog(0)));
  EXPECT_FALSE(m.Poll(1).has_value()) << "nothing copied, nothing to report";
}

// A file comes in pieces and appears whole with the last one, with the zeros it did not carry; a
// second file of the same kind (a later stack) replaces the first.
TEST_F(RunDirMirrorTest, FilesAppearWholeWithTheirLastPiece) {
  RunDirMirror m(RunDir(dir_), "coordinator");
  ASSERT_TRUE(m.Adopt({2}));
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
  // A Flight Recorder dump lands in its incident's folder, made for it.
  const std::string dump("\x80\x02}q\x00.", 6);
  for (const auto& p : agent::FileMessages(2, RankFile::kFlightRecorder, dump, 3)) m.Write(p);
  EXPECT_EQ(*ReadFile(RunDir(dir_).FlightRecorderDump(3, 2)), dump);
  EXPECT_EQ(RunDir(dir_).FlightRecorderDump(3, 2), dir_.string() + "/flight_recorder/incident-3/rank_2");
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
  EXPECT_TRUE(m.Adopt({1}));
  m.AppendLog(1, "12345");
  m.AppendLog(1, "678");
  EXPECT_EQ(m.lost_log_bytes(), 8u);
  auto status = m.Poll(1);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->node, "login-1 (coordinator)");
  ASSERT_EQ(status->write_errors.size(), 2u) << "one line for the failure, one for the count: not one per write";
  EXPECT_EQ(status->write_errors[0].rfind("rank-1.log: ", 0), 0u) << status->write_errors[0];
  EXPECT_EQ(status->write_errors[1], "8 B of the output of 1 not copied here (each node keeps its own rank-<r>.log)");
  EXPECT_FALSE(RunDirMirror(RunDir(dir_), "x").Poll(1).has_value()) << "nothing mirrored, nothing reported";
}

}  // namespace
}  // namespace dsd::coordinator
