// A stand-in for a user's own NCCL profiler plugin (NCCL Inspector, say), for the chaining test:
// exports ncclProfiler_v5 only, asks for collective-API and kernel-channel events (so collectives,
// their parents, come too), and counts what reaches it in globals the test reads with dlsym.
#include <cstdint>

#include "tracers/nccl_profiler_abi.h"

using namespace dsd::nccl_abi;

extern "C" {
int chained_inits = 0, chained_starts = 0, chained_stops = 0, chained_records = 0, chained_finalizes = 0;
uint64_t chained_last_type = 0;
void* chained_last_parent = nullptr;
uint64_t chained_comm_id = 0;
static char handles[64];

PluginV5 ncclProfiler_v5 = {"chained-test",
                            [](void** ctx, uint64_t id, int* mask, const char*, int, int, int, Logger) {
                              ++chained_inits;
                              chained_comm_id = id;
                              *ctx = &chained_inits;
                              *mask |= static_cast<int>(kCollApi | kKernelCh);
                              return kSuccess;
                            },
                            [](void* ctx, void** handle, DescrV5* d) {
                              if (ctx != &chained_inits) return kInternalError;
                              chained_last_type = d->type;
                              chained_last_parent = d->parent;
                              *handle = &handles[chained_starts++ % 64];
                              return kSuccess;
                            },
                            [](void*) {
                              ++chained_stops;
                              return kSuccess;
                            },
                            [](void*, int, StateArgsV4*) {
                              ++chained_records;
                              return kSuccess;
                            },
                            [](void*) {
                              ++chained_finalizes;
                              return kSuccess;
                            }};
}
