// init_distributed: from the environment (env:// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, or
// OpenMPI's) to a World: the rank's trace, its watchdog, the rendezvous store and the world
// process group on the chosen backend. The rendezvous checks that every rank agrees on the world
// size and names the ranks that never joined, instead of hanging.
//
// Environment read (besides runtime/rank_env.h's): DSDOCTOR_BACKEND (gloo|mpi|nccl, default gloo;
// mpi when launched by mpirun without RANK), DSDOCTOR_TRACE_FILE (this rank's trace path) or
// DSDOCTOR_TRACE_DIR (trace at <dir>/rank-<r>.trace), DSDOCTOR_TIMEOUT and
// DSDOCTOR_WATCHDOG_POLICY (runtime/config.h), DSDOCTOR_RENDEZVOUS_TIMEOUT (seconds, default 300),
// GLOO_SOCKET_IFNAME (the interface whose address Gloo binds), DSDOCTOR_BIND_ADDR (an address).
//
// A World is owned by the program (one per process) and used by its training thread.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "runtime/comm.h"
#include "runtime/rank_env.h"
#include "runtime/store.h"
#include "runtime/watchdog.h"

namespace dsd::runtime {

struct DistributedOptions {
  std::string backend;        // empty: DSDOCTOR_BACKEND, else gloo (mpi under mpirun)
  int world_size = 0;         // > 0 overrides WORLD_SIZE (the hard-coded world_size of many scripts)
  Duration rendezvous_timeout = Duration::zero();  // zero: DSDOCTOR_RENDEZVOUS_TIMEOUT or 300 s
  Duration comm_timeout = std::chrono::minutes(30);
  uint32_t trace_capacity = kDefaultTraceCapacity;
  // The environment to read; empty: the process's own.
  std::map<std::string, std::string> env;
};

class World {
 public:
  ~World();
  ProcessGroup& group() { return *group_; }
  std::shared_ptr<ProcessGroup> shared_group() { return group_; }
  Watchdog& watchdog() { return *watchdog_; }
  TraceWriter& trace() { return *trace_; }
  const RankEnv& env() const { return env_; }
  int rank() const { return group_->rank(); }
  int size() const { return group_->size(); }
  // Marks the trace finished and stops the watchdog (also done by the destructor).
  void Finish();

 private:
  friend Result<std::unique_ptr<World>> InitDistributed(const DistributedOptions& options);
  World() = default;
  RankEnv env_;
  std::shared_ptr<TraceWriter> trace_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStore> store_;
  std::shared_ptr<ProcessGroup> group_;
  bool mpi_ = false;
  bool finished_ = false;
};

Result<std::unique_ptr<World>> InitDistributed(const DistributedOptions& options = {});

// The IPv4 address of interface `ifname` (GLOO_SOCKET_IFNAME), or the local address the kernel
// would use to reach `master` (what other nodes can reach us on).
Result<std::string> ChooseBindAddress(const std::string& ifname, const std::string& master);

// The environment of this process as a map.
std::map<std::string, std::string> ProcessEnvironment();

}  // namespace dsd::runtime
