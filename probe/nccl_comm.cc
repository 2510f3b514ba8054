#include "probe/nccl_comm.h"

#include <cstring>
#include <exception>

#include "common/log.h"
#include "probe/cuda_api.h"
#include "probe/dynlib.h"
#include "probe/gpu.h"
#include "probe/nccl.h"

namespace dsd::probe {
namespace {

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(CudaApi cuda, NcclApi nccl, int rank, int size)
      : cuda_(std::move(cuda)), nccl_(std::move(nccl)), rank_(rank), size_(size) {}
  ~NcclCommunicator() override {
    if (comm_) nccl_.CommDestroy(comm_);
    if (buffer_) cuda_.Free(buffer_);
    if (stream_) cuda_.StreamDestroy(stream_);
  }

  Status Init(int device, const NcclUniqueId& id) {
    DSD_RETURN_IF_ERROR(Cuda(cuda_.SetDevice(device), "cudaSetDevice"));
    DSD_RETURN_IF_ERROR(Cuda(cuda_.StreamCreate(&stream_), "cudaStreamCreate"));
    return Nccl(nccl_.CommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  Status Prepare(size_t max_count) override {
    if (buffer_) cuda_.Free(buffer_);
    buffer_ = nullptr;
    capacity_ = max_count;
    return Cuda(cuda_.Malloc(reinterpret_cast<void**>(&buffer_), std::max<size_t>(max_count, 1) * sizeof(float)),
                "cudaMalloc");
  }
  Status Upload(const std::vector<float>& host, size_t count) override {
    if (count > capacity_ || count > host.size()) return Internal("upload larger than the prepared buffer");
    return Cuda(cuda_.Memcpy(buffer_, host.data(), count * sizeof(float), kCudaMemcpyHostToDevice), "cudaMemcpy");
  }
  Status Download(std::vector<float>* host, size_t count) override {
    host->resize(count);
    return Cuda(cuda_.Memcpy(host->data(), buffer_, count * sizeof(float), kCudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  Status AllReduceSum(size_t count) override {
    DSD_RETURN_IF_ERROR(
        Nccl(nccl_.AllReduce(buffer_, buffer_, count, kNcclFloat32, kNcclSum, comm_, stream_), "ncclAllReduce"));
    return Cuda(cuda_.StreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  Status Barrier() override {
    // A one-element all-reduce on the same stream orders every rank.
    if (!buffer_) DSD_RETURN_IF_ERROR(Prepare(1));
    return AllReduceSum(1);
  }

 private:
  Status Cuda(int rc, const char* what) { return cuda_.Check(rc, what); }
  Status Nccl(int rc, const char* what) { return nccl_.Check(rc, what); }

  CudaApi cuda_;
  NcclApi nccl_;
  int rank_, size_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* buffer_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace

Result<std::unique_ptr<Communicator>> CreateNcclCommunicator(int rank, int size, int device,
                                                             gloo::rendezvous::Store& store) {
  DSD_ASSIGN_OR_RETURN(CudaApi cuda, LoadCuda());
  DSD_ASSIGN_OR_RETURN(NcclApi nccl, LoadNccl());
  // Fail early and plainly on machines without a GPU, before any rank waits for rank 0's id.
  if (int rc = cuda.SetDevice(device); rc != 0) {
    return Unavailable("cudaSetDevice(" + std::to_string(device) + "): " + cuda.GetErrorString(rc));
  }
  DSD_ASSIGN_OR_RETURN(NcclUniqueId id, ExchangeNcclId(rank, nccl, store, "nccl_unique_id"));
  auto comm = std::make_unique<NcclCommunicator>(std::move(cuda), std::move(nccl), rank, size);
  DSD_RETURN_IF_ERROR(comm->Init(device, id));
  log::Get("probe")->debug("NCCL rank {}/{} on device {}", rank, size, device);
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace dsd::probe
