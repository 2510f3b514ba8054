// libFuzzer target for everything a rank's output goes through in `analyze` and `run`: launcher
// prefixes, the pre-scanners, the pattern catalogue, the multi-line classifier (tracebacks,
// launcher tables) and the cross-rank rules of the engine; also torchrun's error file
// (collectors/torchelastic_error.h). Arbitrary bytes must give events and findings, never a crash,
// a hang or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "collectors/log_classifier.h"
#include "collectors/log_scan.h"
#include "collectors/torchelastic_error.h"
#include "diagnosis/engine.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the block size and the pre-scanner, so lines crossing blocks and both
  // engines are explored.
  dsd::collectors::LogScanOptions options;
  options.block_bytes = 16 + data[0] % 128;
  options.max_line_bytes = 64 + data[0] % 256;
  setenv("DSDOCTOR_LOG_SCANNER", data[0] & 1 ? "re2" : "hyperscan", 1);
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  // A file analyze is given may be torchrun's error file (JSON): read as such when it is one.
  if (auto error = dsd::collectors::ParseTorchElasticError(text))
    (void)dsd::collectors::TorchElasticErrorAsLog(*error);
  dsd::collectors::LogScanner scanner(options);
  scanner.AddText(text, {"fuzz.log", data[0] & 2 ? 1 : -1, ""});
  dsd::collectors::LogScanResult r = scanner.Finish();
  // The live path: every line of one rank's output through one classifier.
  dsd::collectors::LogClassifier live(0);
  for (size_t pos = 0; pos <= text.size();) {
    size_t nl = text.find('\n', pos);
    live.Feed(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  live.Finish();
  dsd::diagnosis::JobState job;
  job.logs_only = true;
  job.world_size = std::min(r.world_size, 64);
  job.ranks.resize(job.world_size);
  for (int i = 0; i < job.world_size; ++i)
    job.ranks[i].rank = i, job.ranks[i].status = dsd::diagnosis::RankStatus::kRunning;
  for (auto& e : r.events) {
    if (e.rank >= job.world_size) e.rank = -1;
    if (e.subject_rank >= job.world_size) e.subject_rank = -1;
    job.events.push_back(std::move(e));
  }
  (void)dsd::diagnosis::Diagnose(job);
  return 0;
}
