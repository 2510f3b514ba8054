// NCCL as a Communicator: device buffers (cudaMalloc), ncclAllReduce on a CUDA stream. NCCL and the
// CUDA runtime are loaded with dlopen, so this is compiled everywhere and only runs where a GPU
// is; without one, creation fails with the CUDA runtime's own words. Rank 0's ncclUniqueId reaches
// the other ranks through a gloo::rendezvous::Store (the agents' key-value service).
#pragma once

#include <gloo/rendezvous/store.h>

#include <memory>

#include "probe/collective.h"

namespace dsd::probe {

Result<std::unique_ptr<Communicator>> CreateNcclCommunicator(int rank, int size, int device,
                                                             gloo::rendezvous::Store& store);

}  // namespace dsd::probe
