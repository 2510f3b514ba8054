#include "probe/cuda_api.h"

#include <cstring>
#include <exception>

#include "probe/gpu.h"
#include "probe/nccl.h"

namespace dsd::probe {
namespace {

template <typename Fn>
Status Bind(const DynamicLibrary& lib, const char* name, Fn* out) {
  auto sym = lib.Symbol<Fn>(name);
  if (!sym.ok()) return sym.status();
  *out = *sym;
  return Status::Ok();
}

}  // namespace

Result<CudaApi> LoadCuda() {
  CudaApi api{};
  DSD_ASSIGN_OR_RETURN(api.lib, FindAndOpen(CudaRuntimeSearch()));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "cudaSetDevice", &api.SetDevice));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "cudaMalloc", &api.Malloc));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "cudaFree", &api.Free));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "cudaMemcpy", &api.Memcpy));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "cudaStreamCreate", &api.StreamCreate));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "cudaStreamSynchronize", &api.StreamSynchronize));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "cudaStreamDestroy", &api.StreamDestroy));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "cudaGetErrorString", &api.GetErrorString));
  return api;
}

Result<NcclApi> LoadNccl() {
  NcclApi api{};
  DSD_ASSIGN_OR_RETURN(api.lib, FindAndOpen(NcclLibrarySearch()));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "ncclGetUniqueId", &api.GetUniqueId));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "ncclCommInitRank", &api.CommInitRank));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "ncclAllReduce", &api.AllReduce));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "ncclBroadcast", &api.Broadcast));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "ncclAllGather", &api.AllGather));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "ncclCommDestroy", &api.CommDestroy));
  DSD_RETURN_IF_ERROR(Bind(api.lib, "ncclGetErrorString", &api.GetErrorString));
  if (!Bind(api.lib, "ncclSend", &api.Send).ok() || !Bind(api.lib, "ncclRecv", &api.Recv).ok()) {
    api.Send = nullptr;
    api.Recv = nullptr;
  }
  return api;
}

Result<NcclUniqueId> ExchangeNcclId(int rank, const NcclApi& nccl, gloo::rendezvous::Store& store,
                                    const std::string& key) {
  NcclUniqueId id{};
  try {
    if (rank == 0) {
      DSD_RETURN_IF_ERROR(nccl.Check(nccl.GetUniqueId(&id), "ncclGetUniqueId"));
      store.set(key, std::vector<char>(id.internal, id.internal + sizeof id.internal));
    } else {
      store.wait({key});
      auto bytes = store.get(key);
      if (bytes.size() != sizeof id.internal) return Corruption(key + " of the wrong size in the store");
      std::memcpy(id.internal, bytes.data(), sizeof id.internal);
    }
  } catch (const std::exception& e) {
    return Unavailable(std::string("NCCL id exchange: ") + e.what());
  }
  return id;
}

}  // namespace dsd::probe
