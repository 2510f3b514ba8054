#include "runtime/comm.h"

#include <Eigen/Core>

#include <algorithm>
#include <cstring>
#include <functional>

#include "common/log.h"

namespace dsd::runtime {

ProcessGroup::ProcessGroup(std::unique_ptr<Backend> backend, std::shared_ptr<TraceWriter> trace, uint32_t comm_id)
    : backend_(std::move(backend)), trace_(std::move(trace)), comm_id_(comm_id) {}

Status ProcessGroup::Traced(OpInfo info, const std::function<Status()>& call) {
  if (!tracing_) return call();
  info.comm_id = comm_id_;
  uint64_t index = trace_->Begin(info);
  Status s = call();
  if (s.ok()) {
    trace_->Complete(index);
  } else {
    trace_->Fail(index, s.message());
    TraceRecord r;
    r.op = info.op;
    r.seq = info.seq;
    r.dtype = info.dtype;
    r.count = info.count;
    r.bytes = info.bytes;
    r.reduce = info.reduce;
    r.peer = info.peer;
    r.callsite = std::string(info.callsite);
    r.state = RecordState::kFailed;
    log::Get("runtime")->error("rank {}: {} failed: {}", rank(), DescribeRecord(r), s.message());
  }
  return s;
}

namespace {

OpInfo Collective(ProcessGroup& g, Op op, DType dtype, size_t count, std::string_view callsite) {
  OpInfo info;
  info.op = op;
  info.dtype = dtype;
  info.count = count;
  info.bytes = count * DTypeSize(dtype);
  info.seq = g.NextCollectiveSeq();
  info.callsite = callsite;
  return info;
}

}  // namespace

Status AllReduce(ProcessGroup& g, void* data, size_t count, DType dtype, ReduceOp op, std::string_view callsite) {
  OpInfo info = Collective(g, Op::kAllReduce, dtype, count, callsite);
  info.reduce = op;
  return g.Traced(info, [&] { return g.backend().AllReduce(data, count, dtype, op); });
}

Status Broadcast(ProcessGroup& g, void* data, size_t count, DType dtype, int root, std::string_view callsite) {
  if (root < 0 || root >= g.size()) {
    return InvalidArgument("broadcast root " + std::to_string(root) + " outside world size " + std::to_string(g.size()));
  }
  OpInfo info = Collective(g, Op::kBroadcast, dtype, count, callsite);
  info.peer = root;
  return g.Traced(info, [&] { return g.backend().Broadcast(data, count, dtype, root); });
}

Status AllGather(ProcessGroup& g, const void* in, void* out, size_t count, DType dtype, std::string_view callsite) {
  OpInfo info = Collective(g, Op::kAllGather, dtype, count, callsite);
  return g.Traced(info, [&] { return g.backend().AllGather(in, out, count, dtype); });
}

Status Barrier(ProcessGroup& g, std::string_view callsite) {
  OpInfo info = Collective(g, Op::kBarrier, DType::kNone, 0, callsite);
  return g.Traced(info, [&] { return g.backend().Barrier(); });
}

Status Send(ProcessGroup& g, const void* data, size_t count, DType dtype, int peer, std::string_view callsite,
            uint32_t tag) {
  if (peer < 0 || peer >= g.size() || peer == g.rank()) {
    return InvalidArgument("send to rank " + std::to_string(peer) + " from rank " + std::to_string(g.rank()) +
                           " of " + std::to_string(g.size()));
  }
  OpInfo info{Op::kSend, dtype, ReduceOp::kNone, g.NextP2pSeq(Op::kSend, peer), count, count * DTypeSize(dtype), peer,
              0, callsite};
  return g.Traced(info, [&] { return g.backend().Send(data, count, dtype, peer, tag); });
}

Status Recv(ProcessGroup& g, void* data, size_t count, DType dtype, int peer, std::string_view callsite,
            uint32_t tag) {
  if (peer < 0 || peer >= g.size() || peer == g.rank()) {
    return InvalidArgument("recv from rank " + std::to_string(peer) + " at rank " + std::to_string(g.rank()) +
                           " of " + std::to_string(g.size()));
  }
  OpInfo info{Op::kRecv, dtype, ReduceOp::kNone, g.NextP2pSeq(Op::kRecv, peer), count, count * DTypeSize(dtype), peer,
              0, callsite};
  return g.Traced(info, [&] { return g.backend().Recv(data, count, dtype, peer, tag); });
}

uint16_t FloatToHalf(float f) { return Eigen::numext::bit_cast<uint16_t>(Eigen::half(f)); }

float HalfToFloat(uint16_t h) { return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(h)); }

namespace {

template <typename T>
void ReduceTyped(T* acc, const T* in, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      for (size_t i = 0; i < n; ++i) acc[i] = acc[i] + in[i];
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], in[i]);
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], in[i]);
      break;
    default:  // the runtime sends only sum/max/min; the others are the Python tracer's
      break;
  }
}

void ReduceHalf(uint16_t* acc, const uint16_t* in, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) {
    float a = HalfToFloat(acc[i]), b = HalfToFloat(in[i]);
    float r = op == ReduceOp::kSum ? a + b : op == ReduceOp::kMax ? std::max(a, b) : std::min(a, b);
    acc[i] = FloatToHalf(r);
  }
}

}  // namespace

void ReduceInto(void* acc, const void* in, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kFloat32: ReduceTyped(static_cast<float*>(acc), static_cast<const float*>(in), count, op); break;
    case DType::kFloat16: ReduceHalf(static_cast<uint16_t*>(acc), static_cast<const uint16_t*>(in), count, op); break;
    case DType::kInt32: ReduceTyped(static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), count, op); break;
    case DType::kInt64: ReduceTyped(static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), count, op); break;
    case DType::kUint8: ReduceTyped(static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(in), count, op); break;
    default: break;  // the runtime never sends the Python tracer's types
  }
}

}  // namespace dsd::runtime
