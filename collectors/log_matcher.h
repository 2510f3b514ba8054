// Candidate-line pre-scanners: find, in a block of log text, the lines some catalogue entry might
// match, so the classifier looks at a few lines instead of all of them. One interface, two
// engines: Hyperscan (SIMD multi-pattern, several GB/s; built when the library is found) and
// RE2 (one alternation, linear time; always built). Both return a superset of the lines whose
// message a trigger matches, in order, each line once.
// A LineEngine is the compiled trigger set: immutable and thread-safe, compiled once and shared.
// A LineScanner holds per-scan scratch: one per thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsd::collectors {

class LineScanner {
 public:
  virtual ~LineScanner() = default;
  // Calls on_line(begin, end) for every line of `block` (bytes [begin, end), without its '\n')
  // a trigger matches, until it returns false. `block` should end at a line end (a last line
  // without '\n' is scanned too).
  using OnLine = std::function<bool(size_t begin, size_t end)>;
  virtual void Scan(std::string_view block, const OnLine& on_line) = 0;
  virtual const char* engine() const = 0;  // "hyperscan" | "re2"
};

class LineEngine {
 public:
  virtual ~LineEngine() = default;
  virtual std::unique_ptr<LineScanner> NewScanner() const = 0;
};

// nullptr when this build has no Hyperscan, or a trigger does not compile there (`why` says which).
std::shared_ptr<const LineEngine> CompileHyperscan(const std::vector<std::string>& triggers, std::string* why);
std::shared_ptr<const LineEngine> CompileRe2(const std::vector<std::string>& triggers);

// Compile and take one scanner (tests).
std::unique_ptr<LineScanner> MakeHyperscanScanner(const std::vector<std::string>& triggers, std::string* why);
std::unique_ptr<LineScanner> MakeRe2Scanner(const std::vector<std::string>& triggers);

}  // namespace dsd::collectors
