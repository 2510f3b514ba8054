#include "collectors/source_formats.h"

#include <gtest/gtest.h>
#include <re2/re2.h>

#include <fstream>
#include <sstream>

#include "collectors/log_classifier.h"

namespace dsd::collectors {
namespace {

const diagnosis::LogEvent* Only(const std::vector<diagnosis::LogEvent>& events) {
  return events.size() == 1 ? &events[0] : nullptr;
}

TEST(FormatTableTest, BadTablesNameTheLine) {
  auto no_header = ParseFormatTable("# v1\nsrc/a.cc\t3\tWARN\tx\n", "t.tsv", FormatSource::kNccl);
  ASSERT_FALSE(no_header.ok());
  EXPECT_NE(no_header.status().message().find("t.tsv:2"), std::string::npos) << no_header.status().message();
  auto short_row = ParseFormatTable("path\tline\thow\tformat\nsrc/a.cc\t3\tWARN\n", "t.tsv", FormatSource::kNccl);
  ASSERT_FALSE(short_row.ok());
  EXPECT_NE(short_row.status().message().find("t.tsv:2: 3 columns"), std::string::npos);
  auto bad_line = ParseFormatTable("path\tline\thow\tformat\nsrc/a.cc\tx\tWARN\tm\n", "t.tsv", FormatSource::kNccl);
  ASSERT_FALSE(bad_line.ok());
  EXPECT_NE(bad_line.status().message().find("line \"x\""), std::string::npos);
  auto good = ParseFormatTable("# NCCL 1.2.3 abc\npath\tline\thow\tformat\nsrc/a.cc\t3\tWARN\tm %d\n", "t.tsv",
                               FormatSource::kNccl);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->version, "NCCL 1.2.3 abc");
  ASSERT_EQ(good->formats.size(), 1u);
  EXPECT_EQ(good->formats[0].path, "src/a.cc");
  EXPECT_EQ(good->formats[0].line, 3);
}

TEST(FormatTableTest, BuiltinTablesAreReadWhole) {
  EXPECT_GT(BuiltinFormats(FormatSource::kNccl).formats.size(), 600u);
  EXPECT_EQ(BuiltinFormats(FormatSource::kNccl).version.rfind("NCCL 2.", 0), 0u);
  EXPECT_GT(BuiltinFormats(FormatSource::kTorch).formats.size(), 700u);
  EXPECT_EQ(BuiltinFormats(FormatSource::kTorch).version.rfind("PyTorch 2.", 0), 0u);
  EXPECT_GT(BuiltinFormats(FormatSource::kDeepSpeed).formats.size(), 50u);
  EXPECT_EQ(BuiltinFormats(FormatSource::kDeepSpeed).version.rfind("DeepSpeed 0.", 0), 0u);
  EXPECT_GT(BuiltinFormats(FormatSource::kCuda).formats.size(), 120u);
  EXPECT_EQ(BuiltinFormats(FormatSource::kCuda).version.rfind("CUDA 1", 0), 0u);
  EXPECT_GT(BuiltinFormats(FormatSource::kSlurm).formats.size(), 1000u);
  EXPECT_EQ(BuiltinFormats(FormatSource::kSlurm).version.rfind("Slurm 2", 0), 0u);
  EXPECT_GT(BuiltinFormats(FormatSource::kOpenMpi).formats.size(), 500u);
  EXPECT_EQ(BuiltinFormats(FormatSource::kOpenMpi).version.rfind("Open-MPI 4.", 0), 0u);
  EXPECT_GT(BuiltinFormats(FormatSource::kPrrte).formats.size(), 250u);
  EXPECT_EQ(BuiltinFormats(FormatSource::kPrrte).version.rfind("PRRTE ", 0), 0u);
  EXPECT_GT(BuiltinFormats(FormatSource::kJax).formats.size(), 250u);
  EXPECT_EQ(BuiltinFormats(FormatSource::kJax).version.rfind("JAX 0.", 0), 0u);
  EXPECT_GT(BuiltinFormats(FormatSource::kKubernetes).formats.size(), 30u);
  EXPECT_EQ(BuiltinFormats(FormatSource::kKubernetes).version.rfind("Kubernetes ", 0), 0u);
  // Every source has a title and its families end with a catch-all.
  for (FormatSource source : AllFormatSources()) {
    EXPECT_TRUE(*SourceTitle(source));
    EXPECT_TRUE(Families(source).back().generic) << SourceTitle(source);
  }
}

TEST(FormatRegexTest, PrintfPlaceholdersBecomeWhatTheyPrint) {
  const std::string f = "NET/IB : %s:%d Got completion with status=%d opcode=%lx len %zu (100%%) at %p";
  std::string re = FormatRegex(FormatSource::kNccl, f);
  EXPECT_TRUE(RE2::FullMatch("NET/IB : mlx5_0:1 Got completion with status=12 opcode=1f len 8 (100%) at 0x7f00", re))
      << re;
  EXPECT_FALSE(RE2::FullMatch("NET/IB : mlx5_0:1 Got completion with status=x opcode=1f len 8 (100%) at 0x7f00", re));
  EXPECT_TRUE(RE2::FullMatch(FormatExample(FormatSource::kNccl, f), re));
  // Only a message's first line is in one log line; escapes the extractor kept are read.
  EXPECT_EQ(FormatExample(FormatSource::kTorch, "NCCL error in: {}:{}, {}\\n{}"), "NCCL error in: val:val, val");
  EXPECT_EQ(FormatExample(FormatSource::kTorch, "\\nLast error:\\n{}"), "Last error:");
  EXPECT_EQ(FormatExample(FormatSource::kTorch, "a \\\"b\\\" {}"), "a \"b\" val");
}

TEST(FormatRegexTest, MessagesWithTooLittleTextOfTheirOwnAreNotPatterns) {
  EXPECT_FALSE(Distinctive(FormatSource::kNccl, "%s:%d %s"));
  EXPECT_TRUE(Distinctive(FormatSource::kNccl, "NET/IB : Unable to open device %s"));
  EXPECT_FALSE(Distinctive(FormatSource::kTorch, "Wait timeout"));
  EXPECT_TRUE(Distinctive(FormatSource::kTorch, "Socket Timeout, remote peer {} did not answer"));
}

// Every format that stands as a pattern is found again from the line it prints, as itself or as a
// format printing the same words (the same message printed from several places).
TEST(FormatMatcherTest, EveryFormatIsFoundFromItsOwnExample) {
  for (FormatSource source : AllFormatSources()) {
    const FormatMatcher& m = FormatMatcher::Default(source);
    EXPECT_GT(m.patterns(), source == FormatSource::kDeepSpeed    ? 30u
                            : source == FormatSource::kKubernetes ? 20u
                                                                  : 120u)
        << SourceTitle(source);
    for (const SourceFormat& f : BuiltinFormats(source).formats) {
      if (!Distinctive(source, f.format)) continue;
      FormatMatch got;
      std::string example = FormatExample(source, f.format);
      ASSERT_TRUE(m.Match(example, &got)) << f.path << ":" << f.line << " " << f.format;
      // A help text may be read as another with the same distinctive lines (the same text shown by
      // two files, or one with an extra row of values): the same subsystem's reading.
      if (IsHelpTextSource(source)) {
        if (got.format->format == f.format) continue;  // the same words in two files: either reading is right
        EXPECT_STREQ(FamilyOf(source, *got.format).kind, FamilyOf(source, f).kind)
            << f.path << ":" << f.line << " read as " << got.format->path << ":" << got.format->line;
        continue;
      }
      EXPECT_TRUE(RE2::FullMatch(FormatExample(source, got.format->format), FormatRegex(source, f.format)) ||
                  RE2::PartialMatch(example, FormatRegex(source, got.format->format)))
          << f.format << " read as " << got.format->format;
    }
  }
}

// One line per NCCL subsystem family, in the format NCCL prints it.
struct FamilyCase {
  const char* kind;
  const char* line;
  const char* remedy_word;
};
class NcclFamilyTest : public ::testing::TestWithParam<FamilyCase> {};
INSTANTIATE_TEST_SUITE_P(
    Families, NcclFamilyTest,
    ::testing::Values(
        FamilyCase{"nccl_src_ib", "gpu-node-07:91823:91901 [3] NCCL WARN NET/IB : Unable to open device mlx5_4",
                   "ibstat"},
        FamilyCase{"nccl_src_socket",
                   "gpu-node-07:91823:91901 [3] NCCL WARN Net : error encountered when getting address info : Name or "
                   "service not known",
                   "firewall"},
        FamilyCase{
            "nccl_src_proxy",
            "gpu-node-07:91823:91901 [3] NCCL WARN [Service thread] Error encountered progressing operation=Connect, "
            "res=3, closing connection",
            "first rank"},
        FamilyCase{"nccl_src_topology", "gpu-node-07:91823:91901 [3] NCCL WARN Could not find NET with id 2",
                   "NCCL_TOPO_FILE"},
        FamilyCase{"nccl_src_init",
                   "gpu-node-07:91823:91901 [3] NCCL WARN Detected mixed local Net device counts across ranks (min 4, "
                   "max 8). Set NCCL_IGNORE_NET_MISMATCH=1 to continue.",
                   "NCCL version"},
        FamilyCase{"nccl_src_usage", "gpu-node-07:91823:91901 [3] NCCL WARN AllReduce : invalid reduction operation 9",
                   "framework"},
        FamilyCase{"nccl_src_gdrcopy", "gpu-node-07:91823:91901 [3] NCCL WARN GDRCOPY lib wrapper not initialized.",
                   "NCCL_GDRCOPY_ENABLE=0"}),
    [](const auto& info) { return std::string(info.param.kind); });

TEST_P(NcclFamilyTest, TheWarnLineGetsItsSubsystemsCauseAndSource) {
  auto events = ClassifyLog(3, GetParam().line);
  const diagnosis::LogEvent* e = Only(events);
  ASSERT_NE(e, nullptr) << events.size() << " events";
  EXPECT_EQ(e->kind, GetParam().kind) << e->summary;
  EXPECT_NE(e->remedy.find(GetParam().remedy_word), std::string::npos) << e->remedy;
  EXPECT_EQ(e->Field("source").rfind("NCCL 2.", 0), 0u) << e->Field("source");
  EXPECT_NE(e->Field("source").find("src/"), std::string::npos) << e->Field("source");
}

TEST(TorchFormatTest, AnExceptionTheCatalogueDoesNotKnowGetsItsSubsystemsCause) {
  auto events = ClassifyLog(1,
                            "Traceback (most recent call last):\n"
                            "  File \"/home/u/train.py\", line 9, in <module>\n"
                            "    dist.init_process_group(\"gloo\")\n"
                            "ValueError: The read timeout must be a positive integer.\n");
  const diagnosis::LogEvent* e = Only(events);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->Field("cause_kind"), "torch_src_rendezvous");
  EXPECT_NE(e->remedy.find("--rdzv-endpoint"), std::string::npos) << e->remedy;
  EXPECT_NE(e->summary.find("train.py:9"), std::string::npos) << e->summary;
}

TEST(TorchFormatTest, APyTorchErrorLogLineOfAKnownFormatIsAnEventAndAWarningIsNot) {
  auto error =
      ClassifyLog(0,
                  "[E1207 10:11:12.123456789 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
                  "failure detected by watchdog at work sequence id: 41 PG status: last enqueued work: 41, "
                  "last completed work: 40\n");
  const diagnosis::LogEvent* e = Only(error);
  ASSERT_NE(e, nullptr) << error.size();
  EXPECT_EQ(e->kind, "torch_src_pg_nccl");
  EXPECT_EQ(e->severity, diagnosis::Severity::kError);
  EXPECT_EQ(e->Field("source"), "PyTorch 2.6.0a0 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2168");
  auto warning = ClassifyLog(0,
                             "[W1207 10:11:12.123456789 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has "
                             "NOT been destroyed before we destruct ProcessGroupNCCL.\n");
  for (const auto& w : warning) EXPECT_NE(w.severity, diagnosis::Severity::kError) << w.summary;
  // An error line whose format is unknown is no event: the bare level is no cause.
  EXPECT_TRUE(ClassifyLog(0, "[E1207 10:11:12.123456789 Foo.cpp:12] something the sources never print\n").empty());
}

// DeepSpeed's launcher: a hostfile it rejects, raised and logged (format: deepspeed/launcher/runner.py).
TEST(DeepSpeedFormatTest, AHostfileTheLauncherRejectsGetsTheHostfileRemedy) {
  auto raised = ClassifyLog(0,
                            "Traceback (most recent call last):\n"
                            "  File \"/usr/local/bin/deepspeed\", line 6, in <module>\n"
                            "    main()\n"
                            "ValueError: Hostfile contains multiple entries for worker-1, unable to proceed with "
                            "launching\n");
  const diagnosis::LogEvent* e = Only(raised);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->Field("cause_kind"), "ds_src_hostfile");
  EXPECT_EQ(e->code, diagnosis::codes::kLaunchError);
  EXPECT_NE(e->remedy.find("slots=N"), std::string::npos) << e->remedy;
  auto logged = ClassifyLog(
      0, "[2026-12-07 10:11:12,123] [ERROR] [runner.py:253:_parse_hostfile] Bad hostfile text: worker-1 slot=8\n");
  const diagnosis::LogEvent* l = Only(logged);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, "ds_src_hostfile");
  EXPECT_EQ(l->Field("source").rfind("DeepSpeed 0.19.8 deepspeed/launcher/runner.py:", 0), 0u) << l->Field("source");
  // Its warning that no hostfile was found is no error.
  for (const auto& w : ClassifyLog(0,
                                   "[2026-12-07 10:11:12,123] [WARNING] [runner.py:215:fetch_hostfile] Unable to find "
                                   "hostfile, will proceed with training with local resources only.\n"))
    EXPECT_NE(w.severity, diagnosis::Severity::kError) << w.summary;
}

// CUDA's error strings the hand-written entries do not know, as PyTorch and NCCL report them.
TEST(CudaFormatTest, TheRuntimesErrorStringNamesItsKind) {
  auto graph = ClassifyLog(0,
                           "Traceback (most recent call last):\n"
                           "  File \"/home/u/train.py\", line 30, in <module>\n"
                           "    loss.backward()\n"
                           "RuntimeError: CUDA error: operation not permitted when stream is capturing\n");
  const diagnosis::LogEvent* g = Only(graph);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->Field("cause_kind"), "cuda_src_graph");
  EXPECT_NE(g->remedy.find("captured region"), std::string::npos) << g->remedy;
  auto peer = ClassifyLog(0,
                          "gpu-3:1234:1290 [2] transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not "
                          "supported between these two devices'");
  const diagnosis::LogEvent* p = Only(peer);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->kind, "cuda_src_peer");
  EXPECT_EQ(p->Field("source"), "CUDA 13.0 cudaErrorPeerAccessUnsupported:217");
  // A CUDA call during teardown follows another failure.
  auto teardown = ClassifyLog(0, "RuntimeError: CUDA error: driver shutting down");
  const diagnosis::LogEvent* t = Only(teardown);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind, "cuda_src_shutdown");
  EXPECT_TRUE(t->consequence);
}

// Open MPI's help texts, as its show_help frames them. A text no hand-written entry knows gets its
// subsystem's cause and names the peer; a warning text stays silent; a text a hand-written entry
// reads line by line is not read twice.
const std::string kRule(74, '-');
// help-mpi-btl-tcp.txt [peer hung up], its text before the rows of values.
const std::string kPeerHungUp =
    "An MPI communication peer process has unexpectedly disconnected.  This\n"
    "usually indicates a failure in the peer process (e.g., a crash or\n"
    "otherwise exiting without calling MPI_FINALIZE first).\n"
    "\n"
    "Although this local MPI process will likely now behave unpredictably\n"
    "(it may even hang or crash), the root cause of this problem is the\n"
    "failure of the peer -- that is what you need to investigate.  For\n"
    "example, there may be a core file that you can examine.  More\n"
    "generally: such peer hangups are frequently caused by application bugs\n"
    "or other external events.\n";

TEST(OpenMpiHelpTest, APeerThatHungUpIsNamedAndIsAConsequence) {
  auto events = ClassifyLog(0, kRule + "\n" + kPeerHungUp +
                                   "\n"
                                   "  Local host: node-a\n"
                                   "  Local PID:  4242\n"
                                   "  Peer host:  node-b\n" +
                                   kRule + "\n");
  const diagnosis::LogEvent* e = Only(events);
  ASSERT_NE(e, nullptr) << events.size();
  EXPECT_EQ(e->kind, "ompi_src_peer_gone");
  EXPECT_TRUE(e->consequence);
  EXPECT_EQ(e->Field("remote"), "node-b");
  EXPECT_EQ(e->Field("local_host"), "node-a");
  EXPECT_EQ(e->Field("topic"), "peer hung up");
  EXPECT_EQ(e->Field("source"), "Open-MPI 4.1.4 help-mpi-btl-tcp.txt:72");
  EXPECT_EQ(e->line, 2);
  EXPECT_EQ(e->summary.rfind("Open MPI: An MPI communication peer process has unexpectedly disconnected.", 0), 0u)
      << e->summary;
}

TEST(OpenMpiHelpTest, ATextCutShortOrWithAnotherProcesssLineInItIsStillFound) {
  // vader's "sys call fail": its last row lost, a line of another rank's output in the middle.
  auto events = ClassifyLog(0, kRule +
                                   "\n"
                                   "A system call failed during vader shared memory BTL initialization\n"
                                   "epoch 3 step 100 loss 2.31\n"
                                   "that should not have.  It is likely that your MPI job will now either\n"
                                   "abort or experience performance degradation.\n"
                                   "\n"
                                   "  System call: open(2) /dev/shm/vader_segment.node-a.4c3e0001.0\n" +
                                   kRule + "\n");
  const diagnosis::LogEvent* e = Only(events);
  ASSERT_NE(e, nullptr) << events.size();
  EXPECT_EQ(e->kind, "ompi_src_shm");
  EXPECT_NE(e->remedy.find("--shm-size"), std::string::npos) << e->remedy;
}

TEST(OpenMpiHelpTest, AWarningTextIsNoError) {
  auto events = ClassifyLog(0, kRule +
                                   "\n"
                                   "WARNING: There was an error initializing an OpenFabrics device.\n"
                                   "\n"
                                   "  Local host:   node-a\n"
                                   "  Local device: mlx5_0\n" +
                                   kRule +
                                   "\n"
                                   "[node-a:04242] 7 more processes have sent help message help-mpi-btl-openib.txt / "
                                   "error in device init\n");
  for (const auto& e : events) EXPECT_NE(e.severity, diagnosis::Severity::kError) << e.summary;
}

TEST(OpenMpiHelpTest, ATextAHandWrittenEntryReadsIsNotReadTwice) {
  auto events = ClassifyLog(0, kRule +
                                   "\n"
                                   "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This\n"
                                   "should not happen.\n"
                                   "\n"
                                   "Your Open MPI job may now hang or fail.\n"
                                   "\n"
                                   "  Local host: node-a\n"
                                   "  PID:        4242\n"
                                   "  Message:    connect() to 172.17.0.1:1024 failed\n"
                                   "  Error:      Operation now in progress (115)\n" +
                                   kRule + "\n");
  ASSERT_FALSE(events.empty());
  for (const auto& e : events) EXPECT_EQ(e.kind.rfind("ompi_src_", 0), std::string::npos) << e.kind;
  EXPECT_EQ(events[0].kind, "mpi_tcp_connect");
}

TEST(OpenMpiHelpTest, RulesAroundAProgramsOwnTextAndALogThatStartsInsideATextAreNoFinding) {
  // A program's own table between rules of dashes; a log that begins inside a help text (its
  // closing rule first): the pairing recovers at the empty "text" between two rules.
  auto events = ClassifyLog(0, kRule + "\n| epoch | loss |\n| 1 | 2.3 |\n" + kRule +
                                   "\n"
                                   "  Peer host:  node-b\n" +
                                   kRule + "\n" + kRule +
                                   "\n"
                                   "A system call failed during vader shared memory BTL initialization\n"
                                   "that should not have.  It is likely that your MPI job will now either\n"
                                   "abort or experience performance degradation.\n" +
                                   kRule + "\n");
  const diagnosis::LogEvent* e = Only(events);
  ASSERT_NE(e, nullptr) << events.size();
  EXPECT_EQ(e->kind, "ompi_src_shm");
}

TEST(OpenMpiHelpTest, AdviceTheJobRunsOnAfterIsNoError) {
  // Open MPI's most common message in containers: no InfiniBand, TCP is used instead.
  auto events = ClassifyLog(0, kRule +
                                   "\n"
                                   "[[41952,1],0]: A high-performance Open MPI point-to-point messaging module\n"
                                   "was unable to find any relevant network interfaces:\n"
                                   "\n"
                                   "Module: OpenFabrics (openib)\n"
                                   "  Host: gpu-0\n"
                                   "\n"
                                   "Another transport will be used instead, although this may result in\n"
                                   "lower performance.\n"
                                   "\n"
                                   "NOTE: You can disable this warning by setting the MCA parameter\n"
                                   "btl_base_warn_component_unused to 0.\n" +
                                   kRule + "\n");
  for (const auto& e : events) EXPECT_NE(e.severity, diagnosis::Severity::kError) << e.summary;
}

TEST(OpenMpiHelpTest, OneRowOfAProgramsOwnBoxIsNoHelpText) {
  EXPECT_TRUE(ClassifyLog(0, kRule + "\n  Application name:  train.py\n" + kRule + "\n").empty());
}

TEST(OpenMpiHelpTest, StrayRulesBeforeATextAndATextTheLogEndsInAreRead) {
  // A banner with three rules shifts the pairing by one: the text's own rules must still frame it.
  auto shifted = ClassifyLog(0, kRule + "\nRun configuration\n" + kRule + "\n" + kRule +
                                    "\nepochs: 10\nstep 1 loss 2.3\n" + kRule + "\n" + kPeerHungUp + kRule + "\n");
  const diagnosis::LogEvent* s = Only(shifted);
  ASSERT_NE(s, nullptr) << shifted.size();
  EXPECT_EQ(s->kind, "ompi_src_peer_gone");
  // The log ends before the closing rule (the process was killed while mpirun printed it).
  auto cut = ClassifyLog(0, "step 1 loss 2.3\n" + kRule + "\n" + kPeerHungUp);
  const diagnosis::LogEvent* c = Only(cut);
  ASSERT_NE(c, nullptr) << cut.size();
  EXPECT_EQ(c->kind, "ompi_src_peer_gone");
  EXPECT_EQ(c->line, 3);
}

TEST(PrrteHelpTest, OpenMpi5sMpirunTextsAreReadFromPrrtesTable) {
  auto events = ClassifyLog(0, kRule +
                                   "\n"
                                   "A request was made to map by a hardware object, but a node in the\n"
                                   "allocation has no object of that type:\n"
                                   "\n"
                                   "  Object type:  numa\n"
                                   "  Node:         gpu-7\n"
                                   "\n"
                                   "Mapping by an object is only done when it has been asked for, so\n"
                                   "there is no other placement that would answer the request. Please\n"
                                   "either map by an object this node provides, or restrict the job to\n"
                                   "nodes that provide the one you asked for.\n" +
                                   kRule + "\n");
  const diagnosis::LogEvent* e = Only(events);
  ASSERT_NE(e, nullptr) << events.size();
  EXPECT_EQ(e->kind, "ompi_src_placement");
  EXPECT_EQ(e->Field("source").rfind("PRRTE 5.", 0), 0u) << e->Field("source");
  EXPECT_EQ(e->Field("local_host"), "gpu-7");
  // PRRTE names a process "[<nspace>@<job>,<rank>]".
  auto heartbeat = ClassifyLog(0, kRule +
                                      "\n"
                                      "\n"
                                      "prterun failed to receive scheduled heartbeat communications from a remote\n"
                                      "process:\n"
                                      "\n"
                                      "   Process name: [prterun-gpu0-4242@1,3]\n"
                                      "   Node:         gpu-1\n" +
                                      kRule + "\n");
  const diagnosis::LogEvent* h = Only(heartbeat);
  ASSERT_NE(h, nullptr) << heartbeat.size();
  EXPECT_EQ(h->kind, "ompi_src_process");
  EXPECT_EQ(h->subject_rank, 3);
}

// srun's and slurmstepd's lines no hand-written entry knows.
TEST(SlurmFormatTest, SrunAndSlurmstepdLinesGetTheirSubsystemsCause) {
  auto step = ClassifyLog(0,
                          "srun: error: Unable to create step for job 4242: Invalid generic resource (gres) "
                          "specification\n");
  const diagnosis::LogEvent* s = Only(step);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->kind, "slurm_src_srun");
  EXPECT_EQ(s->Field("source").rfind("Slurm 2", 0), 0u);
  EXPECT_NE(s->Field("source").find("src/srun/"), std::string::npos) << s->Field("source");
  auto pmix = ClassifyLog(0,
                          "slurmstepd: error:  mpi/pmix_v4: pmixp_coll_ring_check: gpu-3 [2]: "
                          "pmixp_coll_ring.c:736: 0x7f3a2c000000: collective timeout seq=0\n");
  const diagnosis::LogEvent* p = Only(pmix);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->kind, "slurm_src_pmi");
  EXPECT_NE(p->remedy.find("--mpi=list"), std::string::npos) << p->remedy;
  // The node a line names is its culprit; srun's notice that it aborts the step follows a failure.
  auto node = ClassifyLog(0,
                          "srun: error: Node failure on gpu-9\nsrun: Job step aborted: Waiting up to 32 seconds "
                          "for job step to finish.\n");
  ASSERT_EQ(node.size(), 2u);
  EXPECT_EQ(node[0].Field("remote"), "gpu-9");
  EXPECT_FALSE(node[0].consequence);
  EXPECT_TRUE(node[1].consequence);
  // What srun or slurmstepd ignores is a warning, not an error.
  auto pty = ClassifyLog(0, "srun: error: Not using a pseudo-terminal, disregarding --pty option\n");
  const diagnosis::LogEvent* w = Only(pty);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->severity, diagnosis::Severity::kWarning);
  // slurmstepd names its node (Slurm 20.11+): the line is still read.
  auto tagged = ClassifyLog(0,
                            "slurmstepd-gpu3: error:  mpi/pmix_v4: pmixp_coll_ring_check: gpu-3 [2]: "
                            "pmixp_coll_ring.c:736: 0x7f3a2c000000: collective timeout seq=0\n");
  const diagnosis::LogEvent* t = Only(tagged);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind, "slurm_src_pmi");
  // A harmless message of srun without a terminal.
  for (const auto& e : ClassifyLog(0, "srun: error: ioctl(TIOCGWINSZ): Inappropriate ioctl for device\n"))
    EXPECT_NE(e.severity, diagnosis::Severity::kError) << e.summary;
  // srun's ordinary notices are no event.
  EXPECT_TRUE(ClassifyLog(0,
                          "srun: job 4242 queued and waiting for resources\n"
                          "srun: job 4242 has been allocated resources\n")
                  .empty());
}

// JAX: XLA's coordination service, through the exception JAX raises and the glog lines it writes.
TEST(JaxFormatTest, ABarrierTimeoutAndALostTaskAreNamed) {
  auto barrier = ClassifyLog(
      0,
      "Traceback (most recent call last):\n"
      "  File \"/home/u/train.py\", line 7, in <module>\n"
      "    jax.distributed.initialize()\n"
      "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Id: PjRT_Client_Connect. This "
      "usually happens because a task triggered the barrier too early or too slowly. Please look at the task logs "
      "(both timed out and first task) to debug further.\n");
  const diagnosis::LogEvent* b = Only(barrier);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->Field("cause_kind"), "jax_src_barrier");
  EXPECT_EQ(b->code, diagnosis::codes::kRankMissing);
  auto lost = ClassifyLog(0,
                          "E1207 10:11:12.123456    4242 coordination_service.cc:213] Task 3 heartbeat timeout. This "
                          "indicates that the remote task has failed, got preempted, or crashed unexpectedly. Check "
                          "the task logs for an earlier error or scheduler events (e.g. preemption, eviction) to "
                          "debug further.\n");
  const diagnosis::LogEvent* l = Only(lost);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, "jax_src_task_lost");
  EXPECT_EQ(l->subject_rank, 3);
  auto fatal = ClassifyLog(0,
                           "F1207 10:11:12.123456    4242 client.h:82] Terminating process because the JAX "
                           "distributed service detected fatal errors. This most likely indicates that another task "
                           "died; see the other task logs for more details. Disable Python buffering, i.e. `python "
                           "-u`, to be sure to see all the previous output. absl::Status: UNAVAILABLE: The following "
                           "tasks are unhealthy (stopped sending heartbeats):\n");
  const diagnosis::LogEvent* f = Only(fatal);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, "jax_src_peer_failed");
  EXPECT_TRUE(f->consequence);
  // A glog warning line is never an error, whatever words it prints.
  for (const auto& e : ClassifyLog(0,
                                   "W1207 10:11:12.123456    4242 coordination_service.cc:213] Task 3 heartbeat "
                                   "timeout. This indicates that the remote task has failed, got preempted, or "
                                   "crashed unexpectedly.\n"))
    EXPECT_NE(e.severity, diagnosis::Severity::kError) << e.summary;
  // Any other exception is not read as JAX's: only what XLA or JAX's own files raised.
  auto other = ClassifyLog(0,
                           "Traceback (most recent call last):\n"
                           "  File \"/home/u/train.py\", line 9, in <module>\n"
                           "    cfg = load()\n"
                           "KeyError: 'Config key lr not found.'\n");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].Field("cause_kind").rfind("jax_", 0), std::string::npos) << other[0].Field("cause_kind");
}

// Kubernetes, as `kubectl describe pod` shows a pod the kernel OOM-killed and that now crash-loops;
// a healthy pod's Normal events are no finding.
TEST(KubernetesFormatTest, DescribePodNamesTheOomKillAndTheCrashLoopFollows) {
  auto events = ClassifyLog(0,
                            "Name:         pytorchjob-worker-1\n"
                            "Containers:\n"
                            "  pytorch:\n"
                            "    State:          Waiting\n"
                            "      Reason:       CrashLoopBackOff\n"
                            "    Last State:     Terminated\n"
                            "      Reason:       OOMKilled\n"
                            "      Exit Code:    137\n"
                            "Events:\n"
                            "  Type     Reason     Age                From               Message\n"
                            "  ----     ------     ----               ----               -------\n"
                            "  Normal   Scheduled  12m                default-scheduler  Successfully assigned "
                            "default/pytorchjob-worker-1 to gpu-node-3\n"
                            "  Normal   Pulled     12m                kubelet            Container image "
                            "\"nvcr.io/nvidia/pytorch:24.05-py3\" already present on machine\n"
                            "  Normal   Started    12m                kubelet            Started container pytorch\n"
                            "  Warning  BackOff    3m (x5 over 10m)   kubelet            Back-off restarting failed "
                            "container pytorch in pod pytorchjob-worker-1_default(4f1c2a9e)\n");
  std::vector<std::string> kinds;
  for (const auto& e : events) {
    kinds.push_back(e.kind);
    EXPECT_EQ(e.consequence, e.kind == "k8s_src_crashloop") << e.kind;
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"k8s_src_crashloop", "k8s_src_oom", "k8s_src_crashloop"}));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].code, diagnosis::codes::kOutOfMemory);
  EXPECT_EQ(events[1].Field("source").rfind("Kubernetes ", 0), 0u) << events[1].Field("source");
}

TEST(KubernetesFormatTest, AnUnschedulableWorkerAndAFailedJobAreRead) {
  auto sched = ClassifyLog(0,
                           "5m          Warning   FailedScheduling   pod/pytorchjob-worker-3   0/8 nodes are "
                           "available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are available: 8 No "
                           "preemption victims found for incoming pod.\n");
  const diagnosis::LogEvent* s = Only(sched);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->kind, "k8s_src_scheduling");
  EXPECT_NE(s->remedy.find("nvidia.com/gpu"), std::string::npos) << s->remedy;
  auto failed = ClassifyLog(0,
                            "  Normal   PyTorchJobFailed  1m   pytorchjob-controller  PyTorchJob default/llama-ft is "
                            "failed because 1 Worker replica(s) failed.\n");
  const diagnosis::LogEvent* f = Only(failed);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, "k8s_src_replica_failed");
  EXPECT_TRUE(f->consequence);
  // A pod that waits for a node, a readiness probe that failed: warnings (the state may pass).
  for (const char* line :
       {"  Warning  FailedScheduling  45s (x3 over 2m)  default-scheduler  0/8 nodes are available: 8 Insufficient "
        "nvidia.com/gpu.\n",
        "  Warning  Unhealthy  10s (x4 over 40s)  kubelet  Readiness probe failed: HTTP probe failed with statuscode: "
        "503\n"}) {
    auto w = ClassifyLog(0, line);
    ASSERT_EQ(w.size(), 1u) << line;
    EXPECT_EQ(w[0].severity, diagnosis::Severity::kWarning) << line;
  }
  // kubectl pads its columns: a reason with blanks after it.
  auto padded = ClassifyLog(0, "      Reason:       OOMKilled   \n");
  ASSERT_EQ(padded.size(), 1u);
  EXPECT_EQ(padded[0].kind, "k8s_src_oom");
  // A container that completed, a probe that passed: nothing.
  EXPECT_TRUE(ClassifyLog(0,
                          "      Reason:       Completed\n"
                          "  Normal   Killing    1m    kubelet   Stopping container pytorch\n")
                  .empty());
}

// --explain for every entry and family ends, and shows each family with a traceback example indented.
TEST(ExplainTest, EveryEntryAndFamilyIsExplainedWithItsExamples) {
  const std::string all = ExplainPatterns("all");
  for (const char* kind :
       {"nccl_ib_retry_exceeded", "nccl_src_ib", "torch_src_store", "ds_src_hostfile", "cuda_src_graph",
        "torch_wait_timeout", "slurm_src_pmi", "ompi_src_tcp", "jax_src_barrier", "k8s_src_oom"})
    EXPECT_NE(all.find(std::string(kind) + "  ("), std::string::npos) << kind;
  const std::string store = ExplainPatterns("torch_src_store");
  EXPECT_NE(store.find("  example: Traceback (most recent call last):\n           "), std::string::npos) << store;
  EXPECT_TRUE(ExplainPatterns("NO_SUCH_CODE").empty());
}

TEST(CoverageTest, DocsLogCoverageIsTheGeneratedTable) {
  std::ifstream in(std::string(DOCS_DIR) + "/log-coverage.md");
  std::stringstream doc;
  doc << in.rdbuf();
  EXPECT_EQ(doc.str(), CoverageMarkdown()) << "regenerate with: dsdoctor analyze --coverage > docs/log-coverage.md";
}

}  // namespace
}  // namespace dsd::collectors
