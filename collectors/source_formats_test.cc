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
  for (FormatSource source :
       {FormatSource::kNccl, FormatSource::kTorch, FormatSource::kDeepSpeed, FormatSource::kCuda}) {
    const FormatMatcher& m = FormatMatcher::Default(source);
    EXPECT_GT(m.patterns(), source == FormatSource::kDeepSpeed ? 30u : source == FormatSource::kCuda ? 120u : 500u);
    for (const SourceFormat& f : BuiltinFormats(source).formats) {
      if (!Distinctive(source, f.format)) continue;
      FormatMatch got;
      std::string example = FormatExample(source, f.format);
      ASSERT_TRUE(m.Match(example, &got)) << f.path << ":" << f.line << " " << f.format;
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

// --explain for every entry and family ends, and shows each family with a traceback example indented.
TEST(ExplainTest, EveryEntryAndFamilyIsExplainedWithItsExamples) {
  const std::string all = ExplainPatterns("all");
  for (const char* kind : {"nccl_ib_retry_exceeded", "nccl_src_ib", "torch_src_store", "ds_src_hostfile",
                           "cuda_src_graph", "torch_wait_timeout"})
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
