// libFuzzer target for `analyze DIR` (collectors/run_dir.cc LoadRunDir, then the engine): a run
// dir holds files ranks and a killed coordinator may have left in any state. The input is split
// into files: each part starts with one byte naming the file (rank-0.log, rank-1.trace, run.json,
// …) and ends at the next 0xFF byte. Any content must give a JobState and findings, or an error
// naming the file.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "collectors/run_dir.h"
#include "diagnosis/engine.h"

namespace {
const char* const kNames[] = {"run.json",     "rank-0.log",   "rank-1.log",   "rank-0.exit",  "rank-1.exit",
                              "rank-0.stack", "rank-1.stack", "rank-0.trace", "rank-1.trace", "rank-7.log"};
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/dsd_run_dir_fuzz_XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    return std::string(d ? d : "/tmp/dsd_run_dir_fuzz");
  }();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) std::filesystem::remove(e.path(), ec);
  size_t pos = 0;
  while (pos < size) {
    const char* name = kNames[data[pos] % (sizeof kNames / sizeof kNames[0])];
    size_t end = pos + 1;
    while (end < size && data[end] != 0xFF) ++end;
    std::ofstream(dir + "/" + name, std::ios::binary | std::ios::app)
        .write(reinterpret_cast<const char*>(data + pos + 1), static_cast<std::streamsize>(end - pos - 1));
    pos = end + 1;
  }
  std::vector<std::string> warnings;
  auto job = dsd::collectors::LoadRunDir(dir, {}, &warnings);
  if (job.ok()) (void)dsd::diagnosis::Diagnose(*job);
  return 0;
}
