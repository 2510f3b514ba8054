// MPI (OpenMPI) as a Communicator over MPI_COMM_WORLD: MPI_Allreduce(MPI_IN_PLACE, float, sum).
// Only for processes started by mpirun. InitMpi/FinalizeMpi bracket its use in a process; calls
// must come from one thread at a time (MPI_THREAD_SERIALIZED).
#pragma once

#include <memory>
#include <string>

#include "probe/collective.h"

namespace dsd::probe {

// True when this process was started by mpirun (OMPI_COMM_WORLD_RANK or PMIX_RANK is set).
bool LaunchedByMpirun();
Status InitMpi();
void FinalizeMpi();

// MPI_Error_string of an MPI return code.
std::string MpiErrorString(int code);

// Requires InitMpi.
Result<std::unique_ptr<Communicator>> CreateMpiCommunicator();

}  // namespace dsd::probe
