// NCCL all-reduce on this machine's GPUs through dsdoctor's probe harness, one process per GPU
// (nccl-tests' all_reduce_perf layout): prints size, count, type, redop, time, algbw, busbw,
// #wrong and the average bus bandwidth. Usage: nccl_allreduce_bench [--gpus N] [--sizes 8-1G]
#include <gloo/rendezvous/file_store.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/strings.h"
#include "probe/collective.h"
#include "probe/gpu.h"
#include "probe/nccl_comm.h"

int main(int argc, char** argv) {
  int gpus = -1;
  std::string sizes_text = "8-1G";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--gpus") gpus = std::atoi(argv[i + 1]);
    else if (flag == "--sizes") sizes_text = argv[i + 1];
  }
  auto sizes = dsd::probe::ParseSizes(sizes_text);
  if (!sizes.ok()) {
    std::fprintf(stderr, "%s\n", sizes.status().message().c_str());
    return 2;
  }
  if (gpus < 0) {
    // Ask in a child: initialising CUDA here would be inherited badly by the forked ranks.
    int fds[2];
    if (::pipe(fds) != 0) return 3;
    if (::fork() == 0) {
      int n = dsd::probe::InspectCuda().device_count;
      ssize_t ignored = ::write(fds[1], &n, sizeof n);
      (void)ignored;
      ::_exit(0);
    }
    ::close(fds[1]);
    if (::read(fds[0], &gpus, sizeof gpus) != sizeof gpus) gpus = 0;
    ::wait(nullptr);
  }
  if (gpus <= 0) {
    std::fprintf(stderr, "no GPU found\n");
    return 1;
  }
  std::string dir = "/tmp/dsdoctor-nccl-bench-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::vector<int> pipes;
  for (int rank = 0; rank < gpus; ++rank) {
    int fds[2];
    if (::pipe(fds) != 0) return 3;
    if (::fork() == 0) {
      ::close(fds[0]);
      gloo::rendezvous::FileStore store(dir);
      auto comm = dsd::probe::CreateNcclCommunicator(rank, gpus, rank, store);
      std::string out;
      if (!comm.ok()) {
        out = "ERROR " + comm.status().message() + "\n";
      } else {
        auto r = dsd::probe::RunAllReduceSweep(**comm, *sizes, {}, dsd::RealClock::Instance());
        if (!r.ok()) out = "ERROR " + r.status().message() + "\n";
        else
          for (const auto& row : *r) {
            out += std::to_string(row.bytes) + " " + std::to_string(row.time_us) + " " + std::to_string(row.wrong) + "\n";
          }
      }
      ssize_t ignored = ::write(fds[1], out.data(), out.size());
      (void)ignored;
      ::_exit(comm.ok() ? 0 : 1);
    }
    ::close(fds[1]);
    pipes.push_back(fds[0]);
  }
  std::vector<std::vector<dsd::probe::RankSizeResult>> per_rank;
  int rc = 0;
  for (int fd : pipes) {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    std::vector<dsd::probe::RankSizeResult> rows;
    for (const auto& line : dsd::Split(text, '\n')) {
      if (line.empty()) continue;
      if (dsd::StartsWith(line, "ERROR")) {
        std::fprintf(stderr, "%s\n", line.c_str());
        rc = 1;
        continue;
      }
      auto f = dsd::SplitWhitespace(line);
      rows.push_back({std::stoul(f[0]), std::stod(f[1]), std::stol(f[2])});
    }
    per_rank.push_back(rows);
  }
  while (::wait(nullptr) > 0) {
  }
  std::filesystem::remove_all(dir);
  if (rc) return rc;
  std::printf("# nccl all-reduce, %d GPUs (one process each)\n%s", gpus,
              dsd::probe::RenderBandwidthTable(dsd::probe::CombineRanks(per_rank, gpus)).c_str());
  return 0;
}
