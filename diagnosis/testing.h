// Synthetic job states for tests and benchmarks (header-only; no I/O).
#pragma once

#include <string>

#include "diagnosis/state.h"

namespace dsd::diagnosis::testing {

// The rank-0-only save_checkpoint hang of `n` running, traced ranks at `now_ns`: rank 0 waits in
// barrier#5 @save_checkpoint, every other rank in all_reduce#5 float32 x5508 sum @engine.step, all
// since `started_ns`. Ranks are placed `ranks_per_node` to a node ("node-0", "node-1", ...).
inline JobState CheckpointHangJob(int n, int64_t now_ns, int64_t started_ns, int ranks_per_node = 2) {
  JobState job;
  job.world_size = n;
  job.now_ns = now_ns;
  for (int r = 0; r < n; ++r) {
    RankState s;
    s.rank = r;
    s.node = "node-" + std::to_string(r / ranks_per_node);
    s.status = RankStatus::kRunning;
    s.has_trace = true;
    OpRecord o;
    o.op = r == 0 ? "barrier" : "all_reduce";
    o.seq = 5;
    o.callsite = r == 0 ? "save_checkpoint" : "engine.step";
    o.dtype = r == 0 ? "" : "float32";
    o.reduce = r == 0 ? "" : "sum";
    o.count = r == 0 ? 0 : 5508;
    o.bytes = r == 0 ? 0 : 5508 * 4;
    o.state = "started";
    o.started_ns = started_ns;
    s.in_flight = o;
    s.last = o;
    s.recent = {o};
    job.ranks.push_back(s);
  }
  return job;
}

}  // namespace dsd::diagnosis::testing
