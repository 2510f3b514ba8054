#include "collectors/log_scan.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <tuple>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "collectors/log_catalogue.h"
#include "collectors/log_classifier.h"
#include "collectors/log_matcher.h"
#include "collectors/log_prefix.h"
#include "collectors/log_unwrap.h"
#include "common/strings.h"

namespace dsd::collectors {
namespace {

using diagnosis::LogEvent;

// Lines of the start of a file that teach the prefix dialect.
constexpr int kDialectLines = 2000;
// A stream whose traceback stays open this many lines of its file without a line of its own is
// closed (its process died while printing), so the rest of the file is not read line by line.
constexpr int64_t kStaleLines = 20000;
// An mpirun line left unfinished (a write without a newline) this many lines ago is taken as it
// is: a progress bar redrawn with '\r' may never end its line.
constexpr int64_t kStalePartialLines = 64;
constexpr size_t kMaxPartials = 1024;

struct StreamKey {
  int file = 0;
  std::string host;
  int rank = -1, local_rank = -1, pid = 0;
  std::string channel;  // stdout/stderr when the launcher says which
  bool operator<(const StreamKey& o) const {
    return std::tie(file, host, rank, local_rank, pid, channel) <
           std::tie(o.file, o.host, o.rank, o.local_rank, o.pid, o.channel);
  }
};

struct Stream {
  StreamKey key;
  std::unique_ptr<LogClassifier> classifier;
  std::vector<LogEvent> events;
  std::map<std::string, size_t> per_kind;  // kind → events seen (kept or not)
  int64_t last_line = 0;
};

// mpirun: a rank's write that did not end its line; the rest comes behind the same tag later.
struct Partial {
  std::string text;
  int64_t line = 0, offset = 0;  // where the line began
  LinePrefix prefix;             // the prefixes the line began with (they say which stream it is)
};

// Replaces bytes that are not valid UTF-8 (and control characters but tab) with '?', so text
// from binary or mis-encoded logs prints and serialises safely.
std::string CleanText(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    if (c < 0x80) {
      out += (c < 0x20 && c != '\t') || c == 0x7f ? '?' : static_cast<char>(c);
      ++i;
      continue;
    }
    int n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size() && c >= 0xc2 && c <= 0xf4;
    for (int k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

// Newlines in [p, end): SSE2 where there is one (16 bytes per step), 8-byte SWAR elsewhere. Line
// numbers need every newline counted, and this count is most of analyze's time on a clean log.
size_t CountNewlines(const char* p, const char* end) {
  size_t n = 0;
#if defined(__SSE2__)
  // Per-byte counters (a match is -1, subtracted), summed with SAD before they can overflow.
  const __m128i nl = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
  while (end - p >= 16) {
    __m128i counts = zero;
    for (int i = 0; i < 255 && end - p >= 16; ++i, p += 16)
      counts = _mm_sub_epi8(counts, _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), nl));
    __m128i sums = _mm_sad_epu8(counts, zero);
    n += static_cast<size_t>(_mm_cvtsi128_si32(sums)) + static_cast<size_t>(_mm_extract_epi16(sums, 4));
  }
#endif
  for (; end - p >= 8; p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    uint64_t x = w ^ 0x0a0a0a0a0a0a0a0aULL;  // newline bytes become zero
    uint64_t nonzero = ((x & 0x7f7f7f7f7f7f7f7fULL) + 0x7f7f7f7f7f7f7f7fULL) | x;
    n += __builtin_popcountll(~nonzero & 0x8080808080808080ULL);
  }
  for (; p < end; ++p) n += *p == '\n';
  return n;
}

// The catalogue's triggers, compiled once per process and shared by every scanner (engines are
// immutable; each scanner has its own scratch). Hyperscan is compiled on first use only.
const std::vector<std::string>& CatalogueTriggers() {
  static const std::vector<std::string> triggers = [] {
    std::vector<std::string> t;
    for (const LogPattern& p : Catalogue()) t.push_back(TriggerOf(p.regex));
    for (auto& x : LogClassifier::Triggers()) t.push_back(x);
    return t;
  }();
  return triggers;
}
std::unique_ptr<LineScanner> CatalogueScanner(bool hyperscan) {
  if (hyperscan) {
    static const std::shared_ptr<const LineEngine> hs = CompileHyperscan(CatalogueTriggers(), nullptr);
    if (hs)
      if (auto s = hs->NewScanner()) return s;
    return nullptr;
  }
  static const std::shared_ptr<const LineEngine> re2 = CompileRe2(CatalogueTriggers());
  return re2->NewScanner();
}

}  // namespace

// Hyperscan scans ~4x faster than RE2 here but takes ~0.2 s to compile the catalogue: worth it
// from about this much input on.
constexpr uint64_t kHyperscanFromBytes = 128ull << 20;

struct LogScanner::Impl {
  LogScanOptions options;
  std::unique_ptr<LineScanner> scanner;
  bool upgraded = false;  // Hyperscan tried (or ruled out)
  uint64_t expected = 0;  // bytes the inputs hold, as far as known (ExpectBytes, file sizes)
  uint64_t added = 0;     // sizes of the regular files added so far
  std::map<StreamKey, size_t> index;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::string> files;  // display names
  std::vector<int> file_ranks;
  std::vector<bool> agent_files;  // LogInput::agents, by file
  LogScanResult result;
  uint64_t dropped = 0;
  size_t kept = 0;

  // Per-file state.
  int file = -1;
  size_t first_stream = 0;  // streams[first_stream..] belong to this file
  PrefixDialect dialect;
  WrapShape wrap;                            // the file's terminal width when it is a wrapped paste (log_unwrap.h)
  bool json_records = false;                 // the file is JSON log records (DecodeJsonLogLine), decoded block by block
  const JsonLogLine* line_record = nullptr;  // while Lines() hands a decoded line on: its record
  int64_t unwrap_joins = 0;                  // line breaks undone in it
  int64_t line_no = 0;                       // lines of the file before the current block
  int64_t offset = 0;                        // byte offset of the current block in the file
  std::set<size_t> pending;                  // streams with an open traceback or table
  std::map<std::string, Partial> partials;   // by mpirun tag: this file's lines not yet ended

  // The index of the stream a line with these prefixes belongs to (created on first use).
  size_t StreamFor(const LinePrefix& p) {
    StreamKey k{file, p.host, p.rank, p.local_rank, p.pid, p.channel};
    auto it = index.find(k);
    if (it != index.end()) return it->second;
    if (streams.size() >= options.max_streams) {
      // Bizarre prefixes (a different "host" on every line): one stream per file from here on.
      k = StreamKey{file, "", -2, -1, 0, ""};
      it = index.find(k);
      if (it != index.end()) return it->second;
    }
    auto s = std::make_unique<Stream>();
    s->key = k;
    int rank = k.rank >= 0 ? k.rank : file_ranks[file];
    s->classifier = std::make_unique<LogClassifier>(rank);
    index.emplace(k, streams.size());
    streams.push_back(std::move(s));
    return streams.size() - 1;
  }

  void Keep(Stream& s, std::vector<LogEvent>&& events, const LinePrefix& p, int64_t line_offset) {
    for (LogEvent& e : events) {
      size_t seen = ++s.per_kind[e.kind];
      if (seen > options.max_events_per_kind || kept >= options.max_events) {
        ++dropped;
        continue;
      }
      ++kept;
      e.file = files[file];
      if (e.host.empty()) e.host = p.host;
      if (!e.pid) e.pid = p.pid;
      if (e.offset < 0) e.offset = line_offset;  // a traceback carries its first line's offset
      if (!e.time_ns) e.time_ns = p.time_ns;
      e.text = CleanText(e.text);
      e.summary = CleanText(e.summary);
      e.remedy = CleanText(e.remedy);
      e.host = CleanText(e.host.substr(0, 253));
      e.location = CleanText(e.location);
      s.events.push_back(std::move(e));
    }
  }

  // One line of the file: [begin, end) of `block`, its line number in the file. A line longer than
  // max_line_bytes is classified as LineDigest says.
  void Line(std::string_view line, int64_t number, int64_t line_offset) {
    if (line.size() <= options.max_line_bytes) return LineOnce(line, number, line_offset);
    LineDigest(line.substr(0, options.max_line_bytes), line.substr(line.size() - options.max_line_bytes), number,
               line_offset);
  }
  // An over-long line, from its first and last max_line_bytes. A progress bar ('\r' in its end) is
  // classified by its start and, apart, by what follows the last '\r' ("…\rKilled") under the
  // start's launcher prefix. Any other line once, as its first and last halves around a mark: an
  // exception whose message is a huge repr keeps both its type (start) and its cause (end), and a
  // line inside a traceback keeps its indentation, so the traceback goes on.
  void LineDigest(std::string_view head, std::string_view tail, int64_t number, int64_t line_offset) {
    if (tail.find('\r') != std::string_view::npos) {
      LineOnce(head, number, line_offset);
      return LineTail(head, tail, number, line_offset);
    }
    const size_t half = options.max_line_bytes / 2;
    std::string digest(head.substr(0, half));
    digest += " [...] ";
    digest += tail.substr(tail.size() > half ? tail.size() - half : 0);
    LineOnce(digest, number, line_offset);
  }
  void LineTail(std::string_view head, std::string_view tail, int64_t number, int64_t line_offset) {
    size_t cr = tail.find('\r');
    if (cr != std::string_view::npos) tail.remove_prefix(cr + 1);
    LinePrefix p;
    std::string_view message = StripPrefixes(head, dialect, &p);
    std::string joined(head.substr(0, head.size() - message.size()));
    joined += tail;
    LineOnce(joined, number, line_offset);
  }
  void LineOnce(std::string_view line, int64_t number, int64_t line_offset) {
    LinePrefix p;
    // A container runtime's JSON line carries the program's line as an escaped string: that line is
    // read, under what the record says of it (its stream, time, pod) where the line itself is silent.
    // In a file of such records the block was decoded before the pre-scan (Block): the record's
    // fields come with the line. A record in a file of text is decoded here.
    JsonLogLine json;
    const JsonLogLine* record = line_record;
    if (!record && !line.empty() && (line.front() == '{' || line.front() == ' ') && DecodeJsonLogLine(line, &json)) {
      line = json.text;
      record = &json;
    }
    if (record) {
      if (record->time_ns) p.time_ns = record->time_ns;
      if (!record->host.empty()) p.host = record->host;
      if (!record->stream.empty()) p.channel = record->stream;
    }
    std::string_view message = StripPrefixes(line, dialect, &p);
    if (!p.mpi_tag.empty()) return TaggedLine(line, p, message, number, line_offset);
    Feed(StreamFor(p), message, p, number, line_offset);
  }

  // A line of mpirun --tag-output: each write of a rank comes behind its tag, so one line of the
  // file can hold the end of one rank's line, a whole line of another and the start of a third
  // ("[1,0]<stdout>:step 1[1,2]<stderr>:Traceback (most recent call last):"). Each piece goes to
  // its tag's line; only the last one ends its line here, the others are continued behind the same
  // tag on a later line (partials, by tag). `p` and `message` are the line as StripPrefixes read it.
  void TaggedLine(std::string_view line, const LinePrefix& p, std::string_view message, int64_t number,
                  int64_t line_offset) {
    LinePrefix scratch;
    size_t len = 0;
    const size_t at0 = FindMpiTag(line, 0, &scratch, &len);
    if (at0 == std::string_view::npos) return Feed(StreamFor(p), message, p, number, line_offset);
    // What precedes the first tag (a timestamp, a pod) holds for every piece of the line; what
    // follows a tag belongs to that piece alone.
    LinePrefix base;
    StripPrefixes(line.substr(0, at0), dialect, &base);
    LinePrefix tag = base;
    FindMpiTag(line, at0, &tag, &len);
    std::string_view rest = line.substr(at0 + len);
    while (true) {
      LinePrefix next = base;
      size_t next_len = 0;
      const size_t at = FindMpiTag(rest, 0, &next, &next_len);
      std::string_view piece = rest.substr(0, at);
      auto it = partials.find(tag.mpi_tag);
      if (it == partials.end()) {
        // A new line of that rank: its own prefixes (an NCCL host:pid, say) say which stream.
        LinePrefix own = tag;
        piece = StripPrefixes(piece, dialect, &own);
        if (at == std::string_view::npos) return Feed(StreamFor(own), piece, own, number, line_offset);  // whole
        // Bizarre input (a different tag in every piece) holds no more than this many lines open.
        if (partials.size() >= kMaxPartials) FlushPartials(0);
        it = partials.emplace(tag.mpi_tag, Partial{"", number, line_offset, std::move(own)}).first;
      }
      Partial& part = it->second;
      part.text.append(piece.substr(0, options.max_line_bytes - std::min(options.max_line_bytes, part.text.size())));
      if (at == std::string_view::npos) {
        FeedPartial(it);
        return;
      }
      tag = std::move(next);
      rest.remove_prefix(at + next_len);
    }
  }

  // One whole line of a stream, without its prefixes.
  void Feed(size_t id, std::string_view message, const LinePrefix& p, int64_t number, int64_t line_offset) {
    Stream& s = *streams[id];
    s.last_line = std::max(s.last_line, number);
    Keep(s, s.classifier->FeedAt(message, static_cast<int>(std::min<int64_t>(number, INT32_MAX)), line_offset), p,
         line_offset);
    if (s.classifier->pending())
      pending.insert(id);
    else
      pending.erase(id);
  }

  // A held line, ended or given up on: classified where it began, and no longer held.
  std::map<std::string, Partial>::iterator FeedPartial(std::map<std::string, Partial>::iterator it) {
    Partial done = std::move(it->second);
    it = partials.erase(it);
    Feed(StreamFor(done.prefix), done.text, done.prefix, done.line, done.offset);
    return it;
  }

  // Lines left unfinished since before `line` (all of them: 0) are classified as they are.
  void FlushPartials(int64_t before_line) {
    for (auto it = partials.begin(); it != partials.end();)
      it = before_line && it->second.line >= before_line ? std::next(it) : FeedPartial(it);
  }

  // Multi-line constructs or unfinished mpirun lines are open: read line by line.
  bool LineByLine() const { return !pending.empty() || !partials.empty(); }

  // Closes what is open in a stream (a traceback cut off) and keeps what that completes.
  void FinishStream(Stream& s) {
    LinePrefix p{s.key.host, s.key.rank, s.key.local_rank, s.key.pid, 0};
    Keep(s, s.classifier->Finish(), p, -1);
  }

  void CloseStale(int64_t now_line) {
    if (!partials.empty()) FlushPartials(std::max<int64_t>(1, now_line - kStalePartialLines));
    for (auto it = pending.begin(); it != pending.end();) {
      Stream& s = *streams[*it];
      if (now_line - s.last_line > kStaleLines) {
        FinishStream(s);
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Complete lines: `block` ends at a line end (its '\n' excluded: `newline`) or at the end of the
  // input. In a terminal-wrapped paste the broken lines are joined first (log_unwrap.h); a line
  // broken across two blocks (one in 4 MiB at most) stays broken.
  // A file of JSON log records is decoded the same way, block by block, so that the pre-scan and
  // the multi-line constructs see the program's lines (Go's encoder writes '<' as \u003c; a record
  // of Cloud Logging may hold a whole traceback).
  void Block(std::string_view block, bool newline) {
    if (!wrap.width && !json_records) return Lines(block, newline, nullptr, nullptr);
    const int64_t base = line_no;
    std::vector<LineOrigin> origins;
    std::vector<JsonLogLine> records;
    std::string text;
    if (json_records) {
      text = DecodeRecords(block, base + 1, &origins, &records);
    } else {
      int64_t joins = 0;
      text = Unwrap(block, wrap.width, dialect, base + 1, offset, options.max_line_bytes, &origins, &joins);
      unwrap_joins += joins;
    }
    Lines(text, newline, &origins, json_records ? &records : nullptr);
    line_no = base + CountNewlines(block.data(), block.data() + block.size()) + (newline || !block.empty() ? 1 : 0);
  }

  // The program's lines of a block of JSON log records: each record's text (every line of it, when
  // it holds several), a line that is no record as it is. `records[i]` is line i's record (its text
  // left empty; an empty stream and host, and time 0, for a line that is no record).
  std::string DecodeRecords(std::string_view block, int64_t first_line, std::vector<LineOrigin>* origins,
                            std::vector<JsonLogLine>* records) {
    std::string out;
    out.reserve(block.size());
    size_t pos = 0;
    int64_t number = first_line;
    JsonLogLine json;
    std::string text;  // the record's text, moved out so that each of its lines copies the record without it
    auto add = [&](std::string_view line, const JsonLogLine& record, size_t at) {
      if (!origins->empty()) out += '\n';
      out.append(line);
      origins->push_back({number, offset + static_cast<int64_t>(at)});
      records->push_back(record);
    };
    while (pos <= block.size()) {
      const void* nl = std::memchr(block.data() + pos, '\n', block.size() - pos);
      const size_t end = nl ? static_cast<const char*>(nl) - block.data() : block.size();
      std::string_view line = block.substr(pos, end - pos);
      if (!line.empty() && DecodeJsonLogLine(line, &json)) {
        text = std::move(json.text);
        json.text.clear();
        const std::string_view lines = text;
        for (size_t from = 0;;) {
          size_t cut = lines.find('\n', from);
          add(lines.substr(from, cut == std::string_view::npos ? std::string_view::npos : cut - from), json, pos);
          if (cut == std::string_view::npos) break;
          from = cut + 1;
        }
      } else {
        add(line, JsonLogLine{}, pos);
      }
      ++number;
      if (!nl || end + 1 == block.size()) break;
      pos = end + 1;
    }
    return out;
  }

  // The lines of `block`; `origins` (one per line), where a line of it began in the file when the
  // block is a joined or decoded one; `records`, the JSON record each line came from.
  void Lines(std::string_view block, bool newline, const std::vector<LineOrigin>* origins,
             const std::vector<JsonLogLine>* records) {
    if (!upgraded && std::max(expected, result.bytes) >= kHyperscanFromBytes) {
      upgraded = true;
      if (auto hs = CatalogueScanner(true)) {
        scanner = std::move(hs);
        result.engine = scanner->engine();
      }
    }
    size_t pos = 0;
    const int64_t base = line_no;
    int64_t counted_to = 0, lines_before = line_no;  // newlines in block[0, counted_to)
    auto number_of = [&](size_t at) {
      if (static_cast<int64_t>(at) > counted_to)
        lines_before += CountNewlines(block.data() + counted_to, block.data() + at);
      counted_to = std::max<int64_t>(counted_to, at);
      return lines_before + 1;
    };
    // The line starting at `at`: its number and offset in the file.
    auto origin_of = [&](size_t at) {
      const int64_t n = number_of(at);
      const size_t index = static_cast<size_t>(n - base - 1);
      line_record = nullptr;
      if (records && index < records->size()) {
        const JsonLogLine& r = (*records)[index];
        if (r.time_ns || !r.stream.empty() || !r.host.empty()) line_record = &r;
      }
      if (origins && index < origins->size()) return (*origins)[index];
      return LineOrigin{n, offset + static_cast<int64_t>(at)};
    };
    while (pos < block.size()) {
      // Line by line while a multi-line construct is open.
      while (LineByLine() && pos < block.size()) {
        const void* nl = std::memchr(block.data() + pos, '\n', block.size() - pos);
        size_t end = nl ? static_cast<const char*>(nl) - block.data() : block.size();
        const LineOrigin at = origin_of(pos);
        ++result.candidate_lines;
        Line(block.substr(pos, end - pos), at.line, at.offset);
        if ((at.line & 63) == 0) CloseStale(at.line);
        pos = end + 1;
      }
      if (pos >= block.size()) break;
      size_t resume = std::string_view::npos;
      scanner->Scan(block.substr(pos), [&](size_t b, size_t e) {
        b += pos, e += pos;
        ++result.candidate_lines;
        const LineOrigin at = origin_of(b);
        Line(block.substr(b, e - b), at.line, at.offset);
        if (LineByLine()) {
          resume = e + 1;
          return false;
        }
        return true;
      });
      if (resume == std::string_view::npos) break;
      pos = resume;
    }
    line_record = nullptr;
    number_of(block.size());
    // The block's last line counts, even empty, when a newline ends it.
    line_no = lines_before + (newline || !block.empty() ? 1 : 0);
  }

  void StartFile(const LogInput& input) {
    file = static_cast<int>(files.size());
    files.push_back(!input.name.empty() ? input.name : input.path == "-" ? "<stdin>" : input.path);
    file_ranks.push_back(input.rank);
    agent_files.push_back(input.agents);
    first_stream = streams.size();
    line_no = 0;
    offset = 0;
    pending.clear();
    partials.clear();
    dialect = PrefixDialect{};
    wrap = WrapShape{};
    json_records = false;
    line_record = nullptr;
    unwrap_joins = 0;
  }

  void Learn(std::string_view head) {
    // UTF-16 logs (Windows tools, some exports) hide every pattern behind NUL bytes: say so.
    std::string_view start = head.substr(0, 4096);
    size_t nuls = std::count(start.begin(), start.end(), '\0');
    if (start.substr(0, 2) == "\xff\xfe" || start.substr(0, 2) == "\xfe\xff" ||
        (start.size() >= 64 && nuls * 4 > start.size()))
      result.warnings.push_back(files[file] +
                                ": looks like UTF-16 text (NUL bytes between characters); convert it first: "
                                "iconv -f UTF-16 -t UTF-8 < FILE > FILE.utf8");
    DialectLearner learner;
    // A file of JSON log records: most of its first 200 non-empty lines decode as one.
    JsonLogLine json;
    int lines = 0, records = 0;
    size_t pos = 0;
    for (int i = 0; i < kDialectLines && pos < head.size(); ++i) {
      const void* nl = std::memchr(head.data() + pos, '\n', head.size() - pos);
      size_t end = nl ? static_cast<const char*>(nl) - head.data() : head.size();
      const std::string_view line = head.substr(pos, end - pos);
      learner.Add(line.substr(0, 4096));
      if (lines < 200 && !Trim(line).empty()) ++lines, records += DecodeJsonLogLine(line, &json);
      pos = end + 1;
    }
    dialect = learner.Dialect();
    json_records = lines > 0 && records * 5 >= lines * 4;
    wrap = json_records ? WrapShape{} : DetectWrap(head, dialect);
  }

  // Streams are created file by file, so this file's are the ones from first_stream on (and the
  // shared overflow stream, which is per file too).
  void EndFile() {
    if (unwrap_joins > 0)
      result.warnings.push_back(files[file] + ": looks hard-wrapped at " + std::to_string(wrap.width) +
                                " columns (copied from a terminal of that width): " + std::to_string(unwrap_joins) +
                                " line breaks inside records were undone before reading; line numbers are the file's");
    FlushPartials(0);
    for (size_t id = first_stream; id < streams.size(); ++id) FinishStream(*streams[id]);
    pending.clear();
  }
};

LogScanner::LogScanner(LogScanOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  // RE2 first (compiles in milliseconds); Block() moves to Hyperscan once the input is big.
  // DSDOCTOR_LOG_SCANNER=re2|hyperscan pins one (tests, benchmarks).
  const char* pin = std::getenv("DSDOCTOR_LOG_SCANNER");
  std::string pinned = pin ? pin : "";
  if (pinned == "hyperscan") impl_->scanner = CatalogueScanner(true);
  if (!impl_->scanner) impl_->scanner = CatalogueScanner(false);
  impl_->upgraded = !pinned.empty();
  impl_->result.engine = impl_->scanner->engine();
}

LogScanner::~LogScanner() = default;

void LogScanner::AddText(std::string_view text, const LogInput& input) {
  Impl& s = *impl_;
  s.StartFile(input);
  s.added += text.size();
  s.expected = std::max(s.expected, s.added);
  s.Learn(text.substr(0, std::min(text.size(), s.options.block_bytes)));
  s.result.bytes += text.size();
  // The same path as files: blocks cut at line ends.
  size_t pos = 0;
  while (pos < text.size()) {
    size_t want = std::min(text.size() - pos, s.options.block_bytes);
    const void* nl = ::memrchr(text.data() + pos, '\n', want);
    if (!nl && pos + want < text.size())  // a line longer than a block
      nl = std::memchr(text.data() + pos + want, '\n', text.size() - pos - want);
    size_t end = nl ? static_cast<const char*>(nl) - text.data() : text.size();
    std::string_view block = text.substr(pos, end - pos);
    s.Block(block, nl != nullptr);
    s.offset += block.size() + (nl ? 1 : 0);
    pos = end + (nl ? 1 : 0);
  }
  s.result.lines += s.line_no;
  s.EndFile();
}

void LogScanner::ExpectBytes(uint64_t bytes) { impl_->expected = std::max(impl_->expected, bytes); }

Status LogScanner::Add(const LogInput& input) {
  if (input.path == "-") return AddFd(0, input);
  int fd = ::open(input.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound("analyze: cannot open '" + input.path + "': " + std::strerror(errno));
#ifdef POSIX_FADV_SEQUENTIAL
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  struct stat info;
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode)) impl_->added += static_cast<uint64_t>(info.st_size);
  impl_->expected = std::max(impl_->expected, impl_->added);
  Status st = AddFd(fd, input);
  ::close(fd);
  return st;
}

Status LogScanner::AddFd(int fd, const LogInput& input) {
  Impl& s = *impl_;
  s.StartFile(input);
  const size_t block = s.options.block_bytes;
  // The prefix dialect is learned from the first 256 KiB (or the whole input, if shorter): a pipe
  // may deliver a line at a time.
  const size_t learn_bytes = std::min<size_t>(block, 256 << 10);
  std::string buf(block + std::max(s.options.max_line_bytes, learn_bytes) + 1, '\0');
  size_t have = 0;                           // bytes in buf: the start of a line not ended yet, then new data
  bool overlong = false;                     // the line in buf is longer than max_line_bytes: skip to its end
  std::string overlong_head, overlong_tail;  // its start (for its prefix) and its last bytes
  int64_t overlong_number = 0, overlong_offset = 0;
  bool learned = false;
  Status status = Status::Ok();
  // A pipe, FIFO or terminal that stays open and silent is said once (options.on_idle).
  struct stat info;
  bool watch_idle = s.options.on_idle && ::fstat(fd, &info) == 0 && !S_ISREG(info.st_mode);
  const int idle_ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(s.options.idle_notice).count());
  for (;;) {
    if (watch_idle) {
      pollfd p{fd, POLLIN, 0};
      int ready = ::poll(&p, 1, idle_ms);
      if (ready == 0) {
        s.options.on_idle(input.name.empty() ? input.path : input.name);
        watch_idle = false;
      }
    }
    ssize_t n = ::read(fd, buf.data() + have, std::min(block, buf.size() - have));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = IoError("analyze: reading '" + s.files[s.file] + "': " + std::strerror(errno) +
                       " (the part read so far is analysed)");
      break;
    }
    s.result.bytes += n;
    size_t end = have + n;
    if (n == 0) break;
    std::string_view data(buf.data(), end);
    if (!learned) {
      if (data.size() < learn_bytes) {
        have = end;  // read on before learning
        continue;
      }
      s.Learn(data), learned = true;
    }
    size_t start = 0;
    if (overlong) {
      // Skip the rest of an over-long line up to its newline, keeping its last bytes.
      const void* nl = std::memchr(data.data(), '\n', data.size());
      size_t upto = nl ? static_cast<const char*>(nl) - data.data() : data.size();
      overlong_tail.append(data.substr(0, upto));
      if (overlong_tail.size() > s.options.max_line_bytes)
        overlong_tail.erase(0, overlong_tail.size() - s.options.max_line_bytes);
      if (!nl) {
        s.offset += data.size();
        have = 0;
        continue;
      }
      s.LineDigest(overlong_head, overlong_tail, overlong_number, overlong_offset);
      s.offset += upto + 1;
      start = upto + 1;
      overlong = false;
    }
    const void* last_nl = ::memrchr(data.data() + start, '\n', data.size() - start);
    if (last_nl) {
      size_t complete_end = static_cast<const char*>(last_nl) - data.data();  // index of the last '\n'
      std::string_view lines = data.substr(start, complete_end - start);
      s.Block(lines, true);
      s.offset += lines.size() + 1;
      start = complete_end + 1;
    }
    // Keep the unfinished line; if it is already too long, keep its start and skip to its end,
    // where it is classified (LineDigest).
    size_t rest = data.size() - start;
    if (rest > s.options.max_line_bytes) {
      overlong_head.assign(data.substr(start, s.options.max_line_bytes));
      overlong_tail.assign(data.substr(data.size() - s.options.max_line_bytes));
      overlong_offset = s.offset;
      overlong_number = ++s.line_no;
      s.offset += rest;
      overlong = true;
      have = 0;
    } else {
      std::memmove(buf.data(), buf.data() + start, rest);
      have = rest;
    }
  }
  if (!learned && have > 0) s.Learn(std::string_view(buf.data(), have));
  if (overlong) {
    s.LineDigest(overlong_head, overlong_tail, overlong_number, overlong_offset);
  } else if (have > 0) {
    // What is left: whole lines when the input was shorter than the learning window, then a last
    // line without a newline.
    std::string_view data(buf.data(), have);
    const void* last_nl = ::memrchr(data.data(), '\n', data.size());
    size_t start = 0;
    if (last_nl) {
      size_t complete_end = static_cast<const char*>(last_nl) - data.data();
      s.Block(data.substr(0, complete_end), true);
      s.offset += complete_end + 1;
      start = complete_end + 1;
    }
    if (start < data.size()) s.Block(data.substr(start), false);
  }
  s.result.lines += s.line_no;
  s.EndFile();
  return status;
}

LogScanResult LogScanner::Finish() {
  Impl& s = *impl_;
  LogScanResult& r = s.result;
  // host:pid and host/local rank of streams whose rank is known, to attribute the others.
  // Local ranks are per file (a node's log) and host; lines without a host ([default0]: lines whose
  // NCCL lines name it) fall back to the file's one host with that local rank.
  std::map<std::pair<std::string, int>, int> by_pid;
  std::map<std::tuple<int, std::string, int>, int> by_local;
  std::map<std::pair<int, int>, std::set<int>> by_file_local;
  auto local_rank_of = [&](int file, const std::string& host, int local) {
    auto it = by_local.find({file, host, local});
    if (it != by_local.end()) return it->second;
    auto f = by_file_local.find({file, local});
    return host.empty() && f != by_file_local.end() && f->second.size() == 1 ? *f->second.begin() : -1;
  };
  auto rank_of = [&](const Stream& st) {
    if (st.key.rank >= 0) return st.key.rank;
    if (s.file_ranks[st.key.file] >= 0) return s.file_ranks[st.key.file];
    return st.classifier->facts().self_rank;
  };
  for (auto& st : s.streams) {
    int rank = rank_of(*st);
    if (rank < 0) continue;
    if (st->key.pid) by_pid[{st->key.host, st->key.pid}] = rank;
    int local = st->key.local_rank;
    // Without a local-rank prefix, NCCL's cudaDev stands for the local rank (one GPU per rank,
    // set_device(local_rank): what torchrun and DeepSpeed set up).
    if (local < 0 && !st->key.host.empty()) local = st->classifier->facts().device;
    if (local < 0) continue;
    by_local.emplace(std::make_tuple(st->key.file, st->key.host, local), rank);
    by_file_local[{st->key.file, local}].insert(rank);
  }
  // Peers a line names (an address with its port, a host name, a rank number) are the culprit of
  // what it reports (the printer is evidence): the addresses NCCL said each rank uses, and the
  // hosts the prefixes named, map them back to ranks and nodes.
  std::map<std::string, std::set<int>> ranks_at;  // address, host or short host name → ranks
  std::map<std::string, std::string> host_at;     // address → host
  auto short_name = [](const std::string& h) {
    size_t dot = h.find('.');
    return dot == std::string::npos || (h[0] >= '0' && h[0] <= '9') ? h : h.substr(0, dot);
  };
  for (auto& st : s.streams) {
    int rank = rank_of(*st);
    if (rank < 0) continue;
    for (const std::string& a : st->classifier->facts().addresses) {
      ranks_at[a].insert(rank);
      if (!st->key.host.empty()) host_at[a] = st->key.host;
    }
    if (!st->key.host.empty()) {
      ranks_at[st->key.host].insert(rank);
      ranks_at[short_name(st->key.host)].insert(rank);
    }
  }
  auto name_peer = [&](LogEvent& e) {
    std::string peer = e.Field("peer");
    if (peer.empty()) peer = e.Field("peer2");
    if (peer.empty()) peer = e.Field("remote");
    if (peer.empty() || peer.size() > 300) return;
    if (peer.find_first_not_of("0123456789") == std::string::npos) {  // "Proxy Call to rank 5"
      int r = SafeInt(peer);
      if (r >= 0 && r < (1 << 20)) e.subject_rank = r;
      return;
    }
    // "10.0.0.2<45763>", "node1<57557>", "[fe80::1]:29500", "master-0:29500"
    std::string addr = peer.substr(0, peer.find('<'));
    if (!addr.empty() && addr[0] == '[')
      addr = addr.substr(1, addr.find(']') - 1);
    else if (std::count(addr.begin(), addr.end(), ':') == 1)
      addr = addr.substr(0, addr.find(':'));
    // Loopback is every node's own: it names no one.
    if (addr.rfind("127.", 0) == 0 || addr == "::1" || addr == "localhost") return;
    std::string host = addr;
    const std::set<int>* ranks = nullptr;
    if (auto it = ranks_at.find(addr); it != ranks_at.end()) {
      ranks = &it->second;
      if (auto h = host_at.find(addr); h != host_at.end()) host = h->second;
    } else if (auto sit = ranks_at.find(short_name(addr)); sit != ranks_at.end()) {
      ranks = &sit->second;
    }
    e.fields["peer_host"] = host;
    if (!ranks) return;
    std::string list;
    for (int r : *ranks) list += (list.empty() ? "" : ",") + std::to_string(r);
    e.fields["peer_ranks"] = list;
    if (ranks->size() == 1) e.subject_rank = *ranks->begin();
  };
  for (auto& st : s.streams) {
    int rank = rank_of(*st);
    if (rank < 0 && st->key.pid) {
      auto it = by_pid.find({st->key.host, st->key.pid});
      if (it != by_pid.end()) rank = it->second;
    }
    if (rank < 0 && st->key.local_rank >= 0) rank = local_rank_of(st->key.file, st->key.host, st->key.local_rank);
    // A prefix or the file name says whose lines these are; otherwise a line naming its own rank wins.
    const bool trusted = st->key.rank >= 0 || s.file_ranks[st->key.file] >= 0;
    const StreamFacts& f = st->classifier->facts();
    r.world_size = std::max(r.world_size, f.nranks);
    if (rank >= 0) {
      r.world_size = std::max(r.world_size, rank + 1);
      RankLogFacts& facts = r.ranks[rank];
      if (facts.host.empty()) facts.host = st->key.host;
      if (facts.nccl_version.empty() && !f.nccl_version.empty()) {
        facts.nccl_version = f.nccl_version;
        facts.version_where = s.files[st->key.file] + ":" + std::to_string(f.nccl_version_line);
      }
    }
    for (LogEvent& e : st->events) {
      e.rank = rank;
      // A line that names its own rank (a watchdog's [Rank R] of the default group): in a stream of
      // several processes (pdsh host, unprefixed output) it is the better attribution.
      if (!trusted && !e.Field("self_rank").empty() && (e.Field("pg").empty() || e.Field("pg") == "0")) {
        int self = std::atoi(e.Field("self_rank").c_str());
        if (self >= 0 && self < (1 << 20)) e.rank = self;
      }
      if (e.subject_rank < 0) name_peer(e);
      // In the launcher's output of dsdoctor's agents, srun's tasks are agents: their end follows the
      // ranks' (the agent of a node whose step was killed for memory), never a rank's own cause.
      if (s.agent_files[st->key.file] && !e.Field("tasks").empty() && e.code != diagnosis::codes::kOutOfMemory) {
        e.consequence = true;
        if (e.severity == diagnosis::Severity::kError) e.severity = diagnosis::Severity::kWarning;
      }
      // srun names the task: one task per rank, numbered as the ranks (SLURM_PROCID).
      if (std::string t = e.Field("tasks"); e.subject_rank < 0 && !s.agent_files[st->key.file] && !t.empty() &&
                                            t.size() < 8 && t.find_first_not_of("0123456789") == std::string::npos)
        e.subject_rank = SafeInt(t);
      // A launcher line about a local rank: the rank that has that local rank on that node.
      if (e.subject_rank < 0 && !e.Field("local_rank").empty())
        e.subject_rank = local_rank_of(st->key.file, e.host, std::atoi(e.Field("local_rank").c_str()));
      if (e.subject_rank >= 0 && e.subject_rank < (1 << 20)) r.world_size = std::max(r.world_size, e.subject_rank + 1);
      if (e.rank >= 0 && e.rank < (1 << 20)) r.world_size = std::max(r.world_size, e.rank + 1);
      if (!e.Field("total").empty() && e.kind == std::string("torch_store_wait_clients"))
        r.world_size = std::max(r.world_size, std::min(1 << 20, std::atoi(e.Field("total").c_str())));
      r.events.push_back(std::move(e));
    }
    st->events.clear();
  }
  // Input order: file, then position (a combined log's order is the order things happened).
  std::stable_sort(r.events.begin(), r.events.end(), [&](const LogEvent& a, const LogEvent& b) {
    return std::tie(a.file, a.offset) < std::tie(b.file, b.offset);
  });
  if (s.dropped)
    r.warnings.push_back(std::to_string(s.dropped) +
                         " repeated log lines of a kind already reported were counted but not kept (first " +
                         std::to_string(s.options.max_events_per_kind) + " per rank, stream and kind are, " +
                         std::to_string(s.options.max_events) + " in all)");
  return std::move(r);
}

}  // namespace dsd::collectors
