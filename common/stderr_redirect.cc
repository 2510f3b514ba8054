#include "common/stderr_redirect.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dsd {

namespace {

uint64_t SizeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace

Result<std::unique_ptr<StderrToFile>> StderrToFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable(path + ": " + std::strerror(errno));
  const uint64_t start = SizeOf(path);
  std::fflush(stderr);
  int saved = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (saved < 0 || ::dup2(fd, 2) < 0) {
    int e = errno;
    if (saved >= 0) ::close(saved);
    ::close(fd);
    return Internal(std::string("cannot move standard error to ") + path + ": " + std::strerror(e));
  }
  ::close(fd);
  return std::unique_ptr<StderrToFile>(new StderrToFile(path, saved, start));
}

StderrToFile::~StderrToFile() {
  std::fflush(stderr);
  ::dup2(saved_, 2);
  ::close(saved_);
}

uint64_t StderrToFile::BytesWritten() const {
  uint64_t now = SizeOf(path_);
  return now > start_ ? now - start_ : 0;
}

}  // namespace dsd
