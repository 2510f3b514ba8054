// Time from the last rank blocking to the finding (goal <= 2 s): runs `dsdoctor run` on the
// rank-0-only save_checkpoint example (2 nodes x 2 slots) N times, notes when the
// COLLECTIVE_MISMATCH line reaches our pipe (CLOCK_REALTIME), and subtracts the newest in-flight
// start among the ranks' traces as run.json recorded them (the moment the last rank blocked).
//   hang_detect_bench [DSDOCTOR_BIN] [EXAMPLES_DIR] [runs]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/run_files.h"
#include "runtime/trace.h"

int main(int argc, char** argv) {
  std::string bin = argc > 1 ? argv[1] : DSDOCTOR_BIN;
  std::string examples = argc > 2 ? argv[2] : EXAMPLES_DIR;
  int runs = argc > 3 ? std::atoi(argv[3]) : 5;
  std::vector<double> latencies;
  for (int i = 0; i < runs; ++i) {
    std::string dir = std::filesystem::temp_directory_path() /
                      ("dsd-hang-bench-" + std::to_string(::getpid()) + "-" + std::to_string(i));
    std::filesystem::remove_all(dir);
    std::string cmd = bin + " run --local 2 --slots 2 --quiet --timeout 60 --log-dir " + dir + " -- " + examples +
                      "/rank0_only_checkpoint 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return 3;
    char line[4096];
    int64_t seen_ns = 0;
    while (std::fgets(line, sizeof line, p)) {
      if (!seen_ns && std::string(line).find("COLLECTIVE_MISMATCH") != std::string::npos)
        seen_ns = dsd::runtime::TraceNowNs();
    }
    ::pclose(p);
    auto text = dsd::ReadFile(dsd::RunDir(dir).Manifest());
    if (!text.ok() || !seen_ns) {
      std::fprintf(stderr, "run %d: no finding or no run.json\n", i);
      return 1;
    }
    auto j = nlohmann::json::parse(*text);
    int64_t last_block = 0;
    for (const auto& r : j["ranks"])
      if (r.contains("in_flight"))
        last_block = std::max<int64_t>(last_block, r["in_flight"]["started_ns"].get<int64_t>());
    double s = (seen_ns - last_block) / 1e9;
    latencies.push_back(s);
    std::printf("run %d: last rank blocked -> finding printed: %.3f s\n", i, s);
    std::filesystem::remove_all(dir);
  }
  std::sort(latencies.begin(), latencies.end());
  std::printf("median %.3f s, max %.3f s over %zu runs (goal <= 2 s)\n", latencies[latencies.size() / 2],
              latencies.back(), latencies.size());
  return latencies.back() <= 2.0 ? 0 : 1;
}
