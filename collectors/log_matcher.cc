#include "collectors/log_matcher.h"

#include <re2/re2.h>

#include <cstring>

#ifdef DSDOCTOR_HAVE_HYPERSCAN
#include <hs/hs.h>
#endif

namespace dsd::collectors {
namespace {

// The line around byte `at` of `block`: [begin, end).
void LineAround(std::string_view block, size_t at, size_t* begin, size_t* end) {
  const char* base = block.data();
  const void* nl_before = at ? ::memrchr(base, '\n', at) : nullptr;
  *begin = nl_before ? static_cast<const char*>(nl_before) - base + 1 : 0;
  const void* nl_after = ::memchr(base + at, '\n', block.size() - at);
  *end = nl_after ? static_cast<const char*>(nl_after) - base : block.size();
}

class Re2Scanner : public LineScanner {
 public:
  explicit Re2Scanner(std::shared_ptr<const RE2> re) : re_(std::move(re)) {}
  void Scan(std::string_view block, const OnLine& on_line) override {
    re2::StringPiece text(block.data(), block.size());
    re2::StringPiece m;
    size_t pos = 0;
    while (pos < block.size() && re_->Match(text, pos, block.size(), RE2::UNANCHORED, &m, 1)) {
      size_t at = m.data() - block.data();
      size_t begin, end;
      // An empty match at a line end belongs to that line.
      LineAround(block, at < block.size() ? at : block.size() - 1, &begin, &end);
      if (!on_line(begin, end)) return;
      pos = end + 1;
    }
  }
  const char* engine() const override { return "re2"; }

 private:
  std::shared_ptr<const RE2> re_;  // RE2 matching is thread-safe
};

class Re2Engine : public LineEngine {
 public:
  explicit Re2Engine(const std::vector<std::string>& triggers) {
    std::string alt;
    for (const auto& t : triggers) alt += (alt.empty() ? "(?:" : "|(?:") + t + ")";
    RE2::Options o;
    o.set_log_errors(false);
    o.set_max_mem(256 << 20);
    o.set_never_capture(true);
    re_ = std::make_shared<RE2>(alt, o);
  }
  std::unique_ptr<LineScanner> NewScanner() const override { return std::make_unique<Re2Scanner>(re_); }

 private:
  std::shared_ptr<const RE2> re_;
};

#ifdef DSDOCTOR_HAVE_HYPERSCAN
class HyperscanScanner : public LineScanner {
 public:
  HyperscanScanner(std::shared_ptr<const hs_database_t> db, hs_scratch_t* scratch)
      : db_(std::move(db)), scratch_(scratch) {}
  ~HyperscanScanner() override { hs_free_scratch(scratch_); }
  void Scan(std::string_view block, const OnLine& on_line) override {
    struct Ctx {
      std::string_view block;
      const OnLine* on_line;
      size_t next = 0;  // lines before this offset were reported
    } ctx{block, &on_line};
    auto on_match = [](unsigned, unsigned long long, unsigned long long to, unsigned, void* p) -> int {
      Ctx& c = *static_cast<Ctx*>(p);
      size_t last = to ? to - 1 : 0;
      if (last < c.next || c.block.empty()) return 0;
      size_t begin, end;
      LineAround(c.block, last, &begin, &end);
      if (begin < c.next) begin = c.next;  // a match spanning a line break: report the line it ends in
      c.next = end + 1;
      return (*c.on_line)(begin, end) ? 0 : 1;  // non-zero stops the scan
    };
    hs_scan(db_.get(), block.data(), static_cast<unsigned>(block.size()), 0, scratch_, on_match, &ctx);
  }
  const char* engine() const override { return "hyperscan"; }

 private:
  std::shared_ptr<const hs_database_t> db_;
  hs_scratch_t* scratch_;
};

class HyperscanEngine : public LineEngine {
 public:
  explicit HyperscanEngine(hs_database_t* db)
      : db_(db, [](const hs_database_t* d) { hs_free_database(const_cast<hs_database_t*>(d)); }) {}
  std::unique_ptr<LineScanner> NewScanner() const override {
    hs_scratch_t* scratch = nullptr;
    if (hs_alloc_scratch(db_.get(), &scratch) != HS_SUCCESS) return nullptr;
    return std::make_unique<HyperscanScanner>(db_, scratch);
  }

 private:
  std::shared_ptr<const hs_database_t> db_;
};
#endif

}  // namespace

std::shared_ptr<const LineEngine> CompileHyperscan(const std::vector<std::string>& triggers, std::string* why) {
#ifdef DSDOCTOR_HAVE_HYPERSCAN
  std::vector<const char*> expressions;
  std::vector<unsigned> flags, ids;
  for (size_t i = 0; i < triggers.size(); ++i) {
    expressions.push_back(triggers[i].c_str());
    flags.push_back(HS_FLAG_MULTILINE | HS_FLAG_ALLOWEMPTY);
    ids.push_back(static_cast<unsigned>(i));
  }
  hs_database_t* db = nullptr;
  hs_compile_error_t* error = nullptr;
  if (hs_compile_multi(expressions.data(), flags.data(), ids.data(), static_cast<unsigned>(expressions.size()),
                       HS_MODE_BLOCK, nullptr, &db, &error) != HS_SUCCESS) {
    if (why) {
      int at = error ? error->expression : -1;
      *why = std::string("hyperscan: ") + (error ? error->message : "compile failed") +
             (at >= 0 && at < static_cast<int>(triggers.size()) ? " in trigger '" + triggers[at] + "'" : "");
    }
    hs_free_compile_error(error);
    return nullptr;
  }
  auto engine = std::make_shared<HyperscanEngine>(db);
  if (!engine->NewScanner()) {
    if (why) *why = "hyperscan: cannot allocate scratch (CPU without SSSE3?)";
    return nullptr;
  }
  return engine;
#else
  if (why) *why = "built without Hyperscan";
  return nullptr;
#endif
}

std::shared_ptr<const LineEngine> CompileRe2(const std::vector<std::string>& triggers) {
  return std::make_shared<Re2Engine>(triggers);
}

std::unique_ptr<LineScanner> MakeHyperscanScanner(const std::vector<std::string>& triggers, std::string* why) {
  auto engine = CompileHyperscan(triggers, why);
  return engine ? engine->NewScanner() : nullptr;
}

std::unique_ptr<LineScanner> MakeRe2Scanner(const std::vector<std::string>& triggers) {
  return CompileRe2(triggers)->NewScanner();
}

}  // namespace dsd::collectors
