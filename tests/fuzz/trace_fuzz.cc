// libFuzzer target for the trace ring reader (runtime/trace.cc ReadTrace): a rank writes its trace,
// so whatever a corrupt or hostile ring holds must give a snapshot or an error, never a crash or an
// out-of-bounds read. The input is written to a file, which ReadTrace maps as it maps real rings.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/trace.h"

namespace {
const std::string& Path() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/dsd_trace_fuzz_XXXXXX";
    int fd = ::mkstemp(tmpl);
    if (fd >= 0) ::close(fd);
    return std::string(tmpl);
  }();
  return path;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Most inputs are shorter than a header; start from a valid empty ring's header so the fuzzer
  // reaches the records: the first byte chooses between raw bytes and a patched valid ring.
  std::string bytes;
  if (size > 0 && data[0] & 1) {
    static const std::string valid = [] {
      std::string p = Path() + ".valid";
      auto w = dsd::runtime::TraceWriter::Create(p, {0, 2, 0, "fuzz", "gloo"}, 8);
      std::string out;
      if (w.ok()) {
        (*w).reset();
        int fd = ::open(p.c_str(), O_RDONLY);
        char buf[65536];
        ssize_t n;
        while (fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
        if (fd >= 0) ::close(fd);
        ::unlink(p.c_str());
      }
      return out;
    }();
    bytes = valid;
    // The rest of the input overwrites the ring from an offset the second byte picks.
    size_t at = size > 1 ? (static_cast<size_t>(data[1]) * 97) % (bytes.size() + 1) : 0;
    for (size_t i = 2; i < size && at < bytes.size(); ++i, ++at) bytes[at] = static_cast<char>(data[i]);
  } else {
    bytes.assign(reinterpret_cast<const char*>(data), size);
  }
  int fd = ::open(Path().c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0) return 0;
  ssize_t ignored = ::write(fd, bytes.data(), bytes.size());
  (void)ignored;
  ::close(fd);
  auto t = dsd::runtime::ReadTrace(Path());
  if (t.ok())
    for (const auto& r : t->records) (void)dsd::runtime::DescribeRecord(r);
  return 0;
}
