// libFuzzer target for what `tui --replay` reads: an events.jsonl recording (tui/live.cc
// ReadEventFile) and every event applied to the view's state (tui/stream.cc StreamDecoder). A
// recording is a file anyone may hand us: errors name the line, never a crash.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tui/live.h"
#include "tui/stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    char tmpl[] = "/tmp/dsd_events_fuzz_XXXXXX";
    int fd = ::mkstemp(tmpl);
    if (fd >= 0) ::close(fd);
    return std::string(tmpl);
  }();
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0) return 0;
  ssize_t ignored = ::write(fd, data, size);
  (void)ignored;
  ::close(fd);
  std::vector<std::string> warnings;
  auto events = dsd::tui::ReadEventFile(path, &warnings);
  if (!events.ok()) return 0;
  dsd::tui::StreamDecoder decoder;
  for (const auto& e : *events) (void)decoder.Apply(e.event);
  (void)decoder.Keyframe();
  return 0;
}
