#include "runtime/types.h"

namespace dsd::runtime {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat16:
      return 2;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kUint8:
      return 1;
    case DType::kBFloat16:
      return 2;
    case DType::kFloat64:
      return 8;
    case DType::kInt8:
      return 1;
    case DType::kBool:
      return 1;
    case DType::kInt16:
      return 2;
    case DType::kComplex64:
      return 8;
    case DType::kComplex128:
      return 16;
    case DType::kOther:
    case DType::kNone:
      break;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUint8:
      return "uint8";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat64:
      return "float64";
    case DType::kInt8:
      return "int8";
    case DType::kBool:
      return "bool";
    case DType::kInt16:
      return "int16";
    case DType::kComplex64:
      return "complex64";
    case DType::kComplex128:
      return "complex128";
    case DType::kOther:
      return "other";
    case DType::kNone:
      break;
  }
  return "";
}

const char* ReduceOpName(ReduceOp o) {
  switch (o) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kProduct:
      return "product";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kBand:
      return "band";
    case ReduceOp::kBor:
      return "bor";
    case ReduceOp::kBxor:
      return "bxor";
    case ReduceOp::kPremulSum:
      return "premul_sum";
    case ReduceOp::kLand:
      return "land";
    case ReduceOp::kLor:
      return "lor";
    case ReduceOp::kLxor:
      return "lxor";
    case ReduceOp::kMaxloc:
      return "maxloc";
    case ReduceOp::kMinloc:
      return "minloc";
    case ReduceOp::kOther:
      return "user_op";
    case ReduceOp::kNone:
      break;
  }
  return "";
}

const char* OpName(Op o) {
  switch (o) {
    case Op::kBarrier:
      return "barrier";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kAllReduce:
      return "all_reduce";
    case Op::kAllGather:
      return "all_gather";
    case Op::kSend:
      return "send";
    case Op::kRecv:
      return "recv";
    case Op::kRendezvous:
      return "rendezvous";
    case Op::kReduce:
      return "reduce";
    case Op::kReduceScatter:
      return "reduce_scatter";
    case Op::kAllToAll:
      return "all_to_all";
    case Op::kGather:
      return "gather";
    case Op::kScatter:
      return "scatter";
    case Op::kAllGatherObject:
      return "all_gather_object";
    case Op::kBroadcastObjectList:
      return "broadcast_object_list";
    case Op::kGatherObject:
      return "gather_object";
    case Op::kScatterObjectList:
      return "scatter_object_list";
    case Op::kScan:
      return "scan";
    case Op::kExscan:
      return "exscan";
    case Op::kAllGatherV:
      return "all_gather_v";
    case Op::kAllToAllV:
      return "all_to_all_v";
    case Op::kGatherV:
      return "gather_v";
    case Op::kScatterV:
      return "scatter_v";
    case Op::kNone:
      break;
  }
  return "none";
}

std::optional<Op> ParseOpName(std::string_view name) {
  for (int i = 1; i <= static_cast<int>(Op::kLast); ++i) {
    if (name == OpName(static_cast<Op>(i))) return static_cast<Op>(i);
  }
  return std::nullopt;
}

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kStartup:
      return "startup";
    case Phase::kInit:
      return "init";
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kStep:
      return "step";
    case Phase::kSaveCheckpoint:
      return "save_checkpoint";
    case Phase::kLoadCheckpoint:
      return "load_checkpoint";
    case Phase::kUser:
      return "user";
    case Phase::kFinished:
      return "finished";
  }
  return "unknown";
}

}  // namespace dsd::runtime
