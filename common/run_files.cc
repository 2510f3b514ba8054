#include "common/run_files.h"

namespace dsd {

namespace {
constexpr std::string_view kRankPrefix = "rank-";
constexpr size_t kMaxRankDigits = 7;
}  // namespace

std::string_view RankFileExtension(RankFile kind) {
  switch (kind) {
    case RankFile::kLog:
      return "log";
    case RankFile::kTrace:
      return "trace";
    case RankFile::kExit:
      return "exit";
    case RankFile::kStack:
      return "stack";
    case RankFile::kFlightRecorder:
      return "flight_recorder";
  }
  return "log";
}

std::string RankFileName(int rank, RankFile kind) {
  std::string name(kRankPrefix);
  name += std::to_string(rank);
  name += '.';
  name += RankFileExtension(kind);
  return name;
}

std::optional<ParsedRunFileName> ParseRunFileName(std::string_view name) {
  if (name.substr(0, kRankPrefix.size()) != kRankPrefix) return std::nullopt;
  name.remove_prefix(kRankPrefix.size());
  size_t digits = 0;
  int rank = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') {
    rank = rank * 10 + (name[digits] - '0');
    if (++digits > kMaxRankDigits) return std::nullopt;
  }
  if (digits == 0 || digits >= name.size() || name[digits] != '.') return std::nullopt;
  if (digits > 1 && name[0] == '0') return std::nullopt;  // never written so: "rank-07.log" is another file
  std::string_view ext = name.substr(digits + 1);
  for (RankFile kind : {RankFile::kLog, RankFile::kTrace, RankFile::kExit, RankFile::kStack})
    if (ext == RankFileExtension(kind)) return ParsedRunFileName{rank, kind};
  return std::nullopt;
}

std::optional<ParsedRunFileName> ParseRunFilePath(std::string_view path) {
  size_t slash = path.rfind('/');
  return ParseRunFileName(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string RunDir::Join(std::string_view name) const {
  std::string p = path_;
  if (!p.empty() && p.back() != '/') p.push_back('/');
  p.append(name);
  return p;
}

}  // namespace dsd
