#include "collectors/log_classifier.h"

#include <gtest/gtest.h>

namespace dsd::collectors {
namespace {

std::vector<diagnosis::LogEvent> Classify(const std::string& text, int rank = 3) { return ClassifyLog(rank, text); }

TEST(LogClassifierTest, PythonTracebackNamesTheCollectiveAndTheProgramLine) {
  // Real output of a torch 1.13 gloo job whose rank skipped a barrier (tests/e2e/torch_skip_barrier.py).
  auto ev = Classify(
      "rank 0 step 2 done\n"
      "Traceback (most recent call last):\n"
      "  File \"/tmp/pt/skip_barrier.py\", line 17, in <module>\n"
      "    main()\n"
      "  File \"/tmp/pt/skip_barrier.py\", line 14, in main\n"
      "    dist.barrier()\n"
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 3152, in barrier\n"
      "    work.wait()\n"
      "RuntimeError: [./gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 8000ms for recv operation to "
      "complete\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "python_traceback");
  EXPECT_EQ(ev[0].rank, 3);
  EXPECT_EQ(ev[0].line, 2);
  EXPECT_EQ(ev[0].collective, "barrier");
  EXPECT_EQ(ev[0].location, "skip_barrier.py:14");
  EXPECT_NE(ev[0].summary.find("RuntimeError"), std::string::npos);
  EXPECT_NE(ev[0].remedy.find("barrier()"), std::string::npos);
}

// torch >= 2.2's excepthook puts "[rank<N>]: " before every line of an uncaught exception, in the
// rank's own output (torch 2.15, a DeepSpeed program's ValueError): the traceback reads as without it.
TEST(LogClassifierTest, Torch2RankPrefixedTracebackIsTheTraceback) {
  auto ev = Classify(
      "[rank1]: Traceback (most recent call last):\n"
      "[rank1]:   File \"/job/ds_train.py\", line 57, in <module>\n"
      "[rank1]:     main()\n"
      "[rank1]:   File \"/job/ds_train.py\", line 23, in batch\n"
      "[rank1]:     raise ValueError(\"corrupt sample in shard %d\" % rank)\n"
      "[rank1]: ValueError: corrupt sample in shard 1\n",
      1);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "python_traceback");
  EXPECT_EQ(ev[0].line, 1);
  EXPECT_EQ(ev[0].location, "ds_train.py:23");
  EXPECT_NE(ev[0].summary.find("Python exception: ValueError: corrupt sample in shard 1 (at ds_train.py:23)"),
            std::string::npos)
      << ev[0].summary;
}

// An unbuffered Python writes a source line's indent and text apart, and mpirun --tag-output tags
// each read: the text can land at column 0 on a line of its own (seen when the machine is loaded).
// It is the source line, not the exception; a frame with no source line before the exception
// still gives the exception.
TEST(LogClassifierTest, ASourceLineCutFromItsIndentIsNotTheException) {
  // As the classifier gets the lines, the launcher's "[1,2]<stderr>:" already taken off.
  auto ev = Classify(
      "Traceback (most recent call last):\n"
      "  File \"/t/torch_oom_rank.py\", line 20, in <module>\n"
      "    \n"
      "buf = bytearray(10**15)  # more than any machine has: MemoryError at once\n"
      "          ^^^^^^^^^^^^^^^^^^^\n"
      "MemoryError\n");
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev[0].code, "OUT_OF_MEMORY") << ev[0].kind << ": " << ev[0].summary;
  EXPECT_EQ(ev[0].location, "torch_oom_rank.py:20");
  // Another rank's output landed between the indent and the text (the indent's line is theirs).
  auto mixed = Classify(
      "Traceback (most recent call last):\n"
      "  File \"/t/torch_oom_rank.py\", line 20, in <module>\n"
      "    [1,0]<stderr>:Traceback (most recent call last):\n"
      "buf = bytearray(10**15)  # more than any machine has: MemoryError at once\n"
      "MemoryError\n");
  ASSERT_FALSE(mixed.empty());
  EXPECT_EQ(mixed[0].code, "OUT_OF_MEMORY") << mixed[0].kind << ": " << mixed[0].summary;
  // An exception line of no usual shape is still the exception: told by the line after it, or by
  // the end of the log.
  for (const std::string after : {"step 5 done\n", ""}) {
    auto odd = Classify(
        "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n"
        "<odd exception text>\n" +
        after);
    ASSERT_FALSE(odd.empty()) << after;
    EXPECT_NE(odd[0].summary.find("<odd exception text>"), std::string::npos) << odd[0].summary;
  }
  auto bare = Classify(
      "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
      "ZeroDivisionError: division by zero\n");
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_NE(bare[0].summary.find("ZeroDivisionError: division by zero"), std::string::npos) << bare[0].summary;
}

TEST(LogClassifierTest, TracebackCutOffByDeathIsStillReported) {
  auto ev = Classify("Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].location, "a.py:3");
  // It names no cause (no exception line): a warning and a consequence, never the first failure.
  EXPECT_EQ(ev[0].severity, diagnosis::Severity::kWarning);
  EXPECT_TRUE(ev[0].consequence);
}

TEST(LogClassifierTest, NcclWarnConnectFailureGetsTheFirewallRemedy) {
  auto ev = Classify(
      "node1:1234:1300 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
      "node1:1234:1300 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43123> failed : "
      "Connection refused\n");
  ASSERT_EQ(ev.size(), 1u) << "INFO lines are not events";
  EXPECT_EQ(ev[0].code, "NCCL_ERROR");
  EXPECT_EQ(ev[0].line, 2);
  EXPECT_NE(ev[0].remedy.find("firewall"), std::string::npos);
}

TEST(LogClassifierTest, TorchNcclErrorAndWatchdog) {
  auto ev = Classify(
      "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, unhandled system error, "
      "NCCL version 2.14.3\n"
      "[E ProcessGroupNCCL.cpp:821] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
      "OpType=ALLREDUCE, "
      "Timeout(ms)=1800000) ran for 1800312 milliseconds before timing out.\n");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].code, "NCCL_ERROR");
  EXPECT_NE(ev[0].remedy.find("/dev/shm"), std::string::npos);
  EXPECT_EQ(ev[1].code, "WATCHDOG_TIMEOUT");
  EXPECT_NE(ev[1].summary.find("ALLREDUCE SeqNum=5"), std::string::npos);
  EXPECT_EQ(ev[1].Field("seq"), "5");
  EXPECT_EQ(ev[1].Field("self_rank"), "1");
}

TEST(LogClassifierTest, GlooAndMpiAndRuntimeLines) {
  auto ev = Classify(
      "gloo allreduce: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
      "[127.0.0.1]:4321\n"
      "[2026-12-02 10:00:00.000] [runtime] [warning] watchdog: rank 0: barrier#5 @save_checkpoint in flight for 3.0 s "
      "(timeout 3.0 s); policy abort\n"
      "mpirun noticed that process rank 2 with PID 0 on node worker-2 exited on signal 9 (Killed).\n"
      "[worker-1:01234] *** An error occurred in MPI_Allreduce\n"
      "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
      "  what():  [enforce fail at pair.cc:446] op.preamble.length <= op.nbytes. 8192 vs 4096\n");
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].code, "COMM_ERROR");
  EXPECT_EQ(ev[0].summary, "connection closed by peer");
  EXPECT_EQ(ev[1].code, "WATCHDOG_TIMEOUT");
  EXPECT_EQ(ev[2].code, "RANK_EXITED");
  EXPECT_EQ(ev[2].subject_rank, 2);
  EXPECT_EQ(ev[2].signal, 9);
  EXPECT_EQ(ev[3].code, "COMM_ERROR");
  EXPECT_EQ(ev[4].kind, "cxx_terminate");
  EXPECT_NE(ev[4].summary.find("8192 vs 4096"), std::string::npos);
  EXPECT_EQ(ev[4].line, 5);
}

TEST(LogClassifierTest, TorchrunChildFailedTableNamesTheFailedRank) {
  auto ev = Classify(
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
      "============================================================\n"
      "Root Cause (first observed failure):\n"
      "[0]:\n"
      "  time      : 2026-12-02_10:00:00\n"
      "  host      : worker-1\n"
      "  rank      : 5 (local_rank: 1)\n"
      "  exitcode  : -9 (pid: 4242)\n",
      0);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].code, "RANK_EXITED");
  EXPECT_EQ(ev[0].subject_rank, 5);
  EXPECT_EQ(ev[0].signal, 9);
}

TEST(LogClassifierTest, HydrasBadTerminationBoxIsTheProcessesEnd) {
  // Intel MPI's box names the rank and the signal; MPICH's gives the signal after the box.
  auto intel = Classify(
      "===================================================================================\n"
      "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
      "=   RANK 3 PID 143 RUNNING AT node2\n"
      "=   KILLED BY SIGNAL: 9 (Killed)\n"
      "===================================================================================\n"
      "step 12\n");
  ASSERT_EQ(intel.size(), 1u);
  EXPECT_EQ(intel[0].code, "RANK_EXITED");
  EXPECT_EQ(intel[0].subject_rank, 3);
  EXPECT_EQ(intel[0].host, "node2");
  EXPECT_EQ(intel[0].pid, 143);
  EXPECT_EQ(intel[0].signal, 9);
  EXPECT_EQ(intel[0].line, 2);
  auto mpich = Classify(
      "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 9665 RUNNING AT gpu7\n=   EXIT CODE: 139\n"
      "=   CLEANING UP REMAINING PROCESSES\n");
  ASSERT_EQ(mpich.size(), 1u);  // the log ends inside the box
  EXPECT_EQ(mpich[0].exit_code, 139);
  EXPECT_NE(mpich[0].remedy.find("SIGSEGV"), std::string::npos) << mpich[0].remedy;
  // Two boxes back to back are two ends; Hydra's cleanup lines between a box and its exit string
  // do not hide the signal.
  auto two = Classify(
      "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 0 PID 11 RUNNING AT a\n"
      "=   KILLED BY SIGNAL: 11 (Segmentation fault)\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
      "=   RANK 1 PID 12 RUNNING AT b\n=   KILLED BY SIGNAL: 9 (Killed)\nstep 1\n");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].subject_rank, 0);
  EXPECT_EQ(two[0].signal, 11);
  EXPECT_EQ(two[1].subject_rank, 1);
  EXPECT_EQ(two[1].signal, 9);
  auto cleanup = Classify(
      "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 9665 RUNNING AT gpu7\n=   EXIT CODE: 9\n"
      "==============================\n[proxy:0:0@gpu7] HYD_pmcd_pmip_control_cmd_cb (pm/pmiserv/pmip_cb.c:887): "
      "assert (!closed) failed\n[mpiexec@gpu7] HYDT_bscu_wait_for_completion (tools/bootstrap/utils/bscu_wait.c:76): "
      "one of the processes terminated badly; aborting\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed "
      "(signal 9)\n");
  ASSERT_EQ(cleanup.size(), 1u);
  EXPECT_EQ(cleanup[0].signal, 9);
  // A box cut off before its rows names nobody.
  EXPECT_TRUE(Classify("=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\nstep 1\n").empty());
}

TEST(LogClassifierTest, ExitMeaningReadsEachLaunchersConvention) {
  EXPECT_NE(ExitMeaning(-9, 0).find("OOM killer"), std::string::npos);
  EXPECT_NE(ExitMeaning(137, 0).find("128 + 9"), std::string::npos);
  EXPECT_NE(ExitMeaning(0, 7).find("/dev/shm"), std::string::npos);
  EXPECT_NE(ExitMeaning(1, 0).find("traceback"), std::string::npos);
  EXPECT_NE(ExitMeaning(-64, 0).find("signal 64"), std::string::npos);
  EXPECT_NE(ExitMeaning(3, 0).find("program's own"), std::string::npos);
}

TEST(LogClassifierTest, OrdinaryOutputIsNotAnEvent) {
  EXPECT_TRUE(Classify("step 10 loss 0.25\nsaving checkpoint to /tmp/x\nNCCL INFO Channel 00/02 : 0 1\n").empty());
}

}  // namespace
}  // namespace dsd::collectors

#include "collectors/stack.h"

namespace dsd::collectors {
namespace {

TEST(ReduceStackTest, EuStackMainThreadWithoutWaitWrappers) {
  std::string text =
      "PID 6992 - process\nTID 6992:\n#0  0x00007f7def4a3f16 __futex_abstimed_wait_common\n"
      "#1  0x00007f7def4a6baf pthread_cond_clockwait@GLIBC_2.30\n"
      "#2  0x00007f7defad4d6b gloo::transport::tcp::UnboundBuffer::waitRecv(int*, std::chrono::duration<long>)\n"
      "#3  0x00007f7defaa800a gloo::barrier(gloo::BarrierOptions&)\n"
      "#4  0x000056549d73cb12 dsd::runtime::(anonymous namespace)::GlooBackend::Barrier()\n"
      "#5  0x000056549d72b260 std::_Function_handler<dsd::Status (), x>::_M_invoke(std::_Any_data const&)\n"
      "#6  0x000056549d72ebf2 dsd::runtime::ProcessGroup::Traced(dsd::runtime::OpInfo)\n"
      "TID 6997:\n#0  0x00007f7def4a3f16 dsd::runtime::Watchdog::Loop()\n";
  EXPECT_EQ(
      ReduceStack(text),
      "gloo::transport::tcp::UnboundBuffer::waitRecv < gloo::barrier < dsd::runtime::{anon}::GlooBackend::Barrier < "
      "dsd::runtime::ProcessGroup::Traced");
}

TEST(ReduceStackTest, GdbAndPySpyFormats) {
  EXPECT_EQ(
      ReduceStack("Thread 1 (Thread 0x7f (LWP 12) \"python3\"):\n#0  0x00007f in __GI___poll (fds=0x1) at poll.c:29\n"
                  "#1  0x00007f in gloo::transport::tcp::Pair::recv (this=0x2) at pair.cc:10\n#2  main () at m.c:3\n",
                  2),
      "gloo::transport::tcp::Pair::recv < main");
  EXPECT_EQ(ReduceStack("Process 42: python3 train.py\nThread 42 (idle): \"MainThread\"\n    barrier "
                        "(torch/distributed/distributed_c10d.py:3152)\n"
                        "    main (/tmp/train.py:14)\n",
                        2),
            "barrier (distributed_c10d.py:3152) < main (train.py:14)");
  // DeepSpeed's layers between torch and the program: kept until the program's own frame is in.
  EXPECT_EQ(ReduceStack(
                "Thread 42 (idle): \"MainThread\"\n    barrier (torch/distributed/distributed_c10d.py:3152)\n"
                "    traced (<dsdoctor tracer: barrier>:29)\n"
                "    barrier (deepspeed/comm/torch.py:336)\n    barrier (deepspeed/comm/comm.py:408)\n"
                "    log_wrapper (deepspeed/comm/comm.py:117)\n    save_checkpoint (deepspeed/runtime/engine.py:3153)\n"
                "    main (/home/u/ds_train.py:48)\n    <module> (/home/u/ds_train.py:60)\n"),
            "barrier (distributed_c10d.py:3152) < barrier (torch.py:336) < barrier (comm.py:408) < log_wrapper "
            "(comm.py:117) < "
            "save_checkpoint (engine.py:3153) < main (ds_train.py:48)");
}

}  // namespace
}  // namespace dsd::collectors
