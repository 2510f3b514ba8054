// The streaming scanner: combined logs split per rank, the same events whatever the block size or
// pre-scanner, bounded work on hostile input.
#include "collectors/log_scan.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>

#include "collectors/log_matcher.h"
#include "collectors/log_samples_testing.h"
#include "common/file.h"

namespace dsd::collectors {
namespace {

using diagnosis::LogEvent;

LogScanResult Scan(const std::string& text, LogScanOptions o = {}, int rank = -1) {
  LogScanner s(o);
  s.AddText(text, {"job.log", rank, ""});
  return s.Finish();
}

const LogEvent* Find(const LogScanResult& r, const std::string& kind, int rank = -2) {
  for (const LogEvent& e : r.events)
    if (e.kind == kind && (rank == -2 || e.rank == rank)) return &e;
  return nullptr;
}

// A pipe whose writer stays silent while keeping it open is said once (analyze would otherwise wait
// without a word); its lines are still read when they come. A regular file is never "idle".
TEST(LogScanTest, AnInputThatStaysOpenAndSilentIsSaidOnce) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  std::thread writer([w = p[1]] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const char line[] = "[rank1]: RuntimeError: NCCL error in: boom, unhandled system error\n";
    (void)!::write(w, line, sizeof line - 1);
    ::close(w);
  });
  std::vector<std::string> idle;
  LogScanOptions o;
  o.idle_notice = std::chrono::milliseconds(100);
  o.on_idle = [&](const std::string& name) { idle.push_back(name); };
  LogScanner scanner(o);
  ASSERT_TRUE(scanner.AddFd(p[0], {"-", -1, "<stdin>"}).ok());
  writer.join();
  ::close(p[0]);
  EXPECT_EQ(idle, std::vector<std::string>{"<stdin>"});
  EXPECT_FALSE(scanner.Finish().events.empty()) << "the line that came later is read";
  const std::string file = ::testing::TempDir() + "/dsd_idle_" + std::to_string(::getpid()) + ".log";
  ASSERT_TRUE(WriteFileAtomic(file, "quiet\n").ok());
  LogScanner regular(o);
  ASSERT_TRUE(regular.Add({file, -1, ""}).ok());
  EXPECT_EQ(idle.size(), 1u) << "a regular file is read, never waited for";
  ::unlink(file.c_str());
}

TEST(LogScanTest, TorchrunCombinedLogIsSplitPerRankWithFileLines) {
  auto r = Scan(
      "[2024-05-01 12:00:00,001] torch.distributed.run: [WARNING] Setting OMP_NUM_THREADS\n"
      "[rank0]:step 1\n"
      "[rank1]: Traceback (most recent call last):\n"
      "[rank0]:step 2\n"
      "[rank1]:   File \"/w/train.py\", line 40, in <module>\n"
      "[rank1]:     dist.all_reduce(t)\n"
      "[rank1]:   File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1536, in "
      "all_reduce\n"
      "[rank0]:step 3\n"
      "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n");
  const LogEvent* tb = Find(r, "python_traceback");
  ASSERT_TRUE(tb);
  EXPECT_EQ(tb->rank, 1);
  EXPECT_EQ(tb->file, "job.log");
  EXPECT_EQ(tb->line, 3);
  EXPECT_EQ(tb->location, "train.py:40");
  EXPECT_EQ(tb->collective, "all_reduce");
  EXPECT_EQ(tb->code, "OUT_OF_MEMORY");
  EXPECT_EQ(r.world_size, 2);
}

TEST(LogScanTest, PdshHostsAndNcclPidsResolveToRanks) {
  // DeepSpeed via pdsh: no rank prefix; NCCL INFO "comm … rank R nranks N" names each pid's rank.
  std::string log;
  for (int node = 0; node < 2; ++node)
    for (int local = 0; local < 2; ++local) {
      int rank = node * 2 + local, pid = 1000 + rank;
      log += "worker-" + std::to_string(node) + ": worker-" + std::to_string(node) + ":" + std::to_string(pid) + ":" +
             std::to_string(pid + 50) + " [" + std::to_string(local) + "] NCCL INFO comm 0x55d1 rank " +
             std::to_string(rank) + " nranks 4 cudaDev " + std::to_string(local) + " busId 1000 - Init COMPLETE\n";
    }
  log += "worker-1: \n";
  log +=
      "worker-1: worker-1:1003:1090 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
      "10.0.0.2<5000> "
      "with error 12, opcode 0, len 0, vendor err 129 (Recv)\n";
  log +=
      "worker-0: worker-0:1000:1060 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
      "worker-1<4111>\n";
  auto r = Scan(log);
  EXPECT_EQ(r.world_size, 4);
  const LogEvent* ib = Find(r, "nccl_ib_retry_exceeded");
  ASSERT_TRUE(ib);
  EXPECT_EQ(ib->rank, 3);
  EXPECT_EQ(ib->host, "worker-1");
  EXPECT_EQ(ib->pid, 1003);
  EXPECT_EQ(ib->line, 6);
  const LogEvent* closed = Find(r, "nccl_socket_closed");
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->rank, 0);
  EXPECT_TRUE(closed->consequence);
}

// The peer a line names is its culprit: an address NCCL said a rank uses, a host the prefixes
// named, a rank number; the printer stays the event's rank (its evidence).
TEST(LogScanTest, APeerAddressOrHostMapsToItsRankAndNode) {
  std::string log;
  for (int node = 0; node < 3; ++node) {
    const std::string host = "gpu-" + std::to_string(node), pid = std::to_string(2000 + node);
    log += host + ":" + pid + ":" + pid + " [0] NCCL INFO Bootstrap : Using ens5:10.1.0." + std::to_string(node + 11) +
           "<0>\n";
    log += host + ":" + pid + ":" + pid + " [0] NCCL INFO comm 0x55d1 rank " + std::to_string(node) +
           " nranks 3 cudaDev 0 busId 1000 - Init COMPLETE\n";
  }
  log +=
      "gpu-0:2000:2090 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
      "10.1.0.13<41533>\n";
  log +=
      "gpu-1:2001:2091 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer "
      "gpu-2.cluster.local<41533>\n";
  log += "gpu-1:2001:2091 [0] proxy.cc:1234 NCCL WARN [Service thread] Proxy Call to rank 2 failed (Connect)\n";
  log +=
      "gpu-0:2000:2090 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.9.9.9<45763> failed : "
      "Connection timed out\n";
  auto r = Scan(log);
  std::vector<const LogEvent*> closed;
  for (const LogEvent& e : r.events)
    if (e.kind == "nccl_socket_closed") closed.push_back(&e);
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_EQ(closed[0]->rank, 0);  // the printer
  EXPECT_EQ(closed[0]->subject_rank, 2);
  EXPECT_EQ(closed[0]->Field("peer_host"), "gpu-2");
  EXPECT_EQ(closed[1]->rank, 1);
  EXPECT_EQ(closed[1]->subject_rank, 2);  // by its short host name
  const LogEvent* proxy = Find(r, "nccl_proxy_failed");
  ASSERT_TRUE(proxy);
  EXPECT_EQ(proxy->subject_rank, 2);
  // An address no rank said it uses: the finding names it, no rank is made up.
  const LogEvent* connect = Find(r, "nccl_connect_failed");
  ASSERT_TRUE(connect);
  EXPECT_EQ(connect->subject_rank, -1);
  EXPECT_EQ(connect->Field("peer_host"), "10.9.9.9");
  EXPECT_EQ(connect->Field("peer_ranks"), "");
}

TEST(LogScanTest, SrunNamesTheTaskThatIsTheRank) {
  auto r = Scan("srun: error: gpu-3: task 5: Exited with exit code 1\nsrun: error: gpu-3: tasks 6-7: Killed\n");
  std::vector<int> subjects;
  for (const LogEvent& e : r.events) subjects.push_back(e.subject_rank);
  EXPECT_EQ(subjects, (std::vector<int>{5, -1}));
}

TEST(LogScanTest, MpirunTagsInsideALineAreDropped) {
  // mpirun --tag-output tags each write, so a traceback line can carry the tag several times (seen
  // in this project's real mpirun e2e runs).
  auto r = Scan(
      "[1,2]<stderr>:Traceback (most recent call last):\n"
      "[1,2]<stderr>:  File \"/w/t.py\", line 20, in <module>\n"
      "[1,2]<stderr>:    [1,2]<stderr>:buf = bytearray(10**15)[1,2]<stderr>:\n"
      "[1,2]<stderr>: [1,2]<stderr>:^[1,2]<stderr>:^[1,2]<stderr>:\n"
      "[1,2]<stdout>:rank 2 step 1 done\n"  // stdout reaches mpirun on its own pipe, out of order
      "[1,2]<stderr>:MemoryError[1,2]<stderr>:\n");
  const LogEvent* tb = Find(r, "python_traceback");
  ASSERT_TRUE(tb);
  EXPECT_EQ(tb->rank, 2);
  EXPECT_EQ(tb->code, "OUT_OF_MEMORY");
  EXPECT_EQ(tb->location, "t.py:20");
  EXPECT_EQ(tb->text, "MemoryError");
}

TEST(LogScanTest, MpirunWritesOfDifferentRanksOnOneLineGoToTheirOwnRanks) {
  // A real mpirun log (the e2e test's, one run in three under load): rank 0 printed without a
  // newline first, so rank 2's traceback header lands on the same line, and rank 0's newline
  // comes two lines later behind its own tag.
  auto r = Scan(
      "[1,1]<stdout>:rank 1 step 1 done\n"
      "[1,0]<stdout>:rank 0 step 1 done[1,2]<stderr>:Traceback (most recent call last):\n"
      "[1,2]<stderr>:  File \"/w/torch_oom_rank.py\", line 20, in <module>\n"
      "[1,0]<stdout>:\n"
      "[1,2]<stderr>:    buf = bytearray(10**15)\n"
      "[1,2]<stderr>:          [1,2]<stderr>:^^^^[1,2]<stderr>:^^^\n"
      "[1,2]<stderr>:MemoryError[1,2]<stderr>:\n"
      "[1,0]<stderr>:Traceback (most recent call last):\n"
      "[1,0]<stderr>:  File \"/w/torch_oom_rank.py\", line 21, in <module>\n"
      "[1,0]<stderr>:    [1,0]<stderr>:dist.all_reduce(t)[1,0]<stderr>:\n"
      "[1,0]<stderr>:  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1541, "
      "in all_reduce\n"
      "[1,0]<stderr>:    work.wait()\n"
      "[1,0]<stderr>:RuntimeError: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer "
      "[127.0.0.1]:22412\n");
  const LogEvent* oom = nullptr;
  for (const auto& e : r.events) {
    EXPECT_EQ(e.text.find("<stderr>"), std::string::npos) << e.text;
    EXPECT_EQ(e.text.find("step 1 done"), std::string::npos) << e.text;
    if (e.code == "OUT_OF_MEMORY") oom = &e;
  }
  ASSERT_TRUE(oom);
  EXPECT_EQ(oom->rank, 2);
  EXPECT_EQ(oom->line, 2);  // the line its traceback began on
  EXPECT_EQ(oom->location, "torch_oom_rank.py:20");
  EXPECT_EQ(oom->text, "MemoryError");
  bool rank0 = false;
  for (const auto& e : r.events)
    if (e.kind == "python_traceback" && e.rank == 0) {
      rank0 = true;
      EXPECT_EQ(e.collective, "all_reduce");
      EXPECT_EQ(e.location, "torch_oom_rank.py:21");
    }
  EXPECT_TRUE(rank0);
}

TEST(LogScanTest, AnMpirunLineNeverEndedIsTakenAsItIs) {
  // A progress bar redrawn with '\r' never ends its line: rank 0's traceback, many lines on, is not
  // glued to it. (The first line is one the scanner looks at: it holds an NCCL warning.)
  std::string log =
      "[1,0]<stderr>: 45%|####5     | 45/100\r 46%|####6     | 46/100[1,1]<stderr>:h1:7:8 [0] NCCL WARN "
      "socketProgress: Connection closed by remote peer\n";
  for (int i = 0; i < 200; ++i) log += "[1,1]<stdout>:loss 0." + std::to_string(i) + "\n";
  log +=
      "[1,0]<stderr>:Traceback (most recent call last):\n"
      "[1,0]<stderr>:  File \"t.py\", line 3, in <module>\n"
      "[1,0]<stderr>:RuntimeError: CUDA error: an illegal memory access was encountered\n";
  auto r = Scan(log);
  const LogEvent* tb = Find(r, "python_traceback");
  ASSERT_TRUE(tb);
  EXPECT_EQ(tb->rank, 0);
  EXPECT_EQ(tb->code, "CUDA_ERROR");
  EXPECT_EQ(tb->line, 202);
  const LogEvent* closed = Find(r, "nccl_socket_closed");
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->rank, 1);
  EXPECT_EQ(closed->line, 1);
}

TEST(LogScanTest, AnMpirunPieceKeepsItsOwnPrefixesAndALineOpenAtTheEndIsRead) {
  // Rank 1's NCCL warning follows rank 0's unfinished line and never ends its own before the log
  // does: it is still read, with the host and pid of its own NCCL prefix (not rank 0's).
  auto r = Scan(
      "[1,0]<stdout>:n0:11:12 [0] NCCL INFO Bootstrap : Using eth0[1,1]<stderr>:n1:21:22 [1] NCCL WARN "
      "socketProgress: Connection closed by remote peer[1,0]<stdout>:\n");
  const LogEvent* closed = Find(r, "nccl_socket_closed");
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->rank, 1);
  EXPECT_EQ(closed->host, "n1");
  EXPECT_EQ(closed->pid, 21);
  EXPECT_EQ(closed->line, 1);
}

TEST(LogScanTest, MpirunTimestampsBeforeTagsInsideALineAreNotText) {
  // --timestamp-output puts a ctime before every tag, inside a line too.
  auto r = Scan(
      "Fri Dec  4 23:55:01 2026[1,0]<stdout>:step 1 doneFri Dec  4 23:55:01 2026[1,2]<stderr>:Traceback (most "
      "recent call last):\n"
      "Fri Dec  4 23:55:01 2026[1,2]<stderr>:  File \"t.py\", line 20, in <module>\n"
      "Fri Dec  4 23:55:01 2026[1,2]<stderr>:MemoryErrorFri Dec  4 23:55:01 2026[1,2]<stderr>:\n");
  const LogEvent* tb = Find(r, "python_traceback");
  ASSERT_TRUE(tb);
  EXPECT_EQ(tb->rank, 2);
  EXPECT_EQ(tb->code, "OUT_OF_MEMORY");
  EXPECT_EQ(tb->text, "MemoryError");
  EXPECT_EQ(tb->line, 1);
}

TEST(LogScanTest, UnattributedLinesAreKeptAsJobLevelEvidence) {
  auto r = Scan("loading data\nKilled\n");
  const LogEvent* k = Find(r, "shell_killed");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->rank, -1);
  EXPECT_EQ(k->line, 2);
  EXPECT_EQ(k->code, "OUT_OF_MEMORY");
}

TEST(LogScanTest, ProgressBarThenKilledAndGluedTraceback) {
  // A host OOM leaves only "Killed" after a tqdm bar (https://github.com/castorini/hedwig/issues/70).
  auto r = Scan("100%|#####| 10/10 [00:01<00:00, 9.1it/s]\r 20%|##   | 2/10 [00:00<00:01]\rKilled\n", {}, 2);
  const LogEvent* k = Find(r, "shell_killed");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->rank, 2);
  EXPECT_EQ(k->line, 1);
  auto g = Scan(
      "Epoch 1:  45%|####5     | 45/100 [00:10<00:12,  4.41it/s]Traceback (most recent call last):\n"
      "  File \"t.py\", line 3, in <module>\n"
      "RuntimeError: CUDA error: an illegal memory access was encountered\n",
      {}, 0);
  const LogEvent* tb = Find(g, "python_traceback");
  ASSERT_TRUE(tb);
  EXPECT_EQ(tb->code, "CUDA_ERROR");
  EXPECT_EQ(tb->location, "t.py:3");
}

// A log with everything in it, to compare configurations.
std::string MixedLog(int lines, unsigned seed) {
  std::mt19937 rng(seed);
  const char* noise[] = {"step %d loss 0.25", "[rank%d]:step loss 0.1",
                         "worker-1: [INFO] [logging.py:96:log_dist] step=%d",
                         "Epoch 1:  45%%|####5 | 45/100 [00:10<00:12,  4.41it/s]"};
  const char* events[] = {
      "[rank%d]: Traceback (most recent call last):\n[rank%d]:   File \"/w/a.py\", line 9, in <module>\n[rank%d]: "
      "RuntimeError: Socket Timeout",
      "[rank%d]:[E ProcessGroupNCCL.cpp:737] [Rank %d] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum=%d, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800212 milliseconds before timing out.",
      "[rank%d]:node1:123%d:1300 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.%d<43123> "
      "failed : Connection refused",
      "[rank%d]: terminate called after throwing an instance of 'c10::Error'\n[rank%d]:   what():  CUDA error: "
      "device-side assert triggered %d"};
  std::string out;
  char buf[512];
  for (int i = 0; i < lines; ++i) {
    int r = rng() % 4;
    if (rng() % 50 == 0)
      std::snprintf(buf, sizeof buf, events[rng() % 4], r, r, r);
    else
      std::snprintf(buf, sizeof buf, noise[rng() % 4], i);
    out += buf;
    out += '\n';
  }
  return out;
}

std::vector<std::string> Keys(const LogScanResult& r) {
  std::vector<std::string> k;
  for (const LogEvent& e : r.events)
    k.push_back(std::to_string(e.rank) + " " + std::to_string(e.line) + " " + e.kind + " " + e.code + " " + e.summary);
  return k;
}

TEST(LogScanTest, SameEventsWhateverTheBlockSizeAndPreScanner) {
  std::string log = MixedLog(3000, 7);
  LogScanOptions big;
  auto reference = Keys(Scan(log, big));
  ASSERT_GT(reference.size(), 40u);
  LogScanOptions tiny;
  tiny.block_bytes = 64;  // lines cross blocks all the time
  EXPECT_EQ(Keys(Scan(log, tiny)), reference);
  for (const char* engine : {"re2", "hyperscan"}) {
    setenv("DSDOCTOR_LOG_SCANNER", engine, 1);
    EXPECT_EQ(Keys(Scan(log, big)), reference) << engine;
    EXPECT_EQ(Keys(Scan(log, tiny)), reference) << engine;
  }
  unsetenv("DSDOCTOR_LOG_SCANNER");
  // Through a pipe, as `analyze -` reads standard input.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::thread writer([&] {
    for (size_t off = 0; off < log.size();)
      off += std::max<ssize_t>(0, write(fds[1], log.data() + off, std::min<size_t>(777, log.size() - off)));
    close(fds[1]);
  });
  LogScanner s;
  ASSERT_TRUE(s.AddFd(fds[0], {"-", -1, "job.log"}).ok());
  writer.join();
  close(fds[0]);
  EXPECT_EQ(Keys(s.Finish()), reference);
}

TEST(LogScanTest, OverlongLinesAreCutAndLineNumbersStayRight) {
  LogScanOptions o;
  o.block_bytes = 1 << 12;
  o.max_line_bytes = 1 << 10;
  std::string huge = "RuntimeError: CUDA error: an illegal memory access was encountered " + std::string(100000, 'x');
  std::string log = "a\n" + huge + "\n" + "b\nKilled\n";
  auto r = Scan(log, o, 0);
  ASSERT_TRUE(Find(r, "cuda_illegal_address"));
  EXPECT_EQ(Find(r, "cuda_illegal_address")->line, 2);
  ASSERT_TRUE(Find(r, "shell_killed"));
  EXPECT_EQ(Find(r, "shell_killed")->line, 4);
  EXPECT_LE(Find(r, "cuda_illegal_address")->text.size(), 1000u);
  // The same through the file reader (its own long-line path).
  char path[] = "/tmp/dsd_scan_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, log.data(), log.size()), static_cast<ssize_t>(log.size()));
  close(fd);
  LogScanner s(o);
  ASSERT_TRUE(s.Add({path, 0, "big.log"}).ok());
  auto f = s.Finish();
  unlink(path);
  ASSERT_TRUE(Find(f, "shell_killed"));
  EXPECT_EQ(Find(f, "shell_killed")->line, 4);
  EXPECT_EQ(Find(f, "cuda_illegal_address")->line, 2);
  EXPECT_EQ(f.lines, 4u);
}

TEST(LogScanTest, BinaryAndBadUtf8NeverCrashAndPrintSafely) {
  std::string junk;
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) junk += static_cast<char>(rng());
  junk += "\nRuntimeError: CUDA error: device-side assert triggered \xff\xfe\xc3\n";
  auto r = Scan(junk);
  const LogEvent* e = Find(r, "cuda_device_assert");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->text.find('\xff'), std::string::npos);
  EXPECT_NE(e->text.find("??"), std::string::npos);
}

TEST(LogScanTest, Utf16LogsAreNamedWithTheConversion) {
  std::string text = "\xff\xfe";
  for (char c : std::string("RuntimeError: CUDA error: an illegal memory access was encountered\n"))
    text += c, text += '\0';
  auto r = Scan(text);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("iconv -f UTF-16"), std::string::npos);
}

TEST(LogScanTest, LineNumbersAndOffsetsCountEmptyLinesAndLastNewlines) {
  std::string log = "a\n\nKilled\n";
  auto r = Scan(log, {}, 0);
  ASSERT_TRUE(Find(r, "shell_killed"));
  EXPECT_EQ(Find(r, "shell_killed")->line, 3);
  EXPECT_EQ(Find(r, "shell_killed")->offset, 3);
  EXPECT_EQ(r.lines, 3u);
  // A pipe that delivers an empty line on its own, then more.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::thread writer([&] {
    for (const char* piece : {"a\n", "\n", "\n", "b\nKil", "led\n"}) {
      ASSERT_GT(write(fds[1], piece, strlen(piece)), 0);
      usleep(2000);
    }
    close(fds[1]);
  });
  LogScanner s;
  ASSERT_TRUE(s.AddFd(fds[0], {"-", 0, ""}).ok());
  writer.join();
  close(fds[0]);
  auto p = s.Finish();
  ASSERT_TRUE(Find(p, "shell_killed"));
  EXPECT_EQ(Find(p, "shell_killed")->line, 5);
  EXPECT_EQ(Find(p, "shell_killed")->offset, 6);
}

TEST(LogScanTest, TheEndOfAnOverlongProgressLineIsClassifiedAndOffsetsStayRight) {
  // A tqdm bar written to a file is one line of '\r'-separated updates; the OOM kill is at its end.
  std::string bar;
  while (bar.size() < 300000) bar += " 45%|####5     | 45/100 [00:10<00:12,  4.41it/s]\r";
  std::string log =
      "[rank3]:" + bar + "Killed\n[rank1]:RuntimeError: CUDA error: an illegal memory access was encountered\n";
  char path[] = "/tmp/dsd_long_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, log.data(), log.size()), static_cast<ssize_t>(log.size()));
  close(fd);
  LogScanOptions o;
  o.block_bytes = 1 << 16;  // the line spans several reads
  for (bool from_file : {true, false}) {
    LogScanner s(o);
    if (from_file)
      ASSERT_TRUE(s.Add({path, -1, "long.log"}).ok());
    else
      s.AddText(log, {"long.log", -1, ""});
    auto r = s.Finish();
    const LogEvent* k = Find(r, "shell_killed");
    ASSERT_TRUE(k) << from_file;
    EXPECT_EQ(k->rank, 3);
    EXPECT_EQ(k->line, 1);
    const LogEvent* cuda = Find(r, "cuda_illegal_address");
    ASSERT_TRUE(cuda) << from_file;
    EXPECT_EQ(cuda->line, 2);
    EXPECT_EQ(cuda->offset, static_cast<int64_t>(log.find("[rank1]:"))) << from_file;
  }
  unlink(path);
}

// Lines over max_line_bytes (64 KiB) inside a traceback: a huge source line keeps the traceback
// going, and an exception whose message is a huge repr keeps its type and the cause at its end.
TEST(LogScanTest, ATracebackWithOverlongLinesKeepsTheRealException) {
  const std::string huge(100000, 'x');
  const std::string exception =
      "[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error";
  const std::string start =
      "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"train.py\", line 10, in <module>\n"
      "[rank1]:     dist.all_reduce(t)\n";
  const std::string long_source_line = start + "[rank1]:     " + huge + "\n" + exception + "\n";
  const std::string long_message = start + "[rank1]: torch.distributed.DistBackendError: " + huge +
                                   " NCCL error in: ProcessGroupNCCL.cpp:1970, "
                                   "unhandled system error\n";
  for (const std::string& log : {long_source_line, long_message}) {
    char path[] = "/tmp/dsd_tb_XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, log.data(), log.size()), static_cast<ssize_t>(log.size()));
    close(fd);
    for (bool from_file : {true, false}) {
      LogScanner s{LogScanOptions{}};
      if (from_file)
        ASSERT_TRUE(s.Add({path, -1, "tb.log"}).ok());
      else
        s.AddText(log, {"tb.log", -1, ""});
      auto r = s.Finish();
      const LogEvent* e = Find(r, "python_traceback");
      ASSERT_TRUE(e) << from_file;
      EXPECT_EQ(e->code, "NCCL_ERROR") << from_file << " " << e->summary;
      EXPECT_EQ(e->rank, 1);
      EXPECT_EQ(e->line, 1);
      EXPECT_NE(e->summary.find("DistBackendError"), std::string::npos) << e->summary;
      EXPECT_NE(e->summary.find("unhandled system error"), std::string::npos) << e->summary;
      EXPECT_NE(e->summary.find("(at train.py:10)"), std::string::npos) << e->summary;
      EXPECT_EQ(r.lines, static_cast<uint64_t>(std::count(log.begin(), log.end(), '\n')));
    }
    unlink(path);
  }
}

TEST(LogScanTest, UnprefixedWatchdogLinesKeepTheirOwnRanks) {
  // torch < 2.2 without launcher prefixes: every rank's line in one stream.
  auto r = Scan(
      "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, "
      "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800212 milliseconds before timing out.\n"
      "[E ProcessGroupNCCL.cpp:737] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, "
      "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800214 milliseconds before timing out.\n");
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].rank, 1);
  EXPECT_EQ(r.events[1].rank, 2);
}

TEST(LogScanTest, TeeLocalRanksResolveThroughTheirNcclLines) {
  // torchrun --tee on node 1 of 2: [default0]: lines, whose NCCL lines name host, pid and rank.
  auto r = Scan(
      "[default0]:node1:500:510 [0] NCCL INFO comm 0x1 rank 2 nranks 4 cudaDev 0 busId 1000 - Init COMPLETE\n"
      "[default1]:node1:501:511 [1] NCCL INFO comm 0x2 rank 3 nranks 4 cudaDev 1 busId 2000 - Init COMPLETE\n"
      "[default1]:Traceback (most recent call last):\n"
      "[default1]:  File \"/w/t.py\", line 5, in <module>\n"
      "[default1]:MemoryError\n");
  const LogEvent* tb = Find(r, "python_traceback");
  ASSERT_TRUE(tb);
  EXPECT_EQ(tb->rank, 3);
}

TEST(LogScanTest, RepeatedLinesAreCountedNotKept) {
  std::string log;
  for (int i = 0; i < 1000; ++i) log += "ConnectionRefusedError: [Errno 111] Connection refused\n";
  LogScanOptions o;
  o.max_events_per_kind = 5;
  auto r = Scan(log, o, 0);
  EXPECT_EQ(r.events.size(), 5u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("995"), std::string::npos);
}

TEST(LogScanTest, MissingFileIsNamed) {
  LogScanner s;
  Status st = s.Add({"/nonexistent/job.log", -1, ""});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/job.log"), std::string::npos);
}

// A paste copied from a terminal 100 columns wide: its records read as if whole, with the line
// numbers of the paste, and the output says the paste was rejoined.
TEST(LogScanTest, ATerminalWrappedPasteReadsAsTheLogItWas) {
  const std::string log = "[default0]:step 1 loss 2.31\n" + log_samples::TorchWatchdogTimeoutLine(1, "1800012") +
                          log_samples::TorchWatchdogTimeoutLine(2, "1800015") +
                          log_samples::TorchWatchdogTimeoutLine(3, "1800020");
  std::string folded;
  std::vector<std::string> physical;
  for (size_t pos = 0; pos < log.size();) {
    size_t nl = log.find('\n', pos);
    for (size_t at = pos; at < nl; at += 100) physical.push_back(log.substr(at, std::min<size_t>(100, nl - at)));
    pos = nl + 1;
  }
  for (const std::string& line : physical) folded += line + "\n";
  LogScanResult whole = Scan(log), pasted = Scan(folded);
  auto kinds = [](const LogScanResult& r) {
    std::vector<std::pair<std::string, int>> out;
    for (const LogEvent& e : r.events) out.emplace_back(e.kind, e.rank);
    return out;
  };
  ASSERT_FALSE(whole.events.empty());
  EXPECT_EQ(kinds(pasted), kinds(whole));
  for (const LogEvent& e : pasted.events) {
    ASSERT_GE(e.line, 1);
    ASSERT_LE(e.line, static_cast<int>(physical.size()));
    EXPECT_EQ(physical[e.line - 1].substr(0, 7), "[rank" + std::to_string(e.rank) + "]") << e.line;
    EXPECT_EQ(folded.substr(e.offset, 8), physical[e.line - 1].substr(0, 8));
  }
  bool said = false;
  for (const std::string& w : pasted.warnings) said |= w.find("hard-wrapped at 100 columns") != std::string::npos;
  EXPECT_TRUE(said);
  for (const std::string& w : whole.warnings) EXPECT_EQ(w.find("hard-wrapped"), std::string::npos) << w;
}

// Container logs as a node keeps them: Docker's JSON records and CRI's tagged lines. The traceback
// spread over records is one exception of rank 1, and the record's stream keeps stdout apart.
TEST(LogScanTest, ContainerRuntimeLogsReadAsTheProgramsLines) {
  const std::vector<std::string> lines = {
      "[rank1]:Traceback (most recent call last):",
      "[rank1]:  File \"/home/user/train.py\", line 42, in <module>",
      "[rank1]:    dist.all_reduce(t)",
      "[rank1]:torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
      "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
  };
  std::string docker, cri;
  for (const std::string& l : lines) {
    std::string escaped;
    for (char c : l) {
      if (c == '"')
        escaped += "\\\"";
      else if (c == '<')
        escaped += "\\u003c";
      else if (c == '>')
        escaped += "\\u003e";
      else
        escaped += c;
    }
    docker += "{\"log\":\"" + escaped + "\\n\",\"stream\":\"stderr\",\"time\":\"2024-05-01T12:30:00.5Z\"}\n";
    docker += "{\"log\":\"step 7 loss 2.31\\n\",\"stream\":\"stdout\",\"time\":\"2024-05-01T12:30:00.6Z\"}\n";
    cri += "2024-05-01T12:30:00.5Z stderr F " + l + "\n";
    cri += "2024-05-01T12:30:00.6Z stdout F step 7 loss 2.31\n";
  }
  for (const std::string& text : {docker, cri}) {
    LogScanResult r = Scan(text);
    const LogEvent* e = Find(r, "python_traceback");
    ASSERT_NE(e, nullptr) << text;
    EXPECT_EQ(e->rank, 1);
    EXPECT_EQ(e->line, 1);
    EXPECT_EQ(e->location, "train.py:42");
    EXPECT_NE(e->summary.find("DistBackendError"), std::string::npos) << e->summary;
    EXPECT_GT(e->time_ns, 0);
  }
}

// A file of JSON records is decoded before the pre-scan: a line whose pattern needs '<' (escaped
// \u003c by Go's encoder) is found, and a record holding a whole traceback (Cloud Logging's
// textPayload) is read as its lines, all named by the record's line.
TEST(LogScanTest, JsonRecordsAreDecodedBeforeThePreScan) {
  std::string text =
      R"({"log":"node-2:812:901 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2\u003c0\u003e\n","stream":"stdout","time":"2024-05-01T12:29:59Z"})"
      "\n"
      R"({"log":"[rank1]:socketStartConnect: Connect to 10.0.0.3\u003c43215\u003e failed : Connection refused\n","stream":"stderr","time":"2024-05-01T12:30:00Z"})"
      "\n"
      R"({"textPayload":"Traceback (most recent call last):\n  File \"/w/train.py\", line 9, in \u003cmodule\u003e\n    main()\nRuntimeError: CUDA error: an illegal memory access was encountered\n","resource":{"labels":{"pod_name":"trainer-0"}},"timestamp":"2024-05-01T12:30:01Z"})"
      "\n";
  LogScanResult r = Scan(text);
  const LogEvent* connect = Find(r, "nccl_connect_failed");
  ASSERT_NE(connect, nullptr) << r.events.size();
  EXPECT_EQ(connect->rank, 1);
  EXPECT_EQ(connect->line, 2);
  const LogEvent* tb = Find(r, "python_traceback");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->line, 3);
  EXPECT_EQ(tb->location, "train.py:9");
  EXPECT_EQ(tb->host, "trainer-0");
  EXPECT_NE(tb->summary.find("illegal memory access"), std::string::npos) << tb->summary;
}

}  // namespace
}  // namespace dsd::collectors
