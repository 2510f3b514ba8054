// Collective-communication probes: one harness (RunAllReduceSweep) over a Communicator
// interface with one implementation per library (Gloo over TCP, MPI, NCCL on device buffers).
// Each rank runs the harness with its own Communicator; the coordinator combines the ranks'
// results (slowest rank's time, total #wrong) and applies the formulas of bandwidth.h.
// A Communicator is used by one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "probe/bandwidth.h"

namespace dsd::probe {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "gloo", "mpi", "nccl"
  // How the backend moves data, for the report ("synchronous pairs, busy-polling"); empty when the
  // library decides alone.
  virtual std::string mode() const { return ""; }
  // Allocates the working buffer (device memory for NCCL) for up to `max_count` floats.
  virtual Status Prepare(size_t max_count) = 0;
  // Copies the first `count` floats of `host` to the working buffer.
  virtual Status Upload(const std::vector<float>& host, size_t count) = 0;
  virtual Status Download(std::vector<float>* host, size_t count) = 0;
  // In-place sum over all ranks of the first `count` floats; returns when this rank's part is done.
  virtual Status AllReduceSum(size_t count) = 0;
  virtual Status Barrier() = 0;
};

// A host-memory working buffer, for the CPU libraries.
class HostBufferCommunicator : public Communicator {
 public:
  Status Prepare(size_t max_count) override;
  Status Upload(const std::vector<float>& host, size_t count) override;
  Status Download(std::vector<float>* host, size_t count) override;

 protected:
  std::vector<float> buffer_;
};

struct SweepOptions {
  int warmup = 2;
  int max_iters = 20;
  // Fewer iterations for big sizes: iters = clamp(bytes_budget / bytes, 1, max_iters). A function
  // of the size alone, so every rank runs the same number of operations.
  size_t bytes_budget = 64u << 20;
};

int IterationsFor(size_t bytes, const SweepOptions& o);

// This rank's view of one size: average time per operation and wrong elements seen here.
struct RankSizeResult {
  size_t bytes = 0;
  double time_us = 0;
  long wrong = 0;
};

// Element i of rank r starts as (r + 1) + (i % 13): sums stay exact in float, and a result that
// mixes up ranks or offsets is caught.
float PatternValue(int rank, size_t i);
float ExpectedSum(int nranks, size_t i);

// For each size (bytes, multiples of 4): MeasureAllReduce on a buffer prepared for the largest.
// Every rank must call it with the same sizes and options.
Result<std::vector<RankSizeResult>> RunAllReduceSweep(Communicator& comm, const std::vector<size_t>& sizes,
                                                      const SweepOptions& options, Clock& clock);

// Every rank's initial data for sizes up to `max_bytes`: PatternValue(rank, i).
std::vector<float> AllReducePattern(int rank, size_t max_bytes);

// One size on a communicator already prepared for it: min(warmup, iters) warm-up all-reduces (at
// least one), the first on `pattern` (AllReducePattern) and checked, then `iters` timed ones after
// a barrier. Every rank must call it with the same size and options. Lets a benchmark alternate
// two communicators size by size, so that both see the same moment of a shared machine.
Result<RankSizeResult> MeasureAllReduce(Communicator& comm, size_t bytes, const std::vector<float>& pattern,
                                        const SweepOptions& options, Clock& clock);

// Combines all ranks' results for the same sizes: slowest time, total #wrong, algbw/busbw.
std::vector<SizeResult> CombineRanks(const std::vector<std::vector<RankSizeResult>>& per_rank, int nranks);

}  // namespace dsd::probe
