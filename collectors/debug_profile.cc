#include "collectors/debug_profile.h"

namespace dsd::collectors {

void ApplyDiagnosticProfile(bool debug, std::map<std::string, std::string>* env) {
  // emplace keeps a value that is already there: the user's.
  if (debug) {
    env->emplace("NCCL_DEBUG", "INFO");
    env->emplace("TORCH_DISTRIBUTED_DEBUG", "DETAIL");
    env->emplace("TORCH_CPP_LOG_LEVEL", "INFO");
    env->emplace("TORCH_SHOW_CPP_STACKTRACES", "1");
    env->emplace("DSDOCTOR_LOG_LEVEL", "debug");
  } else {
    env->emplace("NCCL_DEBUG", "WARN");
  }
}

}  // namespace dsd::collectors
