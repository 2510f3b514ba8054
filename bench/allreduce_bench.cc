// The all-reduce probe harness as a standalone program, run under mpirun so that the same ranks
// and sizes can be measured with two backends:
//   mpirun -np 4 --mca btl tcp,self allreduce_bench --backend mpi  --sizes 8-64M
//   mpirun -np 4 --mca btl tcp,self allreduce_bench --backend gloo --sizes 8-64M --store DIR [--busy-poll 0|1]
//   mpirun -np 4 --mca btl tcp,self allreduce_bench --backend both --sizes 8-64M --store DIR [--rounds 7]
// The last alternates the two on the same ranks size by size and prints their median times and ratio.
// --iters N and --budget BYTES change how many operations each size times (SweepOptions; `check`'s
// are the defaults).
// MPI launches the ranks and gathers results in both cases; Gloo rendezvous through a FileStore.
// --busy-poll defaults to what the agents choose: on when every rank has a core of its own.
// Rank 0 prints the nccl-tests table.
#include <gloo/rendezvous/file_store.h>

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "probe/collective.h"
#include "probe/gloo_comm.h"
#include "probe/mpi_comm.h"
#include "probe/system.h"

namespace {

// Prints `why` and the usage to stderr; returns `exit_code`.
int Usage(const std::string& why, int exit_code = 2) {
  std::fprintf(stderr,
               "allreduce_bench: %s\n"
               "usage: allreduce_bench [--backend gloo|mpi|both] [--sizes 8-64M] [--store DIR] [--bind HOST]\n"
               "                       [--busy-poll 0|1] [--iters N] [--budget BYTES] [--rounds N]\n",
               why.c_str());
  return exit_code;
}

// A rank that cannot go on ends the whole job: the others would wait for it in the next
// collective.
[[noreturn]] void Abort(const std::string& why) {
  std::fprintf(stderr, "allreduce_bench: %s\n", why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();  // MPI_Abort does not return
}

// The slowest rank's value, on rank 0.
double MaxOverRanks(double v) {
  double out = 0;
  MPI_Reduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  return out;
}
long SumOverRanks(long v) {
  long out = 0;
  MPI_Reduce(&v, &out, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  return out;
}

std::string Describe(const dsd::probe::Communicator& comm) {
  return comm.backend() + (comm.mode().empty() ? "" : " (" + comm.mode() + ")");
}

// One backend's sweep, as the nccl-tests table.
bool PrintTable(dsd::probe::Communicator& comm, const std::vector<size_t>& sizes,
                const dsd::probe::SweepOptions& sweep) {
  auto results = dsd::probe::RunAllReduceSweep(comm, sizes, sweep, dsd::RealClock::Instance());
  if (!results.ok()) Abort(comm.backend() + ": " + results.status().message());
  std::vector<dsd::probe::SizeResult> rows;
  for (const auto& r : *results) {
    dsd::probe::SizeResult row;
    row.bytes = r.bytes;
    row.count = r.bytes / sizeof(float);
    row.time_us = MaxOverRanks(r.time_us);
    row.wrong = SumOverRanks(r.wrong);
    dsd::probe::ComputeBandwidth(dsd::probe::CollectiveOp::kAllReduce, comm.size(), &row);
    rows.push_back(row);
  }
  if (comm.rank() == 0) {
    std::printf("# %s all-reduce, %d ranks\n%s", Describe(comm).c_str(), comm.size(),
                dsd::probe::RenderBandwidthTable(rows).c_str());
  }
  return true;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Both backends on the same ranks, alternating size by size and round by round (Gloo, MPI, Gloo,
// MPI, ...), so that a slow spell of a shared machine falls on both. Per size: the median over
// rounds of each backend's time (slowest rank) and the median of the rounds' ratios.
bool CompareBackends(dsd::probe::Communicator& gloo, dsd::probe::Communicator& mpi, const std::vector<size_t>& sizes,
                     const dsd::probe::SweepOptions& sweep, int rounds) {
  const size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  for (auto* comm : {&gloo, &mpi}) {
    if (auto s = comm->Prepare(max_bytes / sizeof(float)); !s.ok()) Abort(comm->backend() + ": " + s.message());
  }
  const auto pattern = dsd::probe::AllReducePattern(gloo.rank(), max_bytes);
  const bool root = gloo.rank() == 0;
  if (root) {
    std::printf("# %s vs %s all-reduce, %d ranks, median of %d alternating rounds\n", Describe(gloo).c_str(),
                Describe(mpi).c_str(), gloo.size(), rounds);
    std::printf("%10s %11s %11s %7s %15s\n", "size (B)", "gloo (us)", "mpi (us)", "ratio", "ratio min-max");
  }
  double worst = 0;
  long wrong = 0;
  for (size_t bytes : sizes) {
    std::vector<double> g, m, ratio;
    for (int r = 0; r < rounds; ++r) {
      double t[2];
      int i = 0;
      for (auto* comm : {&gloo, &mpi}) {
        auto res = dsd::probe::MeasureAllReduce(*comm, bytes, pattern, sweep, dsd::RealClock::Instance());
        if (!res.ok()) Abort(comm->backend() + ": " + res.status().message());
        t[i++] = MaxOverRanks(res->time_us);
        wrong += SumOverRanks(res->wrong);
      }
      g.push_back(t[0]);
      m.push_back(t[1]);
      ratio.push_back(root ? t[0] / t[1] : 0);
    }
    if (!root) continue;
    const double med = Median(ratio);
    worst = std::max(worst, med);
    std::printf("%10zu %11.1f %11.1f %7.2f %7.2f-%-7.2f\n", bytes, Median(g), Median(m), med,
                *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()));
  }
  if (root) std::printf("# worst ratio %.2f, %ld wrong elements\n", worst, wrong);
  std::fflush(stdout);
  return wrong == 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "gloo", sizes_text = "8-64M", store_dir = "/tmp/dsdoctor-allreduce-bench", bind = "127.0.0.1";
  int busy_poll = -1, rounds = 7;
  // What `check` runs unless --iters/--budget say otherwise: more operations per size average
  // out more of a shared machine's noise, for both backends alike.
  dsd::probe::SweepOptions sweep;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return Usage("the all-reduce probe under mpirun", 0);
    if (i + 1 >= argc) return Usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    auto positive = [&](long long* out) {
      char* end = nullptr;
      *out = std::strtoll(value.c_str(), &end, 10);
      return !value.empty() && *end == '\0' && *out > 0;
    };
    long long n = 0;
    if (flag == "--backend" && (value == "gloo" || value == "mpi" || value == "both")) {
      backend = value;
    } else if (flag == "--sizes") {
      sizes_text = value;
    } else if (flag == "--store") {
      store_dir = value;
    } else if (flag == "--bind") {
      bind = value;
    } else if (flag == "--busy-poll" && (value == "0" || value == "1")) {
      busy_poll = value == "1";
    } else if (flag == "--iters" && positive(&n) && n <= 1000000) {
      sweep.max_iters = static_cast<int>(n);
    } else if (flag == "--rounds" && positive(&n) && n <= 1000) {
      rounds = static_cast<int>(n);
    } else if (flag == "--budget") {
      auto bytes = dsd::probe::ParseSizes(value, 1);
      if (!bytes.ok() || bytes->size() != 1) return Usage("--budget " + value + ": not one size (e.g. 1G)");
      sweep.bytes_budget = bytes->front();
    } else if (flag == "--backend" || flag == "--busy-poll" || flag == "--iters" || flag == "--rounds") {
      return Usage(flag + " " + value + ": not a valid value");
    } else {
      return Usage("unknown flag " + flag);
    }
  }
  auto sizes = dsd::probe::ParseSizes(sizes_text);
  if (!sizes.ok()) return Usage("--sizes " + sizes_text + ": " + sizes.status().message());
  if (auto s = dsd::probe::InitMpi(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 3;
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::unique_ptr<gloo::rendezvous::FileStore> store;
  std::unique_ptr<dsd::probe::Communicator> gloo_comm, mpi_comm;
  if (backend != "gloo") mpi_comm = std::move(dsd::probe::CreateMpiCommunicator()).value();
  if (backend != "mpi") {
    struct stat st {};
    if (stat(store_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "allreduce_bench: --store %s: not a directory\n", store_dir.c_str());
      return 2;
    }
    store = std::make_unique<gloo::rendezvous::FileStore>(store_dir);
    dsd::probe::GlooProbeOptions gloo;
    // The agents' rule, with the CPU count their inventory reports (every rank is on this host).
    gloo.busy_poll =
        busy_poll >= 0 ? busy_poll == 1 : dsd::probe::GlooBusyPollFits(size, dsd::probe::ReadSystemInfo().cpus);
    auto c = dsd::probe::CreateGlooCommunicator(rank, size, *store, bind, std::chrono::seconds(60), gloo);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().message().c_str());
      return 3;
    }
    gloo_comm = std::move(c).value();
  }
  const bool ok = backend == "both" ? CompareBackends(*gloo_comm, *mpi_comm, *sizes, sweep, rounds)
                                    : PrintTable(gloo_comm ? *gloo_comm : *mpi_comm, *sizes, sweep);
  gloo_comm.reset();
  mpi_comm.reset();
  dsd::probe::FinalizeMpi();
  return ok ? 0 : 3;
}
