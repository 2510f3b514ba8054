#include "common/stderr_redirect.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/file.h"

namespace dsd {
namespace {

// fd 2 is a pipe here (standing for the terminal): what reaches it is what the screen would show.
TEST(StderrToFileTest, WhileItLivesEveryWriteToFd2AndAChildsGoesToTheFileThenFd2IsBack) {
  std::string dir = std::filesystem::temp_directory_path() / ("dsd-stderr-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_NONBLOCK), 0);
  std::fflush(stderr);
  int real = ::dup(2);
  ::dup2(pipe_fds[1], 2);
  uint64_t written = 0;
  {
    auto r = StderrToFile::Open(dir + "/dsdoctor.log");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::fprintf(stderr, "during the view\n");
    EXPECT_EQ(std::system("echo 'a child of ours' >&2"), 0);
    written = (*r)->BytesWritten();
  }
  std::fprintf(stderr, "after the view\n");
  std::fflush(stderr);
  ::dup2(real, 2);
  ::close(real);
  char buf[256] = {};
  ssize_t n = ::read(pipe_fds[0], buf, sizeof buf - 1);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "after the view\n");
  auto file = ReadFile(dir + "/dsdoctor.log");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file, "during the view\na child of ours\n");
  EXPECT_EQ(written, file->size());
  std::filesystem::remove_all(dir);
}

TEST(StderrToFileTest, AFileThatCannotBeMadeIsAnErrorAndFd2StaysAsItWas) {
  auto r = StderrToFile::Open("/nonexistent-dir/dsdoctor.log");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent-dir/dsdoctor.log"), std::string::npos);
  EXPECT_EQ(::fcntl(2, F_GETFD), ::fcntl(2, F_GETFD));  // still open
  EXPECT_GE(::fcntl(2, F_GETFD), 0);
}

}  // namespace
}  // namespace dsd
