// Bandwidth arithmetic and reporting, written once for every probe (nccl-tests conventions):
//   algbw = bytes / time                      (GB/s, 1 GB = 1e9 bytes)
//   busbw = algbw × factor(op, nranks)        so that busbw is comparable to link bandwidth
//   all-reduce 2(n-1)/n · all-gather, reduce-scatter, all-to-all (n-1)/n · broadcast, reduce, send/recv 1
// "bytes" is the per-rank buffer size (count × sizeof(type)), as nccl-tests' size column.
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"

namespace dsd::probe {

enum class CollectiveOp { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce, kSendRecv };

double BusBwFactor(CollectiveOp op, int nranks);
double AlgBwGBps(double bytes, double seconds);

struct SizeResult {
  size_t bytes = 0;
  size_t count = 0;
  std::string type = "float";
  std::string redop = "sum";
  double time_us = 0;  // per operation: the slowest rank's average
  double algbw = 0;    // GB/s
  double busbw = 0;    // GB/s
  long wrong = 0;      // elements that differ from the expected result, over all ranks
};

// Fills algbw/busbw from bytes and time_us.
void ComputeBandwidth(CollectiveOp op, int nranks, SizeResult* r);
// Average of busbw over the rows, as nccl-tests' "Avg bus bandwidth".
double AvgBusBw(const std::vector<SizeResult>& rows);

// Sizes in bytes from "8-64M" (doubling from min to max, like nccl-tests -b 8 -e 64M -f 2) or a
// comma list "1K,1M,64M". Suffixes K, M, G are powers of 1024. Each size is rounded down to a
// multiple of `align` (the element size) and must be at least `align`.
Result<std::vector<size_t>> ParseSizes(const std::string& text, size_t align = 4);

// The nccl-tests table: size, count, type, redop, time, algbw, busbw, #wrong, then the average.
std::string RenderBandwidthTable(const std::vector<SizeResult>& rows);

nlohmann::json ToJson(const SizeResult& r);

}  // namespace dsd::probe
