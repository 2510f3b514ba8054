#include "agent/request.h"

#include <cstdint>
#include <limits>
#include <string>

#include "agent/json_fields.h"
#include "agent/ping.h"
#include "agent/run_protocol.h"

namespace dsd::agent {

using fields::Fields;
using fields::kMaxName;
using fields::kMaxPort;
using fields::kMaxTimeoutMs;
using fields::kMaxValue;
using nlohmann::json;

Status ValidateRequest(const json& request) {
  DSD_ASSIGN_OR_RETURN(const std::string type, fields::TypeOf(request, "request"));
  Fields f(request, type);
  f.Int("id", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  if (type == "inventory") {
    f.StringMap("job_env", 100000);
  } else if (type == "listen") {
    f.Int("port", 0, kMaxPort, true);
  } else if (type == "ping") {
    // The compact target table has its own reader (agent/ping.h).
    if (auto parsed = ParsePingRequest(request); !parsed.ok()) return parsed.status();
  } else if (type == "kv_set") {
    f.String("key", kMaxName, true).String("value", kMaxValue, true);
  } else if (type == "kv_get") {
    f.StringList("keys", 100000, kMaxName, true).Int("timeout_ms", 0, kMaxTimeoutMs);
  } else if (type == "allreduce") {
    f.String("backend", 16)
        .IntList("sizes", 64, 1, int64_t{1} << 40, true)
        .Int("max_iters", 1, 1000)
        .Int("warmup", 0, 100)
        .Int("timeout_ms", 1, kMaxTimeoutMs)
        .String("run", kMaxName)
        .Endpoint("store");
    const std::string backend = request.value("backend", std::string("gloo"));
    if (backend != "gloo" && backend != "mpi" && backend != "nccl")
      return Unimplemented("allreduce: unknown backend '" + backend + "' (gloo, mpi, nccl)");
    if (backend == "gloo")
      f.Int("rank", 0, 65535, true).Int("size", 1, 65536, true).Endpoint("store", true).Bool("busy_poll");
    if (backend == "nccl")
      f.Int("first_rank", 0, 65535, true).Int("gpus", 1, 64, true).Int("size", 1, 65536, true).Endpoint("store", true);
  } else if (type == "p2p_send") {
    f.Endpoint("target", true).Number("seconds", 0, 3600).Int("max_bytes", 1, int64_t{1} << 40);
  } else if (type == "run") {
    if (!f.status().ok()) return f.status();  // its "id"
    return ReadRunRequest(request).status();  // the run protocol's reader (agent/run_protocol.h)
  } else if (type == "reattach") {
    if (!f.status().ok()) return f.status();
    return ReadReattachRequest(request).status();
  } else if (type == "sink" || type == "shutdown") {
    // no fields
  } else {
    return Unimplemented("unknown request type '" + type + "'");
  }
  return f.status();
}

}  // namespace dsd::agent
