#include <cstring>

#include "common/log.h"
#include "probe/cuda_api.h"
#include "runtime/backends.h"

namespace dsd::runtime {
namespace {

using probe::CudaApi;
using probe::NcclApi;

int NcclType(DType t) {
  switch (t) {
    case DType::kFloat32: return probe::kNcclFloat32;
    case DType::kFloat16: return probe::kNcclFloat16;
    case DType::kInt32: return probe::kNcclInt32;
    case DType::kInt64: return probe::kNcclInt64;
    default: return probe::kNcclUint8;
  }
}

int NcclOp(ReduceOp o) {
  switch (o) {
    case ReduceOp::kMax: return probe::kNcclMax;
    case ReduceOp::kMin: return probe::kNcclMin;
    default: return probe::kNcclSum;
  }
}

class NcclBackend final : public Backend {
 public:
  NcclBackend(CudaApi cuda, NcclApi nccl, int rank, int size)
      : cuda_(std::move(cuda)), nccl_(std::move(nccl)), rank_(rank), size_(size) {}
  ~NcclBackend() override {
    if (comm_) nccl_.CommDestroy(comm_);
    if (device_) cuda_.Free(device_);
    if (stream_) cuda_.StreamDestroy(stream_);
  }

  Status Init(int device, const probe::NcclUniqueId& id) {
    DSD_RETURN_IF_ERROR(cuda_.Check(cuda_.SetDevice(device), "cudaSetDevice"));
    DSD_RETURN_IF_ERROR(cuda_.Check(cuda_.StreamCreate(&stream_), "cudaStreamCreate"));
    return nccl_.Check(nccl_.CommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllReduce(void* data, size_t count, DType dtype, ReduceOp op) override {
    size_t bytes = count * DTypeSize(dtype);
    DSD_RETURN_IF_ERROR(ToDevice(data, bytes, bytes));
    DSD_RETURN_IF_ERROR(
        nccl_.Check(nccl_.AllReduce(device_, device_, count, NcclType(dtype), NcclOp(op), comm_, stream_), "ncclAllReduce"));
    return FromDevice(data, 0, bytes);
  }
  Status Broadcast(void* data, size_t count, DType dtype, int root) override {
    size_t bytes = count * DTypeSize(dtype);
    DSD_RETURN_IF_ERROR(ToDevice(data, bytes, bytes));
    DSD_RETURN_IF_ERROR(
        nccl_.Check(nccl_.Broadcast(device_, device_, count, NcclType(dtype), root, comm_, stream_), "ncclBroadcast"));
    return FromDevice(data, 0, bytes);
  }
  Status AllGather(const void* in, void* out, size_t count, DType dtype) override {
    size_t bytes = count * DTypeSize(dtype);
    size_t total = bytes * static_cast<size_t>(size_);
    DSD_RETURN_IF_ERROR(ToDevice(in, bytes, bytes + total));
    // Input at the front, output behind it: NCCL allows distinct or in-place-at-offset buffers.
    char* out_dev = static_cast<char*>(device_) + bytes;
    DSD_RETURN_IF_ERROR(nccl_.Check(nccl_.AllGather(device_, out_dev, count, NcclType(dtype), comm_, stream_),
                                    "ncclAllGather"));
    return FromDevice(out, bytes, total);
  }
  Status Barrier() override {
    float one = 1;
    return AllReduce(&one, 1, DType::kFloat32, ReduceOp::kSum);
  }
  Status Send(const void* data, size_t count, DType dtype, int peer, uint32_t) override {
    if (!nccl_.Send) return Unimplemented("ncclSend needs NCCL 2.7 or newer");
    size_t bytes = count * DTypeSize(dtype);
    DSD_RETURN_IF_ERROR(ToDevice(data, bytes, bytes));
    DSD_RETURN_IF_ERROR(nccl_.Check(nccl_.Send(device_, count, NcclType(dtype), peer, comm_, stream_), "ncclSend"));
    return cuda_.Check(cuda_.StreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  Status Recv(void* data, size_t count, DType dtype, int peer, uint32_t) override {
    if (!nccl_.Recv) return Unimplemented("ncclRecv needs NCCL 2.7 or newer");
    size_t bytes = count * DTypeSize(dtype);
    DSD_RETURN_IF_ERROR(Reserve(bytes));
    DSD_RETURN_IF_ERROR(nccl_.Check(nccl_.Recv(device_, count, NcclType(dtype), peer, comm_, stream_), "ncclRecv"));
    return FromDevice(data, 0, bytes);
  }

 private:
  Status Reserve(size_t bytes) {
    if (bytes <= capacity_) return Status::Ok();
    if (device_) cuda_.Free(device_);
    device_ = nullptr;
    capacity_ = 0;
    DSD_RETURN_IF_ERROR(cuda_.Check(cuda_.Malloc(&device_, bytes), "cudaMalloc"));
    capacity_ = bytes;
    return Status::Ok();
  }
  Status ToDevice(const void* host, size_t bytes, size_t reserve) {
    DSD_RETURN_IF_ERROR(Reserve(std::max(reserve, size_t{1})));
    return cuda_.Check(cuda_.Memcpy(device_, host, bytes, probe::kCudaMemcpyHostToDevice), "cudaMemcpy");
  }
  Status FromDevice(void* host, size_t offset, size_t bytes) {
    DSD_RETURN_IF_ERROR(cuda_.Check(cuda_.StreamSynchronize(stream_), "cudaStreamSynchronize"));
    return cuda_.Check(
        cuda_.Memcpy(host, static_cast<char*>(device_) + offset, bytes, probe::kCudaMemcpyDeviceToHost),
        "cudaMemcpy");
  }

  CudaApi cuda_;
  NcclApi nccl_;
  int rank_, size_;
  probe::ncclComm_t comm_ = nullptr;
  probe::cudaStream_t stream_ = nullptr;
  void* device_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace

Result<std::unique_ptr<Backend>> CreateNcclBackend(int rank, int size, int device, gloo::rendezvous::Store& store) {
  DSD_ASSIGN_OR_RETURN(CudaApi cuda, probe::LoadCuda());
  DSD_ASSIGN_OR_RETURN(NcclApi nccl, probe::LoadNccl());
  if (int rc = cuda.SetDevice(device); rc != 0) {
    return Unavailable("cudaSetDevice(" + std::to_string(device) + "): " + cuda.GetErrorString(rc));
  }
  DSD_ASSIGN_OR_RETURN(probe::NcclUniqueId id, probe::ExchangeNcclId(rank, nccl, store, "runtime_nccl_unique_id"));
  auto backend = std::make_unique<NcclBackend>(std::move(cuda), std::move(nccl), rank, size);
  DSD_RETURN_IF_ERROR(backend->Init(device, id));
  log::Get("runtime")->debug("nccl rank {}/{} on device {}", rank, size, device);
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace dsd::runtime
