// The distributed environment of one rank: env:// variables (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, LOCAL_RANK, LOCAL_SIZE) as torchrun/DeepSpeed/dsdoctor set them, or OpenMPI's
// OMPI_COMM_WORLD_* when launched by mpirun. Pure parsing over a map; thread-safe.
#pragma once

#include <map>
#include <string>

#include "common/status.h"

namespace dsd::runtime {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr;
  int master_port = 0;  // 0 when launched by mpirun (MPI needs no rendezvous address)
  std::string source;   // "env://" or "openmpi"
};

// Errors name the variable and its value: "RANK=7 is not below WORLD_SIZE=4".
Result<RankEnv> ParseRankEnv(const std::map<std::string, std::string>& env);

}  // namespace dsd::runtime
