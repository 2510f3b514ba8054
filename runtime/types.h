// Vocabulary shared by the comm backends, the trace format and the engine: element types, reduce
// operations, collective kinds and training phases. The numeric values are part of the trace file
// format (docs/trace.md): append, never renumber.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dsd::runtime {

// 6.. are written by the Python tracer (PyTorch's element types); the runtime's backends use 1-5.
enum class DType : uint8_t {
  kNone = 0,
  kFloat32 = 1,
  kFloat16 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kUint8 = 5,
  kBFloat16 = 6,
  kFloat64 = 7,
  kInt8 = 8,
  kBool = 9,
  kInt16 = 10,
  kComplex64 = 11,
  kComplex128 = 12,
  kOther = 13,  // a type this format has no name for (float8, quantized, ...)
};
enum class ReduceOp : uint8_t {
  kNone = 0,
  kSum = 1,
  kMax = 2,
  kMin = 3,
  kProduct = 4,  // 4.. are written by the Python tracer (torch.distributed.ReduceOp)
  kAvg = 5,
  kBand = 6,
  kBor = 7,
  kBxor = 8,
  kPremulSum = 9,
  kLand = 10,  // 10.. are written by the PMPI tracer (MPI's other predefined operations)
  kLor = 11,
  kLxor = 12,
  kMaxloc = 13,
  kMinloc = 14,
  kOther = 15,  // a user-defined operation
};
enum class Op : uint8_t {
  kNone = 0,
  kBarrier = 1,
  kBroadcast = 2,
  kAllReduce = 3,
  kAllGather = 4,
  kSend = 5,
  kRecv = 6,
  kRendezvous = 7,  // init_distributed: waiting for every rank to join
  // 8.. are written by the Python tracer (torch.distributed's other collectives).
  kReduce = 8,
  kReduceScatter = 9,
  kAllToAll = 10,
  kGather = 11,
  kScatter = 12,
  kAllGatherObject = 13,
  kBroadcastObjectList = 14,
  kGatherObject = 15,
  kScatterObjectList = 16,
  // 17.. are written by the PMPI tracer (MPI's collectives that torch.distributed lacks).
  kScan = 17,
  kExscan = 18,
  kAllGatherV = 19,  // count: the total over ranks (recvcounts is the same on every rank)
  kAllToAllV = 20,   // count 0: each rank's counts differ by design
  kGatherV = 21,     // count 0, as above
  kScatterV = 22,    // count 0, as above
  kLast = kScatterV,
};
enum class Phase : uint32_t {
  kStartup = 0,
  kInit = 1,  // init_distributed / initialize
  kForward = 2,
  kBackward = 3,
  kStep = 4,
  kSaveCheckpoint = 5,
  kLoadCheckpoint = 6,
  kUser = 7,  // between engine calls: the program's own code
  kFinished = 8,
};

size_t DTypeSize(DType t);
const char* DTypeName(DType t);        // "float32", "float16", ...
const char* ReduceOpName(ReduceOp o);  // "sum", "max", "min", ""
const char* OpName(Op o);              // "all_reduce", "barrier", ...
const char* PhaseName(Phase p);        // "forward", "save_checkpoint", ...
// Inverse of OpName (for readers of logs and traces); nullopt when unknown.
std::optional<Op> ParseOpName(std::string_view name);

// True for collectives: every rank of the group calls them in the same order, and they share one
// sequence number per group. Send/recv count per peer instead.
inline bool IsCollective(Op o) { return o != Op::kSend && o != Op::kRecv && o != Op::kNone; }
// Collectives with a root rank (recorded in the trace's `peer`): every rank must name the same one.
inline bool HasRoot(Op o) {
  return o == Op::kBroadcast || o == Op::kReduce || o == Op::kGather || o == Op::kScatter ||
         o == Op::kBroadcastObjectList || o == Op::kGatherObject || o == Op::kScatterObjectList;
}

}  // namespace dsd::runtime
