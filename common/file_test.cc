#include "common/file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/stat.h>

#include <filesystem>
#include <thread>

namespace dsd {
namespace {

TEST(FileTest, AtomicWriteThenRead) {
  auto dir = std::filesystem::temp_directory_path() / ("dsd_file_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "x.json").string();
  ASSERT_TRUE(WriteFileAtomic(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "two").ok());
  auto back = ReadFile(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "two");
  // No temp files left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  std::filesystem::remove_all(dir);
}

// Found the hard way: `check --json /dev/null` renamed a regular file over /dev/null.
TEST(FileTest, NonRegularFilesAreWrittenInPlaceNotReplaced) {
  auto dir = std::filesystem::temp_directory_path() / ("dsd_fifo_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string fifo = (dir / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] {
    auto r = ReadFile(fifo);
    if (r.ok()) got = *r;
  });
  ASSERT_TRUE(WriteFileAtomic(fifo, "through the pipe").ok());
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));  // still the FIFO, not a regular file renamed over it
  std::filesystem::remove_all(dir);
}

TEST(FileTest, ErrorsNameThePath) {
  auto r = ReadFile("/nonexistent/dsd/file");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/dsd/file"), std::string::npos);
}

TEST(FileTest, RefusesOversizedFiles) {
  auto r = ReadFile("/dev/zero", 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dsd
