// An unmodified MPI program for the PMPI tracer's tests (it knows nothing of dsdoctor): a training-
// like loop of blocking and non-blocking collectives, a ring exchange and a sub-communicator, and
// the faults a user meets, chosen by the first argument:
//   healthy            every rank runs `--iters` iterations and finalizes
//   count_mismatch     at iteration 3 the last rank all-reduces 2048 floats, the others 1024
//   skip_barrier       at iteration 3 the last rank skips the barrier and goes on to the next all-reduce
//   send_deadlock      at iteration 3 ranks 0 and 1 both MPI_Send 64 MiB to each other first
//   kill               at iteration 3 rank 1 is killed (SIGKILL) before its all-reduce
//   bcast_vs_allreduce at iteration 3 rank 0 calls MPI_Bcast while the others call MPI_Allreduce
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

void Exchange(MPI_Comm comm, int rank, int size) {
  std::vector<float> out(256, 1.0f), in(256);
  MPI_Request q[2];
  MPI_Irecv(in.data(), 256, MPI_FLOAT, (rank + size - 1) % size, 7, comm, &q[0]);
  MPI_Isend(out.data(), 256, MPI_FLOAT, (rank + 1) % size, 7, comm, &q[1]);
  MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  std::string mode = argc > 1 ? argv[1] : "healthy";
  int iters = 6;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm half;  // even and odd ranks
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  const int last = size - 1;
  std::vector<float> grad(2048, 1.0f), sum(2048);  // room for the mismatched rank's 2048
  std::vector<int> meta(16, rank);
  for (int it = 1; it <= iters; ++it) {
    const bool fault = it == 3;
    if (fault && mode == "kill" && rank == 1) raise(SIGKILL);
    if (fault && mode == "send_deadlock" && rank < 2 && size >= 2) {
      std::vector<float> big(16 << 20), in(16 << 20);
      int peer = 1 - rank;
      MPI_Send(big.data(), static_cast<int>(big.size()), MPI_FLOAT, peer, 1, MPI_COMM_WORLD);
      MPI_Recv(in.data(), static_cast<int>(in.size()), MPI_FLOAT, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    int count = fault && mode == "count_mismatch" && rank == last ? 2048 : 1024;
    if (fault && mode == "bcast_vs_allreduce" && rank == 0)
      MPI_Bcast(grad.data(), 1024, MPI_FLOAT, 0, MPI_COMM_WORLD);
    else
      MPI_Allreduce(grad.data(), sum.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(meta.data(), 16, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Request q;
    MPI_Iallreduce(MPI_IN_PLACE, grad.data(), 64, MPI_FLOAT, MPI_MAX, half, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    if (size > 1) Exchange(MPI_COMM_WORLD, rank, size);
    if (!(fault && mode == "skip_barrier" && rank == last)) MPI_Barrier(MPI_COMM_WORLD);
    usleep(10000);
  }
  std::printf("rank %d done\n", rank);
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}
