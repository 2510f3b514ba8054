// The all-reduce probe harness as a standalone program, run under mpirun so that the same ranks
// and sizes can be measured with two backends:
//   mpirun -np 4 --mca btl tcp,self allreduce_bench --backend mpi  --sizes 8-64M
//   mpirun -np 4 --mca btl tcp,self allreduce_bench --backend gloo --sizes 8-64M --store DIR [--busy-poll 0|1]
// MPI launches the ranks and gathers results in both cases; Gloo rendezvous through a FileStore.
// --busy-poll defaults to what the agents choose: on when every rank has a core of its own.
// Rank 0 prints the nccl-tests table.
#include <gloo/rendezvous/file_store.h>

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "probe/collective.h"
#include "probe/gloo_comm.h"
#include "probe/mpi_comm.h"
#include "probe/system.h"

int main(int argc, char** argv) {
  std::string backend = "gloo", sizes_text = "8-64M", store_dir = "/tmp/dsdoctor-allreduce-bench", bind = "127.0.0.1";
  int busy_poll = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--backend")
      backend = argv[i + 1];
    else if (flag == "--sizes")
      sizes_text = argv[i + 1];
    else if (flag == "--store")
      store_dir = argv[i + 1];
    else if (flag == "--bind")
      bind = argv[i + 1];
    else if (flag == "--busy-poll")
      busy_poll = std::atoi(argv[i + 1]);
  }
  auto sizes = dsd::probe::ParseSizes(sizes_text);
  if (!sizes.ok()) {
    std::fprintf(stderr, "%s\n", sizes.status().message().c_str());
    return 2;
  }
  if (auto s = dsd::probe::InitMpi(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 3;
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::unique_ptr<dsd::probe::Communicator> comm;
  std::unique_ptr<gloo::rendezvous::FileStore> store;
  if (backend == "mpi") {
    comm = std::move(dsd::probe::CreateMpiCommunicator()).value();
  } else {
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
    comm = std::move(c).value();
  }
  auto results = dsd::probe::RunAllReduceSweep(*comm, *sizes, {}, dsd::RealClock::Instance());
  if (!results.ok()) {
    std::fprintf(stderr, "%s\n", results.status().message().c_str());
    return 3;
  }
  std::vector<dsd::probe::SizeResult> rows;
  for (const auto& r : *results) {
    double t = r.time_us, tmax = 0;
    long w = r.wrong, wsum = 0;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&w, &wsum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    dsd::probe::SizeResult row;
    row.bytes = r.bytes;
    row.count = r.bytes / sizeof(float);
    row.time_us = tmax;
    row.wrong = wsum;
    dsd::probe::ComputeBandwidth(dsd::probe::CollectiveOp::kAllReduce, size, &row);
    rows.push_back(row);
  }
  if (rank == 0) {
    std::string mode = comm->mode().empty() ? "" : " (" + comm->mode() + ")";
    std::printf("# %s%s all-reduce, %d ranks\n%s", comm->backend().c_str(), mode.c_str(), size,
                dsd::probe::RenderBandwidthTable(rows).c_str());
  }
  comm.reset();
  dsd::probe::FinalizeMpi();
  return 0;
}
