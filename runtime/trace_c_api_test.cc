#include "runtime/trace_c_api.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/trace.h"

namespace dsd::runtime {
namespace {

// The C ABI keeps one trace per process, so one test opens it and walks through both locking modes.
// Under ThreadSanitizer (scripts/tsan.sh) the threaded parts check that the lock is taken where the
// producer did not promise one call at a time.
TEST(TraceCApiTest, RecordsFromManyThreadsAndFromAOneCallerProducerAreAllKept) {
  char tmpl[] = "/tmp/dsdtrace-capi-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string path = dir + "/rank-3.trace";
  ASSERT_EQ(dsd_trace_open(path.c_str(), 3, 4, 1, "mpi", 1024), 0) << dsd_trace_error();

  // Without the promise: threads begin and end at once, and none of their records is lost.
  constexpr int kThreads = 4, kEach = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < kEach; ++i) {
        uint64_t h = dsd_trace_begin(static_cast<int>(Op::kAllReduce), static_cast<int>(DType::kFloat32),
                                     static_cast<int>(ReduceOp::kSum), i + 1, 4, 16, -1, 7 + t, "threaded");
        dsd_trace_end(h, 1, nullptr);
      }
    });
  for (auto& t : threads) t.join();

  // With it: one thread, no lock; a failed call keeps its error.
  dsd_trace_set_one_caller(1);
  for (int i = 0; i < kEach; ++i) {
    uint64_t h = dsd_trace_begin(static_cast<int>(Op::kBarrier), 0, 0, i + 1, 0, 0, -1, 99, "one_caller");
    dsd_trace_end(h, i + 1 < kEach, i + 1 < kEach ? nullptr : "MPI_Barrier: MPI_ERR_COMM");
  }
  // Taken back: threads again.
  dsd_trace_set_one_caller(0);
  threads.clear();
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < kEach; ++i) dsd_trace_end(dsd_trace_begin(0, 0, 0, 1, 0, 0, -1, 50, "again"), 1, nullptr);
    });
  for (auto& t : threads) t.join();

  auto snap = ReadTrace(path);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_EQ(snap->rank, 3);
  EXPECT_EQ(snap->next_index, static_cast<uint64_t>(kThreads * kEach + kEach + 2 * kEach));
  ASSERT_EQ(snap->records.size(), snap->next_index);
  std::set<uint64_t> indexes;
  int threaded = 0, one_caller = 0, again = 0;
  for (const TraceRecord& r : snap->records) {
    indexes.insert(r.index);
    if (r.callsite == "threaded") ++threaded;
    if (r.callsite == "one_caller") {
      ++one_caller;
      EXPECT_EQ(r.comm_id, 99u);
      EXPECT_EQ(r.state, r.seq == kEach ? RecordState::kFailed : RecordState::kCompleted) << r.seq;
    } else {
      EXPECT_EQ(r.state, RecordState::kCompleted) << r.callsite << " " << r.index;
    }
    if (r.callsite == "again") ++again;
  }
  EXPECT_EQ(indexes.size(), snap->records.size());  // no index given twice
  EXPECT_EQ(threaded, kThreads * kEach);
  EXPECT_EQ(one_caller, kEach);
  EXPECT_EQ(again, 2 * kEach);
  EXPECT_EQ(snap->last_error, "MPI_Barrier: MPI_ERR_COMM");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsd::runtime
