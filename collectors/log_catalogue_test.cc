// The catalogue's example lines (log_catalogue_examples.cc): the entry that wins for each line, the
// fields it extracts, and that both pre-scanners find the line with its launcher prefix.
#include "collectors/log_catalogue.h"

#include <gtest/gtest.h>

#include <set>

#include "collectors/log_classifier.h"
#include "collectors/log_matcher.h"
#include "common/file.h"

namespace dsd::collectors {
namespace {

using Example = CatalogueExample;
const std::vector<CatalogueExample>& kExamples = CatalogueExamples();

std::map<std::string, std::string> ParseFields(const std::string& spec) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t semi = spec.find(';', pos);
    std::string kv = spec.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    size_t eq = kv.find('=');
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
    if (semi == std::string::npos) break;
    pos = semi + 1;
  }
  return out;
}

class CatalogueEntryTest : public ::testing::TestWithParam<Example> {};

TEST_P(CatalogueEntryTest, TheEntryWinsForItsLineWithItsFields) {
  const Example& ex = GetParam();
  PatternMatch m;
  // The message as the scanner hands it over: the line's launcher prefixes stay where they are
  // (matching is unanchored), except "[rank7]: "-style ones which the scanner strips.
  ASSERT_TRUE(LogPatternSet::Default().Match(ex.line, &m)) << ex.line;
  EXPECT_STREQ(m.pattern->kind, ex.kind) << ex.line;
  for (auto& [k, v] : ParseFields(ex.fields)) EXPECT_EQ(m.Field(k.c_str()), v) << ex.kind << " field " << k;
  // Every finding names a cause and says what to do.
  if (m.pattern->role != LogRole::kContext) {
    EXPECT_GT(std::string(m.pattern->remedy).size(), 40u) << ex.kind;
    EXPECT_FALSE(m.Summary().empty());
    EXPECT_EQ(m.Summary().find('{'), std::string::npos) << "unfilled field in " << m.Summary();
  }
}

TEST_P(CatalogueEntryTest, BothPreScannersFindTheLine) {
  const Example& ex = GetParam();
  // Built once for every example: compiling the whole catalogue takes a while (longer under ASan).
  static const std::vector<std::unique_ptr<LineScanner>> scanners = [] {
    std::vector<std::string> triggers;
    for (const LogPattern& p : Catalogue()) triggers.push_back(TriggerOf(p.regex));
    std::vector<std::unique_ptr<LineScanner>> all;
    all.push_back(MakeRe2Scanner(triggers));
    if (auto hs = MakeHyperscanScanner(triggers, nullptr)) all.push_back(std::move(hs));  // absent without Hyperscan
    return all;
  }();
  std::string text = std::string("step 1 loss 0.5\n") + ex.line + "\nstep 2 loss 0.4\n";
  for (auto& scanner : scanners) {
    std::vector<std::string> lines;
    scanner->Scan(text, [&](size_t b, size_t e) {
      lines.push_back(text.substr(b, e - b));
      return true;
    });
    EXPECT_EQ(lines, std::vector<std::string>{ex.line}) << scanner->engine();
  }
}

INSTANTIATE_TEST_SUITE_P(Catalogue, CatalogueEntryTest, ::testing::ValuesIn(kExamples), [](const auto& info) {
  return std::string(info.param.kind) + "_" + std::to_string(info.index);
});

TEST(CatalogueTest, EveryEntryHasAnExampleAndAUniqueKind) {
  std::set<std::string> with_example, kinds;
  for (const Example& ex : kExamples) with_example.insert(ex.kind);
  for (const LogPattern& p : Catalogue()) {
    EXPECT_TRUE(kinds.insert(p.kind).second) << "duplicate kind " << p.kind;
    EXPECT_TRUE(with_example.count(p.kind)) << "catalogue entry without a test line: " << p.kind;
    EXPECT_TRUE(diagnosis::IsKnownCode(p.code)) << p.kind;
  }
}

TEST(CatalogueTest, HyperscanCompilesEveryTrigger) {
  std::vector<std::string> triggers;
  for (const LogPattern& p : Catalogue()) triggers.push_back(TriggerOf(p.regex));
  for (auto& t : LogClassifier::Triggers()) triggers.push_back(t);
  std::string why;
  auto hs = MakeHyperscanScanner(triggers, &why);
  if (!hs && why == "built without Hyperscan") GTEST_SKIP() << why;
  EXPECT_TRUE(hs) << why;
}

TEST(CatalogueTest, DocsListEveryEntryAsTheCatalogueHasIt) {
  auto doc = ReadFile(DOCS_DIR "/log-patterns.md");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(*doc, CatalogueMarkdown())
      << "regenerate: ./build/bin/dsdoctor analyze --list-patterns > docs/log-patterns.md";
}

TEST(CatalogueTest, TriggerDropsGroupsAndAnchors) {
  EXPECT_EQ(TriggerOf(R"(^(?:Killed|x)\s*$)"), "(?:Killed|x)");
  EXPECT_EQ(TriggerOf(R"(rank (?P<self_rank>\d+) of)"), R"(rank (?:\d+) of)");
  EXPECT_EQ(TriggerOf(R"(^MemoryError\b)"), R"(MemoryError\b)");
}

TEST(CatalogueTest, OrdinaryTrainingOutputIsNoEvent) {
  for (const char* line :
       {"step 10 loss 0.25 lr 1e-4",
        "[2024-05-01 12:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0",
        "node1:1234:1300 [0] NCCL INFO Channel 00/02 :    0   1",
        "node1:1234:1300 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
        "node1:1234:1300 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
        "node1:1234:1300 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.",
        "Epoch 1:  45%|████▌     | 45/100 [00:10<00:12,  4.41it/s, loss=0.123]", "saving checkpoint to /ckpt/step100",
        // Offline Hugging Face Hub and wandb retries: name resolution that is no job's.
        "WARNING:huggingface_hub.utils._http:'(MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', "
        "port=443): Max retries exceeded with url: /api/models (Caused by NewConnectionError('<urllib3."
        "connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno -3] "
        "Temporary failure in name resolution'))\"), '(Request ID: 1)')' thrown while requesting HEAD",
        "hostname: Name or service not known",
        "node1:1234:1300 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to lo,eth0"}) {
    // At most a context entry (the interface NCCL uses is a fact for attribution), and no event.
    PatternMatch m;
    if (LogPatternSet::Default().Match(line, &m))
      EXPECT_EQ(m.pattern->role, LogRole::kContext) << line << " matched " << m.pattern->kind;
    EXPECT_TRUE(ClassifyLog(0, line).empty()) << line;
  }
}

}  // namespace
}  // namespace dsd::collectors
