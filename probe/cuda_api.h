// The slices of the CUDA runtime and NCCL C APIs that dsdoctor calls, bound with dlopen/dlsym so
// the code is compiled everywhere and only runs where a GPU is (probe/nccl_comm.cc's bandwidth
// probe, runtime/nccl_backend.cc's training backend). ABI constants are copied from nccl.h and
// driver_types.h. Values are plain tables of function pointers plus the owning library handle:
// movable, not copyable; calls follow CUDA's and NCCL's own thread-safety rules.
#pragma once

#include <gloo/rendezvous/store.h>

#include <string>

#include "common/status.h"
#include "probe/dynlib.h"

namespace dsd::probe {

// ncclDataType_t / ncclRedOp_t values.
inline constexpr int kNcclUint8 = 1;
inline constexpr int kNcclInt32 = 2;
inline constexpr int kNcclInt64 = 4;
inline constexpr int kNcclFloat16 = 6;
inline constexpr int kNcclFloat32 = 7;
inline constexpr int kNcclSum = 0;
inline constexpr int kNcclMax = 2;
inline constexpr int kNcclMin = 3;
inline constexpr int kCudaMemcpyHostToDevice = 1;
inline constexpr int kCudaMemcpyDeviceToHost = 2;

struct NcclUniqueId {
  char internal[128];
};
using ncclComm_t = void*;
using cudaStream_t = void*;

struct CudaApi {
  DynamicLibrary lib;
  int (*SetDevice)(int);
  int (*Malloc)(void**, size_t);
  int (*Free)(void*);
  int (*Memcpy)(void*, const void*, size_t, int);
  int (*StreamCreate)(cudaStream_t*);
  int (*StreamSynchronize)(cudaStream_t);
  int (*StreamDestroy)(cudaStream_t);
  const char* (*GetErrorString)(int);

  Status Check(int rc, const char* what) const {
    return rc == 0 ? Status::Ok() : Unavailable(std::string(what) + ": " + GetErrorString(rc));
  }
};

struct NcclApi {
  DynamicLibrary lib;
  int (*GetUniqueId)(NcclUniqueId*);
  int (*CommInitRank)(ncclComm_t*, int, NcclUniqueId, int);
  int (*AllReduce)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t);
  int (*Broadcast)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t);
  int (*AllGather)(const void*, void*, size_t, int, ncclComm_t, cudaStream_t);
  // Point-to-point exists from NCCL 2.7; null on older libraries.
  int (*Send)(const void*, size_t, int, int, ncclComm_t, cudaStream_t);
  int (*Recv)(void*, size_t, int, int, ncclComm_t, cudaStream_t);
  int (*CommDestroy)(ncclComm_t);
  const char* (*GetErrorString)(int);

  Status Check(int rc, const char* what) const {
    return rc == 0 ? Status::Ok() : Unavailable(std::string(what) + ": " + GetErrorString(rc));
  }
};

Result<CudaApi> LoadCuda();
Result<NcclApi> LoadNccl();

// Rank 0 creates the communicator's id and publishes it under `key`; the others wait for it.
// Store failures (gloo throws) become Status.
Result<NcclUniqueId> ExchangeNcclId(int rank, const NcclApi& nccl, gloo::rendezvous::Store& store,
                                    const std::string& key);

}  // namespace dsd::probe
