#include "runtime/types.h"

namespace dsd::runtime {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUint8: return 1;
    case DType::kNone: break;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUint8: return "uint8";
    case DType::kNone: break;
  }
  return "";
}

const char* ReduceOpName(ReduceOp o) {
  switch (o) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kNone: break;
  }
  return "";
}

const char* OpName(Op o) {
  switch (o) {
    case Op::kBarrier: return "barrier";
    case Op::kBroadcast: return "broadcast";
    case Op::kAllReduce: return "all_reduce";
    case Op::kAllGather: return "all_gather";
    case Op::kSend: return "send";
    case Op::kRecv: return "recv";
    case Op::kRendezvous: return "rendezvous";
    case Op::kNone: break;
  }
  return "none";
}

std::optional<Op> ParseOpName(std::string_view name) {
  for (int i = 1; i <= static_cast<int>(Op::kRendezvous); ++i) {
    if (name == OpName(static_cast<Op>(i))) return static_cast<Op>(i);
  }
  return std::nullopt;
}

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kStartup: return "startup";
    case Phase::kInit: return "init";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kStep: return "step";
    case Phase::kSaveCheckpoint: return "save_checkpoint";
    case Phase::kLoadCheckpoint: return "load_checkpoint";
    case Phase::kUser: return "user";
    case Phase::kFinished: return "finished";
  }
  return "unknown";
}

}  // namespace dsd::runtime
