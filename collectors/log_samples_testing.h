// Log lines in the formats of real reports, shared by the collectors' tests.
#pragma once

#include <string>

namespace dsd::collectors::log_samples {

// PyTorch >= 2.2's watchdog timeout of rank `rank` in ALLREDUCE SeqNum=2, as torchrun prefixes it
// (https://github.com/hiyouga/LlamaFactory/issues/6269).
inline std::string TorchWatchdogTimeoutLine(int rank, const std::string& ran_ms) {
  const std::string r = std::to_string(rank);
  return "[rank" + r + "]:[E501 12:30:00.000000000 ProcessGroupNCCL.cpp:607] [Rank " + r +
         "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, "
         "NumelOut=1, Timeout(ms)=1800000) ran for " +
         ran_ms + " milliseconds before timing out.\n";
}

}  // namespace dsd::collectors::log_samples
