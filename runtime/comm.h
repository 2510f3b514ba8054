// Communication for the training runtime: a Backend interface with one implementation per library
// (Gloo over TCP on CPU, OpenMPI, NCCL on device buffers) and one traced free function per
// collective over a ProcessGroup. Every call through these functions gets a trace record (seq,
// op, dtype, count, bytes, peer/root, callsite, state, timestamps) before it blocks, so a hung or
// killed rank shows where it waits.
//
// Buffers are host memory for every backend (NCCL stages them through device memory). All calls
// block until this rank's part is done. A ProcessGroup and its Backend are used by one thread at a
// time (the training loop); the trace writer they share is readable from any thread or process.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/trace.h"
#include "runtime/types.h"

namespace dsd::runtime {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "gloo", "mpi", "nccl"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place over `count` elements.
  virtual Status AllReduce(void* data, size_t count, DType dtype, ReduceOp op) = 0;
  virtual Status Broadcast(void* data, size_t count, DType dtype, int root) = 0;
  // `out` holds size() * count elements, rank r's `in` at offset r * count.
  virtual Status AllGather(const void* in, void* out, size_t count, DType dtype) = 0;
  virtual Status Barrier() = 0;
  virtual Status Send(const void* data, size_t count, DType dtype, int peer, uint32_t tag) = 0;
  virtual Status Recv(void* data, size_t count, DType dtype, int peer, uint32_t tag) = 0;
};

// A backend plus the bookkeeping that makes its calls diagnosable: the trace writer, the group's
// collective sequence number and per-peer p2p sequence numbers.
class ProcessGroup {
 public:
  ProcessGroup(std::unique_ptr<Backend> backend, std::shared_ptr<TraceWriter> trace, uint32_t comm_id = 0);
  Backend& backend() { return *backend_; }
  int rank() const { return backend_->rank(); }
  int size() const { return backend_->size(); }
  TraceWriter& trace() { return *trace_; }
  std::shared_ptr<TraceWriter> shared_trace() const { return trace_; }
  uint32_t comm_id() const { return comm_id_; }
  uint64_t collectives_issued() const { return seq_; }

  // Runs `call` between a Begin and Complete/Fail of the trace. Used by the free functions below.
  Status Traced(OpInfo info, const std::function<Status()>& call);
  uint64_t NextCollectiveSeq() { return ++seq_; }
  // Benchmarks only (bench/trace_bench.cc measures tracing's cost with it): calls go straight to
  // the backend without trace records. Everything that diagnoses a rank relies on tracing being on.
  void set_tracing_for_benchmark(bool on) { tracing_ = on; }
  uint64_t NextP2pSeq(Op op, int peer) { return ++p2p_seq_[{static_cast<int>(op), peer}]; }

 private:
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<TraceWriter> trace_;
  uint32_t comm_id_;
  bool tracing_ = true;
  uint64_t seq_ = 0;
  std::map<std::pair<int, int>, uint64_t> p2p_seq_;
};

// The traced collectives. `callsite` names the code that called ("engine.step", "save_checkpoint",
// "user.metrics"); it is what a diagnosis quotes when ranks disagree.
Status AllReduce(ProcessGroup& g, void* data, size_t count, DType dtype, ReduceOp op, std::string_view callsite);
Status Broadcast(ProcessGroup& g, void* data, size_t count, DType dtype, int root, std::string_view callsite);
Status AllGather(ProcessGroup& g, const void* in, void* out, size_t count, DType dtype, std::string_view callsite);
Status Barrier(ProcessGroup& g, std::string_view callsite);
Status Send(ProcessGroup& g, const void* data, size_t count, DType dtype, int peer, std::string_view callsite,
            uint32_t tag = 0);
Status Recv(ProcessGroup& g, void* data, size_t count, DType dtype, int peer, std::string_view callsite,
            uint32_t tag = 0);

// Typed conveniences.
inline Status AllReduce(ProcessGroup& g, std::vector<float>& v, ReduceOp op, std::string_view callsite) {
  return AllReduce(g, v.data(), v.size(), DType::kFloat32, op, callsite);
}

// IEEE binary16 conversions (round to nearest even; overflow becomes ±inf), for fp16 training and
// the backends' float16 reductions.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

// Element-wise `acc[i] = op(acc[i], in[i])` over `count` elements of `dtype`: the reduction the
// Gloo and MPI backends apply (MPI has no float16 type of its own).
void ReduceInto(void* acc, const void* in, size_t count, DType dtype, ReduceOp op);

}  // namespace dsd::runtime
