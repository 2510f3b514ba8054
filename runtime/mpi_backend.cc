#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "common/log.h"
#include "probe/mpi_comm.h"
#include "runtime/backends.h"

namespace dsd::runtime {
namespace {

using probe::MpiErrorString;

MPI_Datatype MpiType(DType t) {
  switch (t) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat16: return MPI_UINT16_T;  // reduced by the user ops below
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kUint8: return MPI_UINT8_T;
    default: break;  // the runtime never sends the Python tracer's types
  }
  return MPI_BYTE;
}

MPI_Op MpiOp(ReduceOp o) {
  switch (o) {
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
    default: return MPI_SUM;
  }
}

template <ReduceOp kOp>
void HalfOp(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceInto(inout, in, static_cast<size_t>(*len), DType::kFloat16, kOp);
}

class MpiBackend final : public Backend {
 public:
  MpiBackend(int rank, int size) : rank_(rank), size_(size) {
    MPI_Op_create(&HalfOp<ReduceOp::kSum>, 1, &half_ops_[0]);
    MPI_Op_create(&HalfOp<ReduceOp::kMax>, 1, &half_ops_[1]);
    MPI_Op_create(&HalfOp<ReduceOp::kMin>, 1, &half_ops_[2]);
  }
  ~MpiBackend() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      for (auto& op : half_ops_) MPI_Op_free(&op);
    }
  }
  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllReduce(void* data, size_t count, DType dtype, ReduceOp op) override {
    MPI_Op mop = dtype == DType::kFloat16 ? half_ops_[op == ReduceOp::kMax ? 1 : op == ReduceOp::kMin ? 2 : 0] : MpiOp(op);
    return Check(MPI_Allreduce(MPI_IN_PLACE, data, Count(count), MpiType(dtype), mop, MPI_COMM_WORLD), "MPI_Allreduce");
  }
  Status Broadcast(void* data, size_t count, DType dtype, int root) override {
    return Check(MPI_Bcast(data, Count(count), MpiType(dtype), root, MPI_COMM_WORLD), "MPI_Bcast");
  }
  Status AllGather(const void* in, void* out, size_t count, DType dtype) override {
    return Check(MPI_Allgather(in, Count(count), MpiType(dtype), out, Count(count), MpiType(dtype), MPI_COMM_WORLD),
                 "MPI_Allgather");
  }
  Status Barrier() override { return Check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  Status Send(const void* data, size_t count, DType dtype, int peer, uint32_t tag) override {
    return Check(MPI_Send(data, Count(count), MpiType(dtype), peer, static_cast<int>(tag & 0x7fff), MPI_COMM_WORLD),
                 "MPI_Send");
  }
  Status Recv(void* data, size_t count, DType dtype, int peer, uint32_t tag) override {
    return Check(MPI_Recv(data, Count(count), MpiType(dtype), peer, static_cast<int>(tag & 0x7fff), MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE),
                 "MPI_Recv");
  }

 private:
  static int Count(size_t n) { return static_cast<int>(n); }
  static Status Check(int rc, const char* what) {
    return rc == MPI_SUCCESS ? Status::Ok() : Unavailable(std::string(what) + ": " + MpiErrorString(rc));
  }
  int rank_, size_;
  MPI_Op half_ops_[3];
};

}  // namespace

Result<std::unique_ptr<Backend>> CreateMpiBackend() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return Internal("MPI is not initialised");
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  log::Get("runtime")->debug("mpi rank {}/{}", rank, size);
  return std::unique_ptr<Backend>(new MpiBackend(rank, size));
}

}  // namespace dsd::runtime
