#include "probe/mpi_comm.h"

// The C API only: OpenMPI's deprecated C++ bindings need a library we do not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdlib>

#include "common/log.h"

namespace dsd::probe {
std::string MpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

namespace {

std::string MpiError(int code) { return MpiErrorString(code); }

class MpiCommunicator final : public HostBufferCommunicator {
 public:
  MpiCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  Status AllReduceSum(size_t count) override {
    int rc = MPI_Allreduce(MPI_IN_PLACE, buffer_.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? Status::Ok() : Unavailable("MPI_Allreduce: " + MpiError(rc));
  }
  Status Barrier() override {
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? Status::Ok() : Unavailable("MPI_Barrier: " + MpiError(rc));
  }

 private:
  int rank_, size_;
};

}  // namespace

bool LaunchedByMpirun() { return std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMIX_RANK"); }

Status InitMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Status::Ok();
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) return Unavailable("MPI_Init_thread: " + MpiError(rc));
  // Errors come back as codes, so a failed collective is a Status instead of an abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  log::Get("probe")->debug("MPI initialised (thread level {})", provided);
  return Status::Ok();
}

void FinalizeMpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

Result<std::unique_ptr<Communicator>> CreateMpiCommunicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return Internal("MPI is not initialised");
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<Communicator>(new MpiCommunicator(rank, size));
}

}  // namespace dsd::probe
