// `dsdoctor analyze` of PyTorch Flight Recorder dumps at scale (goal: 4,096 rank dumps of 2,000 entries
// each in <= 5 s): one real dump (bench/make_fr_dump.py: a full ring of 2,000 entries with their Python
// frames) hard-linked as rank_0 … rank_<N-1> in a fresh folder, then LoadFlightRecorderDir over it,
// timed, with the process's peak memory. The files are in the page cache (just written): this times
// the parse, not a disk.
//
//   build/bin/fr_parse_bench DUMP [RANKS=4096]
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "collectors/flight_recorder.h"
#include "common/file.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DUMP [RANKS]\n", argv[0]);
    return 2;
  }
  const std::string dump = argv[1];
  const int ranks = argc > 2 ? std::atoi(argv[2]) : 4096;
  const fs::path dir = fs::temp_directory_path() / ("dsd-fr-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (int r = 0; r < ranks; ++r) fs::create_hard_link(dump, dir / ("rank_" + std::to_string(r)));
  const auto size = fs::file_size(dump);
  std::vector<std::string> warnings;
  const auto t0 = std::chrono::steady_clock::now();
  auto job = dsd::collectors::LoadFlightRecorderDir(dir.string(), &warnings);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fs::remove_all(dir);
  if (!job.ok()) {
    std::fprintf(stderr, "%s\n", job.status().ToString().c_str());
    return 1;
  }
  size_t records = 0;
  for (const auto& r : job->ranks) records += r.recent.size();
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  std::printf(
      "%d dumps of %.0f KiB (%.1f MiB in all): %.2f s, %.0f MiB/s, %.2f ms per dump; %zu records kept; "
      "peak RSS %.0f MiB; %zu warnings\n",
      ranks, size / 1024.0, ranks * size / 1048576.0, s, ranks * size / 1048576.0 / s, s * 1e3 / ranks, records,
      ru.ru_maxrss / 1024.0, warnings.size());
  return 0;
}
