// Constructors of the runtime's communication backends (runtime/comm.h).
// - Gloo over TCP (the CPU default): full mesh through a rendezvous store; ops time out after
//   `timeout` with gloo's own error ("Timed out waiting ... for recv", "Connection closed by peer").
// - MPI over MPI_COMM_WORLD: processes started by mpirun; probe::InitMpi first. float16 sums use a
//   user-defined MPI_Op over MPI_UINT16_T, since MPI has no half type.
// - NCCL on device buffers: NCCL and the CUDA runtime via dlopen (probe/cuda_api.h), host buffers
//   staged through one device buffer; compiled everywhere, and without a GPU creation fails with
//   the CUDA runtime's own message.
#pragma once

#include <gloo/rendezvous/store.h>

#include <memory>
#include <string>

#include "common/clock.h"
#include "runtime/comm.h"

namespace dsd::runtime {

Result<std::unique_ptr<Backend>> CreateGlooBackend(int rank, int size, gloo::rendezvous::Store& store,
                                                   const std::string& bind_host, Duration timeout);
Result<std::unique_ptr<Backend>> CreateMpiBackend();
Result<std::unique_ptr<Backend>> CreateNcclBackend(int rank, int size, int device, gloo::rendezvous::Store& store);

}  // namespace dsd::runtime
