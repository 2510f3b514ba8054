// The environment dsdoctor adds to every rank it starts so that the lines its diagnosis reads
// exist on the first failure (docs/run.md, "Rank environment"):
//   always        NCCL_DEBUG=WARN  (NCCL prints the WARN line that names the cause; silent otherwise)
//   debug level   NCCL_DEBUG=INFO, TORCH_DISTRIBUTED_DEBUG=DETAIL, TORCH_CPP_LOG_LEVEL=INFO,
//                 TORCH_SHOW_CPP_STACKTRACES=1, DSDOCTOR_LOG_LEVEL=debug
// A variable the user set (present in `env`, from their shell or .deepspeed_env) always wins.
// Pure; thread-safe.
#pragma once

#include <map>
#include <string>

namespace dsd::collectors {

void ApplyDiagnosticProfile(bool debug, std::map<std::string, std::string>* env);

}  // namespace dsd::collectors
