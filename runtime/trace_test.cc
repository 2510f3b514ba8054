#include "runtime/trace.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/small_tmpfs_testing.h"

namespace dsd::runtime {
namespace {

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dsdtrace-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/rank-1.trace";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_, path_;
};

OpInfo AllReduceInfo(uint64_t seq, const char* callsite = "engine.step") {
  return {Op::kAllReduce, DType::kFloat32, ReduceOp::kSum, seq, 1024, 4096, -1, 0, callsite};
}

TEST_F(TraceTest, RecordsRoundTripThroughTheFile) {
  auto w = TraceWriter::Create(path_, {1, 4, 1, "node-a", "gloo"}, 16);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  uint64_t a = (*w)->Begin(AllReduceInfo(1));
  (*w)->Complete(a);
  (*w)->Begin({Op::kBroadcast, DType::kFloat32, ReduceOp::kNone, 2, 10, 40, 0, 0, "initialize"});
  (*w)->SetPhase(Phase::kStep);
  (*w)->SetStep(7);

  auto s = ReadTrace(path_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->world_size, 4);
  EXPECT_EQ(s->hostname, "node-a");
  EXPECT_EQ(s->backend, "gloo");
  EXPECT_EQ(s->pid, ::getpid());
  EXPECT_EQ(s->phase, Phase::kStep);
  EXPECT_EQ(s->step, 7u);
  ASSERT_EQ(s->records.size(), 2u);
  EXPECT_EQ(s->records[0].op, Op::kAllReduce);
  EXPECT_EQ(s->records[0].state, RecordState::kCompleted);
  EXPECT_EQ(s->records[0].bytes, 4096u);
  EXPECT_EQ(s->records[0].callsite, "engine.step");
  EXPECT_GE(s->records[0].ended_ns, s->records[0].started_ns);
  ASSERT_NE(s->InFlight(), nullptr);
  EXPECT_EQ(s->InFlight()->op, Op::kBroadcast);
  EXPECT_EQ(s->InFlight()->peer, 0);
  EXPECT_EQ(DescribeRecord(*s->InFlight()), "broadcast#2 float32 x10 (40 B) root 0 @initialize [started]");
}

TEST_F(TraceTest, RingKeepsTheNewestCapacityRecords) {
  auto w = TraceWriter::Create(path_, {0, 2, 0, "h", "gloo"}, 16);
  ASSERT_TRUE(w.ok());
  for (uint64_t i = 1; i <= 40; ++i) (*w)->Complete((*w)->Begin(AllReduceInfo(i)));
  auto s = ReadTrace(path_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->next_index, 40u);
  ASSERT_EQ(s->records.size(), 16u);
  EXPECT_EQ(s->records.front().seq, 25u);
  EXPECT_EQ(s->records.back().seq, 40u);
  EXPECT_EQ(s->torn, 0u);
}

TEST_F(TraceTest, AWindowReadKeepsAnOlderCallStillInFlight) {
  auto w = TraceWriter::Create(path_, {0, 2, 0, "h", "gloo"}, 64);
  ASSERT_TRUE(w.ok());
  uint64_t stuck = (*w)->Begin(AllReduceInfo(1, "isend"));  // never completes
  for (uint64_t i = 2; i <= 30; ++i) (*w)->Complete((*w)->Begin(AllReduceInfo(i)));
  auto s = ReadTrace(path_, 8);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->records.size(), 9u) << "the window of 8, and the older call in flight before it";
  EXPECT_EQ(s->records.front().index, stuck);
  EXPECT_EQ(s->records.back().seq, 30u);
  ASSERT_NE(s->InFlight(), nullptr);
  EXPECT_EQ(s->InFlight()->callsite, "isend");
  (*w)->Complete(stuck);
  s = ReadTrace(path_, 8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->records.size(), 8u);
  EXPECT_EQ(s->InFlight(), nullptr);
}

// The reader remembers which older records it saw ended and skips them later; each call still in
// flight below the window must be found all the same, newest first, as the ring moves on.
TEST_F(TraceTest, AReaderFindsEachOlderCallInFlightAsTheRingMoves) {
  auto w = TraceWriter::Create(path_, {0, 2, 0, "h", "gloo"}, 64);
  ASSERT_TRUE(w.ok());
  TraceReader reader(path_);
  uint64_t low = (*w)->Begin(AllReduceInfo(1, "low"));
  for (uint64_t i = 2; i <= 10; ++i) (*w)->Complete((*w)->Begin(AllReduceInfo(i)));
  uint64_t high = (*w)->Begin(AllReduceInfo(11, "high"));
  for (uint64_t i = 12; i <= 30; ++i) (*w)->Complete((*w)->Begin(AllReduceInfo(i)));
  auto s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  ASSERT_NE(s->InFlight(), nullptr);
  EXPECT_EQ(s->InFlight()->index, high);
  // The newer one ends and more records come: the older one, below the stretch seen ended, is next.
  (*w)->Complete(high);
  for (uint64_t i = 31; i <= 40; ++i) (*w)->Complete((*w)->Begin(AllReduceInfo(i)));
  s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  ASSERT_NE(s->InFlight(), nullptr);
  EXPECT_EQ(s->InFlight()->index, low);
  // Both ended: nothing in flight, and still nothing after more records (all skipped or read once).
  (*w)->Complete(low);
  s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->InFlight(), nullptr);
  for (uint64_t i = 41; i <= 50; ++i) (*w)->Complete((*w)->Begin(AllReduceInfo(i)));
  s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->InFlight(), nullptr);
  EXPECT_EQ(s->records.size(), 8u);
  // A call that leaves the window in flight after the stretch was remembered is found.
  uint64_t late = (*w)->Begin(AllReduceInfo(51, "late"));
  for (uint64_t i = 52; i <= 70; ++i) (*w)->Complete((*w)->Begin(AllReduceInfo(i)));
  s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  ASSERT_NE(s->InFlight(), nullptr);
  EXPECT_EQ(s->InFlight()->index, late);
  // The ring laps it (capacity 64): gone, never reported from a stale memory.
  (*w)->Complete(late);
  for (uint64_t i = 71; i <= 200; ++i) (*w)->Complete((*w)->Begin(AllReduceInfo(i)));
  s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->InFlight(), nullptr);
}

// A second process of the rank writes its trace at the same path while a watcher maps the first:
// the watcher moves to the new file and no file is left beside it. (The writer builds the file
// aside and renames it into place, so the mapped file is never truncated to zero under the watcher,
// where touching its pages would raise SIGBUS; that window is microseconds and not tested here.)
TEST_F(TraceTest, ANewWriterAtTheSamePathReplacesTheFileUnderAReader) {
  auto first = TraceWriter::Create(path_, {0, 2, 0, "h", "gloo"}, 4096);
  ASSERT_TRUE(first.ok());
  for (uint64_t i = 1; i <= 5000; ++i) (*first)->Complete((*first)->Begin(AllReduceInfo(i)));
  TraceReader reader(path_);
  auto s = reader.Read(64);
  ASSERT_TRUE(s.ok());
  auto second = TraceWriter::Create(path_, {0, 2, 0, "h", "mpi"}, 16);  // smaller: a truncation would cut the map
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  (*second)->Complete((*second)->Begin(AllReduceInfo(9)));
  for (int i = 0; i < 3 && s.ok() && s->backend != "mpi"; ++i) s = reader.Read(64);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->backend, "mpi");
  ASSERT_EQ(s->records.size(), 1u);
  EXPECT_EQ(s->records[0].seq, 9u);
  // Nothing is left beside the trace.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(TraceTest, AReaderSkipsRecordsThatDidNotChange) {
  auto w = TraceWriter::Create(path_, {0, 2, 0, "h", "gloo"}, 64);
  ASSERT_TRUE(w.ok());
  TraceReader reader(path_);
  uint64_t a = (*w)->Begin(AllReduceInfo(1));
  auto s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->records_unchanged);
  ASSERT_EQ(s->records.size(), 1u);
  // Waiting in the call: only the header moves.
  (*w)->SetStep(3);
  s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->records_unchanged);
  EXPECT_TRUE(s->records.empty());
  EXPECT_EQ(s->step, 3u);
  // The call completes in place: read again.
  (*w)->Complete(a);
  s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->records_unchanged);
  ASSERT_EQ(s->records.size(), 1u);
  EXPECT_EQ(s->records[0].state, RecordState::kCompleted);
  // A new record: read again (the writer's heartbeat moved: read without looking at the path).
  (*w)->Begin(AllReduceInfo(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  (*w)->Heartbeat();
  s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->records_unchanged);
  EXPECT_EQ(s->records.size(), 2u);
  // The file replaced by another (a restarted rank), just after the old writer's last heartbeat:
  // at most one more read of the old file, then the new one is mapped afresh and read whole.
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  (*w)->Heartbeat();
  w->reset();
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  auto w2 = TraceWriter::Create(path_, {0, 2, 0, "h", "mpi"}, 64);
  ASSERT_TRUE(w2.ok());
  (*w2)->Complete((*w2)->Begin(AllReduceInfo(9)));
  s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  if (s->backend != "mpi") s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->records_unchanged);
  EXPECT_EQ(s->backend, "mpi");
  ASSERT_EQ(s->records.size(), 1u);
  EXPECT_EQ(s->records[0].seq, 9u);
}

// A callsite longer than the record's field is kept whole in the callsite table (docs/trace.md,
// "Callsites"): once per distinct text, shared by every record naming it; the field alone (an older
// reader's view) holds its head. Past kMaxCallsiteBytes it is cut, never overflowed.
TEST_F(TraceTest, LongCallsitesAreKeptWholeInTheTable) {
  auto w = TraceWriter::Create(path_, {0, 1, 0, "h", "gloo"}, 16);
  ASSERT_TRUE(w.ok());
  const std::string site = "pretrain_gpt_with_a_long_name_from_a_real_repo.py:1234 (train_step)";
  const std::string other = "another_program_file_with_a_long_descriptive_name.py:77 (evaluate)";
  const std::string huge(5000, 'x');
  (*w)->Begin(AllReduceInfo(1, site.c_str()));
  (*w)->Begin(AllReduceInfo(2, "train.py:9 (main)"));
  (*w)->Begin(AllReduceInfo(3, other.c_str()));
  (*w)->Begin(AllReduceInfo(4, site.c_str()));
  (*w)->Begin(AllReduceInfo(5, huge.c_str()));
  auto s = ReadTrace(path_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->records.size(), 5u);
  EXPECT_EQ(s->records[0].callsite, site);
  EXPECT_EQ(s->records[1].callsite, "train.py:9 (main)");
  EXPECT_EQ(s->records[2].callsite, other);
  EXPECT_EQ(s->records[3].callsite, site);
  EXPECT_EQ(s->records[4].callsite, std::string(kMaxCallsiteBytes, 'x'));
  // The writer's own view (the watchdog's) too.
  auto cur = (*w)->Current();
  ASSERT_TRUE(cur.has_value());
  EXPECT_EQ(cur->record.callsite, std::string(kMaxCallsiteBytes, 'x'));
  // The field alone holds the head, NUL-terminated, as a reader of the field sees it.
  TraceRecord bare;
  std::ifstream f(path_, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  ASSERT_TRUE(ReadRecordConsistent(*reinterpret_cast<const TraceRecordRaw*>(bytes.data() + kTraceHeaderBytes), &bare));
  EXPECT_EQ(bare.callsite, site.substr(0, kCallsiteHeadBytes));
}

TEST_F(TraceTest, AFullCallsiteTableLeavesTheHeadNeverACorruptText) {
  auto w = TraceWriter::Create(path_, {0, 1, 0, "h", "gloo"}, 16);
  ASSERT_TRUE(w.ok());
  // Distinct 1,000-byte callsites until the 64 KiB table is full, then one more.
  int n = kTraceStringBytes / 1001 + 2;
  for (int i = 0; i < n; ++i) {
    std::string site = std::to_string(i) + std::string(999 - std::to_string(i).size(), 'y');
    (*w)->Begin(AllReduceInfo(i + 1, site.c_str()));
  }
  auto s = ReadTrace(path_);
  ASSERT_TRUE(s.ok());
  const auto& last = s->records.back();
  EXPECT_EQ(last.callsite, (std::to_string(n - 1) + std::string(999, 'y')).substr(0, kCallsiteHeadBytes));
  EXPECT_EQ(s->records[s->records.size() - 3].callsite.size(), 999u) << "those that fit are whole";
}

TEST_F(TraceTest, FailureKeepsTheErrorText) {
  auto w = TraceWriter::Create(path_, {0, 2, 0, "h", "gloo"}, 16);
  ASSERT_TRUE(w.ok());
  (*w)->Fail((*w)->Begin(AllReduceInfo(3)), "gloo allreduce: Connection closed by peer [127.0.0.1]:1234");
  auto s = ReadTrace(path_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->records[0].state, RecordState::kFailed);
  EXPECT_EQ(s->last_error, "gloo allreduce: Connection closed by peer [127.0.0.1]:1234");
  EXPECT_EQ(s->InFlight(), nullptr);
}

// A call the library refused before it communicated is taken back: readers (a TraceReader that
// saw it in flight too) leave it out, the last error stays as it was, and nothing counts as torn.
TEST_F(TraceTest, AWithdrawnRecordIsLeftOutByEveryReader) {
  auto w = TraceWriter::Create(path_, {0, 2, 0, "h", "gloo"}, 16);
  ASSERT_TRUE(w.ok());
  TraceReader reader(path_);
  (*w)->Complete((*w)->Begin(AllReduceInfo(1)));
  uint64_t refused = (*w)->Begin(AllReduceInfo(2, "train.py:9 (retry)"));
  auto s = reader.Read(8);
  ASSERT_TRUE(s.ok());
  ASSERT_NE(s->InFlight(), nullptr);
  (*w)->Withdraw(refused);
  (*w)->Complete((*w)->Begin(AllReduceInfo(2)));
  for (auto read : {ReadTrace(path_), reader.Read(8)}) {
    ASSERT_TRUE(read.ok());
    EXPECT_FALSE(read->records_unchanged);
    ASSERT_EQ(read->records.size(), 2u);
    EXPECT_EQ(read->records[1].seq, 2u);
    EXPECT_EQ(read->records[1].callsite, "engine.step");
    EXPECT_EQ(read->InFlight(), nullptr);
    EXPECT_EQ(read->torn, 0u);
    EXPECT_EQ(read->last_error, "");
  }
  EXPECT_EQ(std::string(RecordStateName(RecordState::kWithdrawn)), "withdrawn");
}

// MPI_Wait on a request: the asynchronous record becomes where the rank waits while it waits, and a
// wait that returns with the call unfinished (MPI_Waitany) gives the async flag back; an ended
// record keeps its flags. A reader that saw the record before sees the change.
TEST_F(TraceTest, AWaitedAsyncRecordIsBlockingWhileTheProgramWaitsOnIt) {
  auto w = TraceWriter::Create(path_, {0, 2, 0, "h", "mpi"}, 16);
  ASSERT_TRUE(w.ok());
  TraceReader reader(path_);
  OpInfo info = AllReduceInfo(1, "MPI_Irecv");
  info.op = Op::kRecv;
  info.peer = 1;
  info.async = true;
  uint64_t irecv = (*w)->Begin(info);
  auto before = reader.Read(8);
  ASSERT_TRUE(before.ok());
  ASSERT_NE(before->InFlight(), nullptr);
  EXPECT_TRUE(before->InFlight()->async);
  (*w)->SetWaited(irecv, true);
  auto waiting = reader.Read(8);
  ASSERT_TRUE(waiting.ok());
  EXPECT_FALSE(waiting->records_unchanged);
  ASSERT_NE(waiting->InFlight(), nullptr);
  EXPECT_FALSE(waiting->InFlight()->async);
  EXPECT_EQ(waiting->InFlight()->peer, 1);
  (*w)->SetWaited(irecv, false);
  EXPECT_TRUE(ReadTrace(path_)->InFlight()->async);
  (*w)->Complete(irecv);
  (*w)->SetWaited(irecv, true);
  auto ended = ReadTrace(path_);
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->InFlight(), nullptr);
  EXPECT_TRUE(ended->Last()->async);
  EXPECT_EQ(ended->Last()->state, RecordState::kCompleted);
}

// A writer that died inside a record (odd version) leaves it torn: skipped and counted, never misread.
TEST_F(TraceTest, TornRecordIsSkipped) {
  {
    auto w = TraceWriter::Create(path_, {0, 2, 0, "h", "gloo"}, 16);
    ASSERT_TRUE(w.ok());
    (*w)->Complete((*w)->Begin(AllReduceInfo(1)));
    (*w)->Complete((*w)->Begin(AllReduceInfo(2)));
  }
  std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(kTraceHeaderBytes + kTraceRecordBytes);  // record 1's version
  uint64_t odd = 5;
  f.write(reinterpret_cast<const char*>(&odd), sizeof odd);
  f.close();
  auto s = ReadTrace(path_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->torn, 1u);
  ASSERT_EQ(s->records.size(), 1u);
  EXPECT_EQ(s->records[0].seq, 1u);
}

TEST_F(TraceTest, BadFilesAreNamedErrors) {
  { std::ofstream(path_) << "not a trace at all, but long enough? no"; }
  auto s = ReadTrace(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(path_), std::string::npos);

  {
    auto w = TraceWriter::Create(path_, {0, 1, 0, "h", "gloo"}, 64);
    ASSERT_TRUE(w.ok());
  }
  ASSERT_EQ(::truncate(path_.c_str(), kTraceHeaderBytes + 10 * kTraceRecordBytes), 0);
  s = ReadTrace(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("capacity 64"), std::string::npos) << s.status().message();

  { std::ofstream(path_, std::ios::binary) << std::string(kTraceHeaderBytes, 'D'); }
  s = ReadTrace(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("bad magic"), std::string::npos);
  EXPECT_EQ(ReadTrace(dir_ + "/missing").status().code(), StatusCode::kNotFound);
}

// Another process reads the trace of a rank that is frozen (SIGSTOP) in the middle of a
// collective, then after it was killed: the in-flight record is there both times.
TEST_F(TraceTest, FrozenAndKilledWritersStayReadable) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto w = TraceWriter::Create(path_, {3, 4, 1, "node-b", "gloo"}, 64);
    if (!w.ok()) ::_exit(1);
    for (uint64_t i = 1; i < 10; ++i) (*w)->Complete((*w)->Begin(AllReduceInfo(i)));
    (*w)->Begin({Op::kBarrier, DType::kNone, ReduceOp::kNone, 10, 0, 0, -1, 0, "save_checkpoint"});
    (*w)->SetPhase(Phase::kSaveCheckpoint);
    char c = 'r';
    (void)!::write(ready[1], &c, 1);
    while (true) ::pause();
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  auto s = ReadTrace(path_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->pid, pid);
  EXPECT_EQ(s->rank, 3);
  EXPECT_EQ(s->phase, Phase::kSaveCheckpoint);
  ASSERT_NE(s->InFlight(), nullptr);
  EXPECT_EQ(s->InFlight()->op, Op::kBarrier);
  EXPECT_EQ(s->InFlight()->seq, 10u);
  EXPECT_EQ(s->InFlight()->callsite, "save_checkpoint");

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  s = ReadTrace(path_);
  ASSERT_TRUE(s.ok());
  ASSERT_NE(s->InFlight(), nullptr);
  EXPECT_EQ(s->InFlight()->callsite, "save_checkpoint");
  EXPECT_EQ(s->records.size(), 10u);
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(TraceTest, CurrentFollowsTheCallInFlight) {
  auto w = TraceWriter::Create("", {0, 1, 0, "h", "gloo"}, 16);  // anonymous: no file
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE((*w)->Current().has_value());
  uint64_t i = (*w)->Begin(AllReduceInfo(1));
  ASSERT_TRUE((*w)->Current().has_value());
  EXPECT_EQ((*w)->Current()->record.seq, 1u);
  (*w)->Complete(i);
  EXPECT_FALSE((*w)->Current().has_value());
}

TEST(TypesTest, NamesRoundTrip) {
  for (int i = 1; i <= static_cast<int>(Op::kRendezvous); ++i) {
    auto op = static_cast<Op>(i);
    EXPECT_EQ(ParseOpName(OpName(op)), op);
  }
  EXPECT_FALSE(ParseOpName("allreduce").has_value());
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_STREQ(PhaseName(Phase::kSaveCheckpoint), "save_checkpoint");
}

// A full log-dir file system must not kill the rank later with SIGBUS on a sparse page: the
// blocks are reserved at creation, and the creation fails (ENOSPC) instead. A 64 KiB tmpfs in a
// mount namespace of a child process (root only) is too small for a 4096-record trace.
TEST_F(TraceTest, ANoSpaceFileSystemFailsAtCreationNotAtTheFirstWrite) {
  const int code = dsd::testing::InSmallTmpfs(dir_, "64k", [](const std::string& small) {
    auto w = TraceWriter::Create(small + "/rank-0.trace", {0, 1, 0, "h", "gloo"}, 4096);
    if (w.ok()) return 1;
    return w.status().message().find("No space") != std::string::npos ? 0 : 3;
  });
  if (code == dsd::testing::kNoNamespace) GTEST_SKIP() << "no root or no mount namespace here";
  EXPECT_EQ(code, 0) << "1: the trace was created sparse on a full file system; 3: another error";
}

}  // namespace
}  // namespace dsd::runtime
