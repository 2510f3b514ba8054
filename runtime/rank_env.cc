#include "runtime/rank_env.h"

#include <charconv>

#include "common/log.h"

namespace dsd::runtime {
namespace {

Result<int> IntVar(const std::map<std::string, std::string>& env, const std::string& name, int min, int max) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return InvalidArgument(name + " is not set");
  int v = 0;
  const std::string& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return InvalidArgument(name + "=" + s + " is not an integer");
  if (v < min || v > max) {
    return InvalidArgument(name + "=" + s + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return v;
}

}  // namespace

Result<RankEnv> ParseRankEnv(const std::map<std::string, std::string>& env) {
  RankEnv r;
  bool has_env = env.count("RANK") || env.count("WORLD_SIZE");
  bool has_mpi = env.count("OMPI_COMM_WORLD_RANK") && env.count("OMPI_COMM_WORLD_SIZE");
  if (has_env) {
    r.source = "env://";
    DSD_ASSIGN_OR_RETURN(r.world_size, IntVar(env, "WORLD_SIZE", 1, 1 << 24));
    DSD_ASSIGN_OR_RETURN(r.rank, IntVar(env, "RANK", 0, 1 << 24));
    auto addr = env.find("MASTER_ADDR");
    if (addr == env.end() || addr->second.empty()) return InvalidArgument("MASTER_ADDR is not set");
    r.master_addr = addr->second;
    DSD_ASSIGN_OR_RETURN(r.master_port, IntVar(env, "MASTER_PORT", 1, 65535));
    r.local_rank = env.count("LOCAL_RANK") ? IntVar(env, "LOCAL_RANK", 0, 1 << 16).value_or(-1) : 0;
    if (r.local_rank < 0) return IntVar(env, "LOCAL_RANK", 0, 1 << 16).status();
    if (env.count("LOCAL_SIZE")) {
      DSD_ASSIGN_OR_RETURN(r.local_size, IntVar(env, "LOCAL_SIZE", 1, 1 << 16));
    }
  } else if (has_mpi) {
    r.source = "openmpi";
    DSD_ASSIGN_OR_RETURN(r.world_size, IntVar(env, "OMPI_COMM_WORLD_SIZE", 1, 1 << 24));
    DSD_ASSIGN_OR_RETURN(r.rank, IntVar(env, "OMPI_COMM_WORLD_RANK", 0, 1 << 24));
    if (env.count("OMPI_COMM_WORLD_LOCAL_RANK")) {
      DSD_ASSIGN_OR_RETURN(r.local_rank, IntVar(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 1 << 16));
    }
    if (env.count("OMPI_COMM_WORLD_LOCAL_SIZE")) {
      DSD_ASSIGN_OR_RETURN(r.local_size, IntVar(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1 << 16));
    }
  } else {
    return InvalidArgument("no distributed environment: set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
                           "(env://) or launch with mpirun");
  }
  if (r.rank >= r.world_size) {
    std::string rv = r.source == "openmpi" ? "OMPI_COMM_WORLD_RANK" : "RANK";
    std::string wv = r.source == "openmpi" ? "OMPI_COMM_WORLD_SIZE" : "WORLD_SIZE";
    return InvalidArgument(rv + "=" + std::to_string(r.rank) + " is not below " + wv + "=" + std::to_string(r.world_size));
  }
  if (r.local_rank >= r.local_size && (env.count("LOCAL_SIZE") || env.count("OMPI_COMM_WORLD_LOCAL_SIZE"))) {
    return InvalidArgument("LOCAL_RANK=" + std::to_string(r.local_rank) + " is not below LOCAL_SIZE=" +
                           std::to_string(r.local_size));
  }
  log::Get("runtime")->debug("rank {}/{} (local {}/{}) from {}", r.rank, r.world_size, r.local_rank, r.local_size,
                             r.source);
  return r;
}

}  // namespace dsd::runtime
