// NCCL's profiler-plugin ABI (NCCL_PROFILER_PLUGIN), versions 1 to 6, written from NCCL's
// ext-profiler documentation and headers (2.23 to 2.30): the structs NCCL hands a plugin, laid out as
// NCCL lays them out on x86-64/aarch64 (offsets asserted below). docs/trace.md, "The NCCL profiler plugin",
// says which NCCL release loads which version.
//
// Every version's plugin object has the same six slots; only init's arguments and the event
// descriptor change. NCCL dlsyms `ncclProfiler_v<N>` (newest first) and casts it to that version.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace dsd::nccl_abi {

using Result = int;  // ncclResult_t
inline constexpr Result kSuccess = 0;
inline constexpr Result kInternalError = 3;

// Event types: descriptor `type` and activation-mask bits.
enum : uint64_t {
  kGroup = 1 << 0,
  kColl = 1 << 1,
  kP2p = 1 << 2,
  kProxyOp = 1 << 3,
  kProxyStep = 1 << 4,
  kProxyCtrl = 1 << 5,
  kKernelCh = 1 << 6,   // v3
  kNetPlugin = 1 << 7,  // v3
  kGroupApi = 1 << 8,   // v5
  kCollApi = 1 << 9,
  kP2pApi = 1 << 10,
  kKernelLaunch = 1 << 11,
  kCeColl = 1 << 12,  // v6
  kCeSync = 1 << 13,
  kCeBatch = 1 << 14,
};

// ncclProfilerEventState_t: one C enum for every version (later versions only add values).
inline constexpr int kKernelChStop = 22;  // v4: args->kernel_ch_timer holds the GPU's end time

// ncclDataType_t, and the function codes v1 descriptors carry instead of strings.
enum DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
  kFloat8e4m3 = 10,
  kFloat8e5m2 = 11,
};
enum FuncV1 : uint8_t {
  kBroadcastV1 = 0,
  kReduceV1 = 1,
  kAllGatherV1 = 2,
  kReduceScatterV1 = 3,
  kAllReduceV1 = 4,
  kSendRecvV1 = 5,
  kSendV1 = 6,
  kRecvV1 = 7,
};

using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// ---- descriptors: a common head (type, parentObj, rank) and a union at offset 24 ----

struct CollV1 {
  const char* name;
  uint64_t comm_hash;
  uint64_t seq_number;
  uint8_t func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  uint8_t datatype;
  uint32_t op;
  size_t traffic_bytes;
  uint8_t n_max_channels, n_warps, algo, proto;
  int is_collnet, is_nvls;
};
struct P2pV1 {
  const char* name;
  uint64_t comm_hash;
  uint8_t func;
  void* buff;
  uint8_t datatype;
  size_t count;
  int peer;
};
struct ProxyOpV1 {
  int32_t pid;  // pid_t of the process that posted it (PXN: maybe another process)
  uint8_t channel_id;
  int peer, n_steps, chunk_size, is_send;
};
struct DescrV1 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollV1 coll;
    P2pV1 p2p;
    ProxyOpV1 proxy_op;
    int proxy_step;
  };
};

struct CollV2 {
  const char* name;
  uint64_t comm_hash;
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  size_t traffic_bytes;
  uint8_t n_max_channels, n_warps;
  const char* algo;
  const char* proto;
};
struct P2pV2 {
  const char* name;
  uint64_t comm_hash;
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
};
struct DescrV2 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollV2 coll;
    P2pV2 p2p;
    ProxyOpV1 proxy_op;
    int proxy_step;
  };
};

struct CollV3 {
  const char* name;
  uint64_t comm_hash;
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t n_max_channels, n_warps;
  const char* algo;
  const char* proto;
};
struct DescrV3 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollV3 coll;
    P2pV2 p2p;
    ProxyOpV1 proxy_op;
    int proxy_step;
    uint8_t kernel_ch_channel;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

// v4 on: the communicator's name and hash come through init, not the descriptor.
struct CollV4 {
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t n_channels, n_warps;
  const char* algo;
  const char* proto;
};
struct P2pV4 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t n_channels;
};
// v5 appends the legacy Group event's handle (plain structs, not derived: offsetof needs standard layout).
struct CollV5 {
  uint64_t seq_number;
  const char* func;
  const void* send_buff;
  void* recv_buff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t n_channels, n_warps;
  const char* algo;
  const char* proto;
  void* parent_group;
};
struct P2pV5 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t n_channels;
  void* parent_group;
};
struct KernelChV4 {
  uint8_t channel_id;
  uint64_t start_timer;  // the GPU's %globaltimer (ns) when the channel started
};
struct DescrV4 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    CollV4 coll;
    P2pV4 p2p;
    ProxyOpV1 proxy_op;
    int proxy_step;
    KernelChV4 kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

// v5 and v6: `type` widened to 64 bits; the API-level events are new union members.
struct DescrV5 {
  uint64_t type;
  void* parent;
  int rank;
  union {
    CollV5 coll;
    P2pV5 p2p;
    ProxyOpV1 proxy_op;
    int proxy_step;
    KernelChV4 kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graph_captured;
    } coll_api;
    unsigned char ce_coll[88];  // v6's copy-engine events: not read
  };
};

union StateArgsV1 {
  struct {
    size_t trans_size;
    int steps;
  } proxy_op;
  int proxy_ctrl_appended;
};
union StateArgsV4 {
  size_t proxy_step_trans_size;
  int proxy_ctrl_appended;
  void* net_plugin_data;
  uint64_t kernel_ch_timer;
};

// The plugin object NCCL reads: the same six slots in every version.
template <class Descr, class Args, class Init>
struct Plugin {
  const char* name;
  Init init;
  Result (*start_event)(void* context, void** handle, Descr* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, int state, Args* args);
  Result (*finalize)(void* context);
};
using InitV1 = Result (*)(void** context, int* mask);
using InitV4 = Result (*)(void** context, int* mask, const char* comm_name, uint64_t comm_hash, int n_nodes,
                          int n_ranks, int rank, Logger log);
using InitV5 = Result (*)(void** context, uint64_t comm_id, int* mask, const char* comm_name, int n_nodes, int n_ranks,
                          int rank, Logger log);
using PluginV1 = Plugin<DescrV1, StateArgsV1, InitV1>;
using PluginV2 = Plugin<DescrV2, StateArgsV1, InitV1>;
using PluginV3 = Plugin<DescrV3, StateArgsV1, InitV1>;
using PluginV4 = Plugin<DescrV4, StateArgsV4, InitV4>;
using PluginV5 = Plugin<DescrV5, StateArgsV4, InitV5>;  // v6 is the same layout

// Layouts as NCCL's (x86-64 and aarch64 LP64).
static_assert(sizeof(DescrV1) == 120 && offsetof(DescrV1, coll) == 24);
static_assert(offsetof(CollV1, seq_number) == 16 && offsetof(CollV1, count) == 48 && offsetof(CollV1, root) == 56 &&
              offsetof(CollV1, datatype) == 60 && offsetof(CollV1, op) == 64);
static_assert(offsetof(P2pV1, datatype) == 32 && offsetof(P2pV1, count) == 40 && offsetof(P2pV1, peer) == 48);
static_assert(sizeof(DescrV2) == 128 && offsetof(CollV2, datatype) == 64 && offsetof(CollV2, proto) == 96);
static_assert(sizeof(DescrV3) == 120 && offsetof(CollV3, datatype) == 64 && offsetof(CollV3, proto) == 88);
static_assert(sizeof(DescrV4) == 104 && offsetof(CollV4, datatype) == 48 && offsetof(CollV4, proto) == 72);
static_assert(offsetof(DescrV4, kernel_ch) + offsetof(KernelChV4, start_timer) == 32);
static_assert(offsetof(P2pV4, peer) == 32 && offsetof(P2pV4, n_channels) == 36);
static_assert(sizeof(DescrV5) == 112 && offsetof(DescrV5, coll) == 24);
static_assert(offsetof(DescrV5, coll) + offsetof(CollV5, parent_group) == 104);
static_assert(offsetof(DescrV5, p2p) + offsetof(P2pV5, parent_group) == 64);
static_assert(sizeof(PluginV1) == 48 && sizeof(PluginV5) == 48);

}  // namespace dsd::nccl_abi
