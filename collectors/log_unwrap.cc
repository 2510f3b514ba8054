#include "collectors/log_unwrap.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace dsd::collectors {
namespace {

constexpr int kMinWidth = 60;   // narrower "terminals" are more likely a fixed-format log
constexpr int kMaxWidth = 512;  // wider is no terminal anyone pastes from
constexpr int kMaxLines = 20000;

std::string_view WithoutCr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// "-----", "=====", "*****": a box's or a help text's rule, the width of its text, not a wrap.
bool IsRule(std::string_view line) {
  if (line.size() < 8) return false;
  size_t same = std::count(line.begin(), line.end(), line[0]);
  return !std::isalnum(static_cast<unsigned char>(line[0])) && same * 10 >= line.size() * 9;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

int DisplayColumns(std::string_view line) {
  line = WithoutCr(line);
  int cols = 0;
  for (unsigned char c : line) {
    if (c == '\t')
      cols = (cols / 8 + 1) * 8;
    else if ((c & 0xC0) != 0x80)  // not a UTF-8 continuation byte
      ++cols;
  }
  return cols;
}

bool StartsRecord(std::string_view line, const PrefixDialect& dialect) {
  line = WithoutCr(line);
  LinePrefix p;
  std::string_view message = StripPrefixes(line, dialect, &p);
  if (message.size() < line.size()) return true;
  static constexpr std::string_view kStarts[] = {"Killed",
                                                 "srun:",
                                                 "slurmstepd",
                                                 "terminate called",
                                                 "Segmentation fault",
                                                 "Traceback (most recent call last)",
                                                 "During handling of the above exception",
                                                 "The above exception was the direct cause",
                                                 "  File \"",
                                                 "WARNING",
                                                 "ERROR",
                                                 "INFO",
                                                 "DEBUG",
                                                 "CRITICAL",
                                                 "FATAL",
                                                 "NCCL ",
                                                 "[E",
                                                 "[W",
                                                 "[I",
                                                 "E0",
                                                 "E1",
                                                 "W0",
                                                 "W1",
                                                 "I0",
                                                 "I1"};
  for (std::string_view s : kStarts)
    if (StartsWith(line, s)) return true;
  // A Python exception or warning line: "RuntimeError: …", "torch.distributed.DistBackendError: …".
  size_t word = 0;
  while (word < line.size() && word < 128 &&
         (std::isalnum(static_cast<unsigned char>(line[word])) || line[word] == '_' || line[word] == '.'))
    ++word;
  if (word < line.size() && line[word] == ':') {
    const std::string_view name = line.substr(0, word);
    for (std::string_view tail : {"Error", "Exception", "Warning", "Interrupt", "Exit"})
      if (name.size() > tail.size() && name.substr(name.size() - tail.size()) == tail) return true;
  }
  return false;
}

WrapShape DetectWrap(std::string_view head, const PrefixDialect& dialect) {
  std::vector<std::string_view> lines;
  std::vector<int> cols;
  size_t pos = 0;
  int width = 0;
  while (pos < head.size() && static_cast<int>(lines.size()) < kMaxLines) {
    const void* nl = std::memchr(head.data() + pos, '\n', head.size() - pos);
    size_t end = nl ? static_cast<const char*>(nl) - head.data() : head.size();
    std::string_view line = WithoutCr(head.substr(pos, end - pos));
    if (line.size() > 4 * kMaxWidth) return {};  // a line no terminal wrapped
    lines.push_back(line);
    cols.push_back(DisplayColumns(line));
    width = std::max(width, cols.back());
    pos = end + 1;
  }
  if (width < kMinWidth || width > kMaxWidth) return {};
  // The signal is a line that starts no record after a full-width one: it says something only in a
  // log whose records do start with a prefix, a timestamp or a level (in a log of plain prints every
  // line "starts no record", and a fixed-format progress line followed by a checkpoint message, or a
  // warning followed by its source line, would read as wrapped). So lines that follow a shorter
  // line (which begin a record) must be seen to start one: a quarter at least, since a torchrun log's
  // prints have no prefix where its C++ lines do.
  int starts = 0, started = 0;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    if (cols[i] >= width || lines[i + 1].empty()) continue;
    ++starts;
    started += StartsRecord(lines[i + 1], dialect);
  }
  if (starts < 3 || started < 2 || started * 4 < starts) return {};
  int at_width = 0, continued = 0, ended = 0;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    if (cols[i] != width || IsRule(lines[i])) continue;
    ++at_width;
    const std::string_view next = lines[i + 1];
    if (next.empty() || IsRule(next) || StartsRecord(next, dialect)) continue;
    ++continued;
    if (cols[i + 1] < width) ++ended;
  }
  // Most lines at the width are continued, and a good share of the continuations end their record.
  if (continued >= 3 && continued * 10 >= at_width * 6 && ended >= 2 && ended * 4 >= continued)
    return {width, continued};
  return {};
}

std::string Unwrap(std::string_view text, int width, const PrefixDialect& dialect, int64_t first_line,
                   int64_t first_offset, size_t max_line_bytes, std::vector<LineOrigin>* origins, int64_t* joins) {
  std::string out;
  out.reserve(text.size());
  origins->clear();
  *joins = 0;
  size_t pos = 0;
  int64_t line = first_line;
  bool open = false;        // the last piece of `out` was exactly `width` wide: it may go on
  size_t joined_start = 0;  // where the current joined line began in `out`
  while (pos <= text.size()) {
    const void* nl = std::memchr(text.data() + pos, '\n', text.size() - pos);
    const size_t end = nl ? static_cast<const char*>(nl) - text.data() : text.size();
    std::string_view piece = text.substr(pos, end - pos);
    const std::string_view bare = WithoutCr(piece);
    const bool joins_previous = open && !bare.empty() && !IsRule(bare) && !StartsRecord(bare, dialect) &&
                                out.size() - joined_start + bare.size() <= max_line_bytes;
    if (joins_previous) {
      if (!out.empty() && out.back() == '\r') out.pop_back();
      ++*joins;
    } else {
      if (!origins->empty()) out += '\n';
      joined_start = out.size();
      origins->push_back({line, first_offset + static_cast<int64_t>(pos)});
    }
    out.append(piece);
    open = DisplayColumns(bare) == width && !IsRule(bare);
    ++line;
    if (!nl) break;
    pos = end + 1;
    if (pos == text.size()) break;  // the final '\n' ends the last line; no empty line after it
  }
  return out;
}

}  // namespace dsd::collectors
