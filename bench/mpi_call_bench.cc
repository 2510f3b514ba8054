// The cost the PMPI tracer (libdsdoctor-pmpi.so) adds to an MPI call: an unmodified MPI program
// that times loops of calls; bench/pmpi_cost.sh runs it with and without the tracer preloaded.
//   MPI_Allreduce of 1 float on MPI_COMM_SELF   the call itself is ~100 ns, so the tracer's cost shows
//   MPI_Isend/MPI_Irecv/MPI_Waitall on SELF     a non-blocking call and its completion
//   MPI_Allreduce of 1 KiB on MPI_COMM_WORLD   the rate of a real small all-reduce loop
// Usage: mpi_call_bench [N] [world]: N calls per loop (the world loop makes N/10); "world" runs the
// world loop alone (bench/pmpi_cost.sh over TCP, where the SELF loops would say nothing new).
// Prints one line per loop: "name ns_per_call calls".
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

template <class F>
double NsPer(int n, F&& f) {
  for (int i = 0; i < n / 10; ++i) f();  // warm-up
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int n = argc > 1 ? std::atoi(argv[1]) : 200000;
  const bool world_only = argc > 2 && std::strcmp(argv[2], "world") == 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  float one = 1, out = 0;
  double self = 0, p2p = 0;
  if (!world_only) {
    self = NsPer(n, [&] { MPI_Allreduce(&one, &out, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF); });
    int a = 1, b = 0;
    p2p = NsPer(n, [&] {
      MPI_Request q[2];
      MPI_Irecv(&b, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &q[0]);
      MPI_Isend(&a, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &q[1]);
      MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    });
  }
  std::vector<float> g(256, 1.0f), s(256);
  MPI_Barrier(MPI_COMM_WORLD);
  double world = NsPer(n / 10, [&] { MPI_Allreduce(g.data(), s.data(), 256, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
  if (rank == 0) {
    if (!world_only) {
      std::printf("allreduce_1_float_self %.1f %d\n", self, n);
      std::printf("isend_irecv_waitall_self %.1f %d\n", p2p, n);  // 3 traced calls per iteration
    }
    std::printf("allreduce_1KiB_world %.1f %d\n", world, n / 10);
  }
  MPI_Finalize();
  return 0;
}
