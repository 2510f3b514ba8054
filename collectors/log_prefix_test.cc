// Launcher prefixes, in the formats of the public reports cited beside them.
#include "collectors/log_prefix.h"

#include <gtest/gtest.h>

namespace dsd::collectors {
namespace {

struct Parsed {
  LinePrefix p;
  std::string message;
};

Parsed Strip(const std::string& line, const PrefixDialect& d = {}) {
  Parsed out;
  out.message = std::string(StripPrefixes(line, d, &out.p));
  return out;
}

TEST(LogPrefixTest, TorchrunRankAndTeePrefixes) {
  // torch >= 2.2 C++ logger (https://github.com/hiyouga/LlamaFactory/issues/6269) and >= 2.3 excepthook.
  auto a = Strip("[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught");
  EXPECT_EQ(a.p.rank, 3);
  EXPECT_EQ(a.message, "[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught");
  EXPECT_EQ(Strip("[rank0]: Traceback (most recent call last):").message, "Traceback (most recent call last):");
  // torchrun --tee: [{role}{local_rank}]: (https://github.com/rwth-i6/i6_core/pull/658)
  auto b = Strip("[default3]:ep 55 train, step 1347");
  EXPECT_EQ(b.p.rank, -1);
  EXPECT_EQ(b.p.local_rank, 3);
  EXPECT_EQ(b.message, "ep 55 train, step 1347");
  // Not a prefix: "[Rank 1]" inside a message, glog headers.
  EXPECT_EQ(Strip("[Rank 1] Watchdog").p.rank, -1);
  EXPECT_EQ(Strip("[E ProcessGroupNCCL.cpp:737] x").message, "[E ProcessGroupNCCL.cpp:737] x");
  // A paste's line numbers before the launcher's prefix (https://github.com/hiyouga/LlamaFactory/issues/7396);
  // alone, "[3] " may be a rank tag of some launcher and stays.
  auto c = Strip("[80749] [rank3]:[E321 02:07:08.465224069 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 3] Exception");
  EXPECT_EQ(c.p.rank, 3);
  EXPECT_EQ(c.message, "[E321 02:07:08.465224069 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 3] Exception");
  EXPECT_EQ(Strip("[3] step 1").message, "[3] step 1");
}

TEST(LogPrefixTest, HorovodrunTags) {
  // horovodrun's launcher (https://github.com/horovod/horovod/issues/2097).
  auto a = Strip("Fri Sep 25 16:52:53 2020[1]<stderr>:2020-09-25 16:52:53.640992: W tensorflow/core/x.cc:1] boom");
  EXPECT_EQ(a.p.rank, 1);
  EXPECT_EQ(a.message, "W tensorflow/core/x.cc:1] boom");  // TensorFlow's timestamp is a prefix too
  EXPECT_EQ(Strip("[3]<stdout>:step 1").p.rank, 3);
  EXPECT_EQ(Strip("[3] <stdout>: step 1").p.rank, -1);
}

TEST(LogPrefixTest, OpenMpiTags) {
  EXPECT_EQ(Strip("[1,3]<stderr>:Traceback (most recent call last):").p.rank, 3);
  EXPECT_EQ(Strip("[1,3]<stderr>:Traceback").message, "Traceback");
  // --timestamp-output (orte iof_base_output.c format)
  auto t = Strip("Mon Jan  1 12:00:00 2024[1,12]<stdout>:hello");
  EXPECT_EQ(t.p.rank, 12);
  EXPECT_EQ(t.message, "hello");
  // Open MPI 5 / PRRTE (https://github.com/openpmix/prrte/issues/1405)
  EXPECT_EQ(Strip("[prterun-f5n18-100629@1,5]<stdout>: f5n18").p.rank, 5);
  // SageMaker (pacman100/accelerate-aws-sagemaker README)
  auto s = Strip("[1,mpirank:7,algo-2]<stdout>:algo-2:79:1300 [0] NCCL INFO Launch mode Parallel");
  EXPECT_EQ(s.p.rank, 7);
  EXPECT_EQ(s.p.host, "algo-2");
  EXPECT_EQ(s.p.pid, 79);
  EXPECT_EQ(s.message, "NCCL INFO Launch mode Parallel");
}

TEST(LogPrefixTest, NcclPrefixAndTimestamps) {
  // NCCL 2.26 timestamps WARN lines (https://github.com/pytorch/pytorch/issues/150852).
  auto a = Strip(
      "[2025-04-08 08:39:46] devgpu263:589012:591652 [0] transport/nvls.cc:254 NCCL WARN Cuda failure 1 'invalid "
      "argument'");
  EXPECT_EQ(a.p.host, "devgpu263");
  EXPECT_EQ(a.p.pid, 589012);
  EXPECT_EQ(a.p.time_ns, 1744101586LL * 1000000000);
  EXPECT_EQ(a.message, "transport/nvls.cc:254 NCCL WARN Cuda failure 1 'invalid argument'");
  // CloudWatch/k8s RFC3339 with fraction and zone.
  auto b = Strip("2024-05-01T12:00:00.5+02:00 hello");
  EXPECT_EQ(b.p.time_ns, (1714564800LL - 7200) * 1000000000 + 500000000);
  EXPECT_EQ(b.message, "hello");
  // DeepSpeed's logger: [2024-02-03 11:48:17,107]
  EXPECT_GT(Strip("[2024-02-03 11:48:17,107] [INFO] [launch.py:316:sigkill_handler] Killing").p.time_ns, 0);
  // Not timestamps.
  EXPECT_EQ(Strip("2024-05-01 is a date").p.time_ns, 0);
  EXPECT_EQ(Strip("[2024-13-45 99:00:00] x").p.time_ns, 0);
  EXPECT_EQ(Strip("9999-01-01T00:00:00Z x").p.time_ns, 0) << "would overflow nanoseconds";
  EXPECT_EQ(Strip("0001-01-01 00:00:00 x").p.time_ns, 0);
}

TEST(LogPrefixTest, KubernetesRayAndNesting) {
  auto k = Strip("[pod/trainer-worker-1/pytorch] 2024-05-01T12:00:00.123456789Z [rank5]: RuntimeError: boom");
  EXPECT_EQ(k.p.host, "trainer-worker-1");
  EXPECT_EQ(k.p.rank, 5);
  EXPECT_GT(k.p.time_ns, 0);
  EXPECT_EQ(k.message, "RuntimeError: boom");
  // Ray actors (https://github.com/GAIR-NLP/DeepResearcher/issues/16)
  auto r = Strip("(WorkerDict pid=63294, ip=10.41.0.8) [rank3]:[E416 20:40:12.984683378 ProcessGroupNCCL.cpp:607] x");
  EXPECT_EQ(r.p.pid, 63294);
  EXPECT_EQ(r.p.host, "10.41.0.8");
  EXPECT_EQ(r.p.rank, 3);
}

TEST(LogPrefixTest, SlurmstepdNamesItsNode) {
  // Slurm 22.05's slurmstepd in a job's output (tests/e2e/slurm_e2e_test).
  auto a = Strip("slurmstepd-node-1: error: StepId=1.0 exceeded memory limit (642932736 > 314572800), being killed");
  EXPECT_EQ(a.p.host, "node-1");
  EXPECT_EQ(a.message,
            "slurmstepd-node-1: error: StepId=1.0 exceeded memory limit (642932736 > 314572800), being killed");
  // Older releases print no node: nothing to take.
  EXPECT_EQ(Strip("slurmstepd: error: *** JOB 1 ON n1 CANCELLED AT 2024-01-01T00:00:00 ***").p.host, "");
}

TEST(LogPrefixTest, PdshAndSrunNeedTheDialect) {
  // Without the dialect a "word: " is a message ("RuntimeError: …").
  EXPECT_EQ(Strip("worker-1: [rank3]: boom").p.host, "");
  EXPECT_EQ(Strip("3: hello").p.rank, -1);
  DialectLearner pdsh;
  // DeepSpeed's launcher through pdsh (https://github.com/hiyouga/LlamaFactory/issues/2470).
  for (int i = 0; i < 10; ++i)
    pdsh.Add("gpu00" + std::to_string(i % 4) + ": [2024-01-01 00:00:00,000] [INFO] [launch.py:96:main] x");
  pdsh.Add("RuntimeError: not a host");
  PrefixDialect d = pdsh.Dialect();
  EXPECT_TRUE(d.pdsh);
  EXPECT_FALSE(d.srun);
  auto a = Strip("gpu004: RuntimeError: [15] is setting up NCCL communicator", d);
  EXPECT_EQ(a.p.host, "gpu004");
  EXPECT_EQ(a.message, "RuntimeError: [15] is setting up NCCL communicator");
  EXPECT_EQ(Strip("RuntimeError: boom", d).p.host, "");
  EXPECT_EQ(Strip("ValueError: boom", d).message, "ValueError: boom");
  // srun -l right-aligns task ids (slurm src/common/write_labelled_message.c).
  DialectLearner srun;
  for (int i = 0; i < 16; ++i) srun.Add((i < 10 ? " " : "") + std::to_string(i) + ": step 1");
  PrefixDialect sd = srun.Dialect();
  EXPECT_TRUE(sd.srun);
  EXPECT_EQ(Strip(" 7: Traceback (most recent call last):", sd).p.rank, 7);
  EXPECT_EQ(Strip("12: x", sd).p.rank, 12);
}

TEST(LogPrefixTest, ProgressBars) {
  EXPECT_EQ(
      StripProgressBar("Epoch 1:  45%|####5     | 45/100 [00:10<00:12,  4.41it/s]Traceback (most recent call last):"),
      "Traceback (most recent call last):");
  EXPECT_EQ(StripProgressBar("100%|##########| 3000001/3000001 [03:33<00:00, 14061.26it/s]"), "");
  EXPECT_EQ(StripProgressBar("no bar here"), "no bar here");
}

TEST(LogPrefixTest, HostileInputIsTotal) {
  std::string long_digits(5000, '9');
  EXPECT_EQ(Strip("[rank" + long_digits + "]: x").p.rank, -1);
  EXPECT_EQ(Strip("[" + long_digits + "," + long_digits + "]<stdout>: x").p.rank, -1);
  Strip(std::string("\0\xff[pod/", 7));
  Strip("[pod/");
  Strip("(x pid=");
  Strip("host:1:2 [");
}

// containerd / CRI-O write each container line as "<RFC 3339 time> <stream> <F|P> <line>"
// (/var/log/pods/…, what a node's log shipper reads).
TEST(LogPrefixTest, CriContainerLogLines) {
  auto a =
      Strip("2024-05-01T12:30:00.123456789Z stderr F [rank1]:[E501 12:30:00.000000000 ProcessGroupNCCL.cpp:607] x");
  EXPECT_EQ(a.p.rank, 1);
  EXPECT_EQ(a.p.channel, "stderr");
  EXPECT_GT(a.p.time_ns, 0);
  EXPECT_EQ(a.message, "[E501 12:30:00.000000000 ProcessGroupNCCL.cpp:607] x");
  auto b = Strip("2024-05-01T12:30:00.123456789+00:00 stdout P step 1 loss 2.31");
  EXPECT_EQ(b.p.channel, "stdout");
  EXPECT_EQ(b.message, "step 1 loss 2.31");
  // Only after a timestamp: a program's own "stdout F …" stays its text.
  EXPECT_EQ(Strip("stdout F went wrong").message, "stdout F went wrong");
}

// Docker's json-file driver, Fluent Bit with Kubernetes metadata, journald's JSON: the program's
// line is the decoded string, and the record's fields say its stream, time and pod.
TEST(LogPrefixTest, JsonLogRecords) {
  JsonLogLine j;
  // Go's encoder escapes <, > and & (docker logs of a Python traceback).
  ASSERT_TRUE(DecodeJsonLogLine(R"({"log":"[rank1]:  File \"/w/train.py\", line 42, in \u003cmodule\u003e\n",)"
                                R"("stream":"stderr","time":"2024-05-01T12:30:00.123456789Z"})",
                                &j));
  EXPECT_EQ(j.text, "[rank1]:  File \"/w/train.py\", line 42, in <module>");
  EXPECT_EQ(j.stream, "stderr");
  EXPECT_GT(j.time_ns, 0);
  EXPECT_EQ(j.host, "");
  ASSERT_TRUE(DecodeJsonLogLine(R"({"date":1714566600.1,"log":"NCCL WARN oops\ttab","stream":"stdout",)"
                                R"("kubernetes":{"pod_name":"trainer-worker-3","namespace_name":"ml"}})",
                                &j));
  EXPECT_EQ(j.text, "NCCL WARN oops\ttab");
  EXPECT_EQ(j.host, "trainer-worker-3");
  EXPECT_EQ(j.time_ns, 0);
  ASSERT_TRUE(DecodeJsonLogLine(R"({ "_HOSTNAME" : "gpu-node-7", "MESSAGE" : "caf\u00e9 \ud83d\ude00 \ud800" })", &j));
  EXPECT_EQ(j.text, "caf\xc3\xa9 \xf0\x9f\x98\x80 \xef\xbf\xbd");
  EXPECT_EQ(j.host, "gpu-node-7");
  // Not such records: text, JSON without a text field, a string cut off.
  EXPECT_FALSE(DecodeJsonLogLine("[rank1]: {\"log\":\"x\"}", &j));
  EXPECT_FALSE(DecodeJsonLogLine(R"({"step": 3, "loss": 2.31})", &j));
  // A program's own structured log keeps its failure in other fields: read as the line it is.
  EXPECT_FALSE(DecodeJsonLogLine(
      R"({"level":"error","msg":"allreduce failed","error":"torch.OutOfMemoryError: CUDA out of memory"})", &j));
  EXPECT_FALSE(DecodeJsonLogLine(R"({"log":"a program's own field"})", &j));
  EXPECT_FALSE(DecodeJsonLogLine(R"({"log":"cut \"})", &j));
  EXPECT_FALSE(DecodeJsonLogLine(R"({"log":"bad \u12"})", &j));
}

}  // namespace
}  // namespace dsd::collectors
