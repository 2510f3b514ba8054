#include "common/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace dsd {

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(path, errno);
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return ErrnoError(path, e);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return InvalidArgument(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  ::close(fd);
  return out;
}

Result<std::string> ReadFileRange(const std::string& path, uint64_t offset, size_t length) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(path, errno);
  std::string out(length, '\0');
  size_t got = 0;
  while (got < length) {
    ssize_t n = ::pread(fd, out.data() + got, length - got, static_cast<off_t>(offset + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return ErrnoError(path, e);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

namespace {

Status WriteAllTo(int fd, const std::string& what, std::string_view content) {
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what, errno);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status WriteFileAtomicWith(const std::string& path, const ContentWriter& write) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) return ErrnoError(path, errno);
    Status s = write([&](std::string_view part) { return WriteAllTo(fd, path, part); });
    ::close(fd);
    return s;
  }
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(tmp, errno);
  if (Status s = write([&](std::string_view part) { return WriteAllTo(fd, tmp, part); }); !s.ok()) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(tmp, e);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(path, e);
  }
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  if (dir.empty()) dir = "/";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, const std::string& content,
                       const std::function<void()>& after_partial_write) {
  return WriteFileAtomicWith(path, [&](const PartSink& emit) {
    if (!after_partial_write) return emit(content);
    size_t half = content.size() / 2;
    DSD_RETURN_IF_ERROR(emit(std::string_view(content).substr(0, half)));
    after_partial_write();
    return emit(std::string_view(content).substr(half));
  });
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

namespace {
// The umask before UsePrivateUmask changed it; -1 while unchanged.
std::atomic<int> g_user_umask{-1};
}  // namespace

void UsePrivateUmask(bool share_with_group) {
  mode_t before = ::umask(share_with_group ? 027 : 077);
  int expected = -1;
  g_user_umask.compare_exchange_strong(expected, static_cast<int>(before));
}

mode_t UserUmask() {
  int u = g_user_umask.load();
  if (u >= 0) return static_cast<mode_t>(u);
  mode_t now = ::umask(022);  // reading the umask means setting it: put it back at once
  ::umask(now);
  return now;
}

}  // namespace dsd
