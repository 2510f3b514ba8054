#include "agent/token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <set>

#include "common/file.h"
#include "common/log.h"
#include "common/strings.h"

namespace dsd::agent {

Result<std::string> GenerateToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("getrandom", errno);
    }
    got += static_cast<size_t>(n);
  }
  std::string hex;
  char buf[3];
  for (unsigned char b : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    hex += buf;
  }
  return hex;
}

Result<std::string> LoadTokenFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoError("token file " + path, errno);
  if (!S_ISREG(st.st_mode)) return InvalidArgument("token file " + path + " is not a regular file");
  if (st.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    return PermissionDenied("token file " + path + " has mode " + mode +
                            "; it must not be readable by group or others (chmod 600)");
  }
  DSD_ASSIGN_OR_RETURN(std::string content, ReadFile(path, 4096));
  std::string token(Trim(content));
  if (token.empty()) return InvalidArgument("token file " + path + " is empty");
  DSD_RETURN_IF_ERROR(CheckTokenStrength(token, "token file " + path));
  log::Get("agent")->debug("token loaded from {} ({} bytes)", path, token.size());
  return token;
}

Status CheckTokenStrength(std::string_view token, const std::string& where) {
  constexpr int kMinBits = 128;
  constexpr size_t kMinDistinct = 8;
  const bool hex =
      std::all_of(token.begin(), token.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  const size_t bits = token.size() * (hex ? 4 : 6);
  std::set<char> distinct(token.begin(), token.end());
  if (bits >= kMinBits && distinct.size() >= kMinDistinct) return Status::Ok();
  const std::string why = bits < kMinBits ? "holds about " + std::to_string(bits) + " bits"
                                          : "uses only " + std::to_string(distinct.size()) + " distinct characters";
  return InvalidArgument(where + ": the token " + why + "; a token that runs commands on every node needs at least " +
                         std::to_string(kMinBits) +
                         " random bits (16 bytes). Make one: head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > "
                         "token && chmod 600 token");
}

Status WriteTokenFile(const std::string& path, const std::string& token) {
  mode_t old = ::umask(077);
  Status s = WriteFileAtomic(path, token + "\n");
  ::umask(old);
  if (s.ok() && ::chmod(path.c_str(), 0600) != 0) return ErrnoError("chmod " + path, errno);
  return s;
}

bool TokensEqual(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  size_t n = a.size() > b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

Status AcceptHello(net::Link& link, wire::FrameDecoder& decoder, Duration timeout, const std::string& name) {
  auto hello = net::RecvFrame(link, decoder, timeout);
  if (!hello.ok()) return hello.status();
  if (hello->value("type", "") != "hello") {
    (void)net::SendFrame(link, {{"type", "error"}, {"code", "bad_request"}, {"message", "expected a hello frame"}});
    return InvalidArgument("first frame is not a hello");
  }
  return net::SendFrame(
      link, {{"type", "welcome"}, {"name", name}, {"pid", ::getpid()}, {"protocol", wire::kProtocolVersion}});
}

}  // namespace dsd::agent
