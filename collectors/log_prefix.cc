#include "collectors/log_prefix.h"

#include <time.h>

#include <algorithm>
#include <cstring>

#include "common/strings.h"

namespace dsd::collectors {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsHostChar(char c) { return IsAlpha(c) || IsDigit(c) || c == '-' || c == '_' || c == '.'; }

// Reads up to `max` digits at s[*i] into *value; false when there are none. Never overflows.
bool Digits(std::string_view s, size_t* i, int max, int64_t* value) {
  size_t start = *i;
  int64_t v = 0;
  while (*i < s.size() && IsDigit(s[*i]) && static_cast<int>(*i - start) < max) v = v * 10 + (s[(*i)++] - '0');
  if (*i == start) return false;
  *value = v;
  return true;
}

bool Expect(std::string_view s, size_t* i, char c) {
  if (*i < s.size() && s[*i] == c) return ++*i, true;
  return false;
}

size_t SkipSpaces(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i;
}

// 2024-05-01T12:00:00.123Z / 2024-05-01 12:00:00,123 / [2024-05-01 12:00:00] ; returns the
// length consumed (with trailing spaces and ':'), 0 when the line does not start with one.
size_t Timestamp(std::string_view s, int64_t* ns) {
  size_t i = 0;
  bool bracket = Expect(s, &i, '[');
  int64_t y, mo, d, h, mi, sec, frac = 0;
  size_t frac_digits = 0;
  if (!Digits(s, &i, 4, &y) || i != (bracket ? 5u : 4u) || !Expect(s, &i, '-') || !Digits(s, &i, 2, &mo) ||
      !Expect(s, &i, '-') || !Digits(s, &i, 2, &d))
    return 0;
  if (!(Expect(s, &i, 'T') || Expect(s, &i, ' '))) return 0;
  if (!Digits(s, &i, 2, &h) || !Expect(s, &i, ':') || !Digits(s, &i, 2, &mi) || !Expect(s, &i, ':') ||
      !Digits(s, &i, 2, &sec))
    return 0;
  if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
    ++i;
    size_t start = i;
    if (!Digits(s, &i, 9, &frac)) return 0;
    frac_digits = i - start;
    while (i < s.size() && IsDigit(s[i])) ++i;  // beyond nanoseconds
  }
  int64_t offset_s = 0;
  if (Expect(s, &i, 'Z')) {
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-') && i + 1 < s.size() && IsDigit(s[i + 1])) {
    int sign = s[i] == '-' ? -1 : 1;
    ++i;
    int64_t oh = 0, om = 0;
    Digits(s, &i, 2, &oh);
    Expect(s, &i, ':');
    Digits(s, &i, 2, &om);
    offset_s = sign * (oh * 3600 + om * 60);
  }
  if (bracket && !Expect(s, &i, ']')) return 0;
  Expect(s, &i, ':');
  if (i < s.size() && s[i] != ' ' && s[i] != '\t') return 0;
  i = SkipSpaces(s, i);
  struct tm t = {};
  t.tm_year = static_cast<int>(y) - 1900;
  t.tm_mon = static_cast<int>(mo) - 1;
  t.tm_mday = static_cast<int>(d);
  t.tm_hour = static_cast<int>(h);
  t.tm_min = static_cast<int>(mi);
  t.tm_sec = static_cast<int>(sec);
  // Years outside 1970-2200 are no log timestamp, and would overflow nanoseconds.
  if (y < 1970 || y > 2200 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 24 || mi > 59 || sec > 61) return 0;
  int64_t epoch = static_cast<int64_t>(::timegm(&t)) - offset_s;
  while (frac_digits < 9) frac *= 10, ++frac_digits;
  *ns = epoch * 1000000000 + frac;
  return i;
}

// "stderr F " after a CRI timestamp (containerd's and CRI-O's container logs, /var/log/pods/…):
// the stream, and F (a full line) or P (a part of a longer one).
size_t CriStream(std::string_view s, std::string* channel) {
  if (s.size() < 9 || (s.substr(0, 7) != "stdout " && s.substr(0, 7) != "stderr ") || (s[7] != 'F' && s[7] != 'P') ||
      s[8] != ' ')
    return 0;
  *channel = std::string(s.substr(0, 6));
  return 9;
}

// "Mon Jan  1 12:00:00 2024" (mpirun --timestamp-output) right before "[1,3]<stdout>:".
size_t CTimeBeforeTag(std::string_view s) {
  if (s.size() < 25 || !IsAlpha(s[0]) || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[13] != ':' || s[16] != ':' ||
      s[24] != '[')
    return 0;
  return 24;
}

// [1,3]<stdout>:  (Open MPI 4)   [prterun-host-123@1,3]<stdout>:  (5)   [1,mpirank:3,algo-1]<stdout>:  (SageMaker)
// [3]<stderr>:  (horovodrun, after its ctime)
size_t MpiTag(std::string_view s, int* rank, std::string* host) {
  size_t i = 0;
  int64_t job, r;
  if (!Expect(s, &i, '[')) return 0;
  bool prrte = false;
  // Both searches are bounded: FindMpiTag tries every '[' of a line.
  if (size_t at = s.substr(0, 128).find('@', i);
      at != std::string_view::npos && s.substr(i, at - i).find_first_of("],") == std::string_view::npos)
    i = at + 1, prrte = true;  // the PRRTE namespace
  if (!Digits(s, &i, 9, &job)) return 0;
  // horovodrun's own launcher: "[3]<stderr>:" (after a ctime), the rank alone.
  if (!prrte && (s.substr(i, 10) == "]<stdout>:" || s.substr(i, 10) == "]<stderr>:")) {
    *rank = static_cast<int>(job);
    return i + 10;
  }
  if (!Expect(s, &i, ',')) return 0;
  if (s.substr(i, 8) == "mpirank:") i += 8;
  if (!Digits(s, &i, 9, &r)) return 0;
  if (Expect(s, &i, ',')) {
    size_t start = i;
    while (i < s.size() && IsHostChar(s[i])) ++i;
    if (i == start) return 0;
    *host = std::string(s.substr(start, i - start));
  }
  if (!Expect(s, &i, ']') || !Expect(s, &i, '<')) return 0;
  const size_t close = s.substr(0, i + 10).find(">:", i);
  if (close == std::string_view::npos || close - i > 8) return 0;
  *rank = static_cast<int>(r);
  i = close + 2;
  // PRRTE (Open MPI 5) writes a space after the tag; ORTE (4.x) does not, and the text's own
  // indentation must stay.
  return prrte && i < s.size() && s[i] == ' ' ? i + 1 : i;
}

// The fields an mpirun tag names: its rank, its host when it has one, the tag as written (its
// repeats identify the rank's writes) and its stream ("stdout", "stderr").
void TakeMpiTag(std::string_view tag, int rank, const std::string& host, LinePrefix* out) {
  out->rank = rank;
  if (!host.empty()) out->host = host;
  out->mpi_tag = std::string(Trim(tag));
  const size_t lt = out->mpi_tag.rfind('<'), gt = out->mpi_tag.rfind('>');
  if (lt != std::string::npos && gt > lt) out->channel = out->mpi_tag.substr(lt + 1, gt - lt - 1);
}

// [rank3]: → rank;  [default0]: / [trainer3|0]: → local rank
size_t TorchrunTag(std::string_view s, int* rank, int* local_rank) {
  size_t i = 0;
  if (!Expect(s, &i, '[')) return 0;
  size_t role_start = i;
  while (i < s.size() && (IsAlpha(s[i]) || s[i] == '_')) ++i;
  if (i == role_start || i - role_start > 32) return 0;
  std::string_view role = s.substr(role_start, i - role_start);
  int64_t n, attempt;
  if (!Digits(s, &i, 7, &n)) return 0;
  if (Expect(s, &i, '|') && !Digits(s, &i, 5, &attempt)) return 0;
  if (!Expect(s, &i, ']') || !Expect(s, &i, ':')) return 0;
  if (role == "rank")
    *rank = static_cast<int>(n);
  else
    *local_rank = static_cast<int>(n);
  return i < s.size() && s[i] == ' ' ? i + 1 : i;
}

// "[80746] " before another prefix: a line number an editor or a paste added ("[80746] [rank0]:[E321 …").
size_t PasteLineNumber(std::string_view s) {
  size_t i = 0;
  int64_t n;
  if (!Expect(s, &i, '[') || !Digits(s, &i, 9, &n) || !Expect(s, &i, ']') || !Expect(s, &i, ' ')) return 0;
  return i;
}

// [pod/<pod>/<container>]
size_t KubernetesTag(std::string_view s, std::string* host) {
  if (s.substr(0, 5) != "[pod/") return 0;
  size_t close = s.find(']');
  if (close == std::string_view::npos || close > 300) return 0;
  std::string_view inner = s.substr(5, close - 5);
  size_t slash = inner.find('/');
  *host = std::string(inner.substr(0, slash));
  return SkipSpaces(s, close + 1);
}

// host:pid:tid [dev]
size_t NcclTag(std::string_view s, std::string* host, int* pid) {
  size_t i = 0;
  while (i < s.size() && IsHostChar(s[i])) ++i;
  if (i == 0 || i > 253) return 0;
  size_t host_end = i;
  int64_t p, tid, dev;
  if (!Expect(s, &i, ':') || !Digits(s, &i, 10, &p) || !Expect(s, &i, ':') || !Digits(s, &i, 10, &tid) ||
      !Expect(s, &i, ' ') || !Expect(s, &i, '[') || !Digits(s, &i, 4, &dev) || !Expect(s, &i, ']'))
    return 0;
  *host = std::string(s.substr(0, host_end));
  *pid = static_cast<int>(p);
  return SkipSpaces(s, i);
}

// "(WorkerDict pid=63294, ip=10.41.0.8) " (Ray actors)
size_t RayTag(std::string_view s, int* pid, std::string* host) {
  size_t i = 0;
  if (!Expect(s, &i, '(')) return 0;
  size_t close = s.find(") ", i);
  if (close == std::string_view::npos || close > 200) return 0;
  std::string_view inner = s.substr(1, close - 1);
  size_t p = inner.find(" pid=");
  if (p == std::string_view::npos) return 0;
  size_t j = p + 5;
  int64_t v;
  if (!Digits(inner, &j, 10, &v)) return 0;
  *pid = static_cast<int>(v);
  if (size_t ip = inner.find(", ip="); ip != std::string_view::npos) *host = std::string(inner.substr(ip + 5));
  return close + 2;
}

// "  3: " (srun -l)
size_t SrunLabel(std::string_view s, int* rank) {
  size_t i = SkipSpaces(s, 0);
  if (i > 8) return 0;
  int64_t n;
  if (!Digits(s, &i, 7, &n) || !Expect(s, &i, ':') || !(i == s.size() || s[i] == ' ')) return 0;
  *rank = static_cast<int>(n);
  return i < s.size() ? i + 1 : i;
}

bool LooksLikeHost(std::string_view token) {
  if (token.empty() || token.size() > 253 || !(IsAlpha(token[0]) || IsDigit(token[0]))) return false;
  bool letter = false;
  for (char c : token) {
    if (!IsHostChar(c)) return false;
    letter |= IsAlpha(c);
  }
  if (!letter) return false;
  // Python exceptions and log levels look like words, not hosts.
  for (std::string_view w : {"Error", "Exception", "Warning", "Interrupt", "Exit", "Iteration"})
    if (token.size() >= w.size() && token.substr(token.size() - w.size()) == w) return false;
  for (std::string_view w :
       {"INFO", "WARNING", "WARN", "ERROR", "DEBUG", "CRITICAL", "FATAL", "Traceback", "File", "NCCL", "Note", "note",
        "warning", "error", "Epoch", "epoch", "step", "Step", "loss", "what", "Reason", "Message", "PID", "Hint",
        "time", "host", "rank", "exitcode", "error_file", "traceback", "http", "https",
        // Launchers' own lines ("srun: error: …"), not a pdsh label.
        "srun", "slurmstepd", "mpirun", "mpiexec", "prterun", "orterun", "sbatch", "salloc"})
    if (token == w) return false;
  return true;
}

// "<host>: "
// "slurmstepd-node-1: " (Slurm 20.11+ names its node in slurmstepd's lines): that node.
size_t SlurmstepdTag(std::string_view s, std::string* host) {
  constexpr std::string_view kTag = "slurmstepd-";
  if (!s.starts_with(kTag)) return 0;
  size_t i = kTag.size();
  while (i < s.size() && IsHostChar(s[i])) ++i;
  if (i == kTag.size() || i >= s.size() || s[i] != ':') return 0;
  *host = std::string(s.substr(kTag.size(), i - kTag.size()));
  return i + 1 < s.size() && s[i + 1] == ' ' ? i + 2 : i + 1;
}

size_t PdshLabel(std::string_view s, std::string* host) {
  size_t i = 0;
  while (i < s.size() && IsHostChar(s[i])) ++i;
  if (i == 0 || i >= s.size() || s[i] != ':' || (i + 1 < s.size() && s[i + 1] != ' ')) return 0;
  std::string_view token = s.substr(0, i);
  if (!LooksLikeHost(token)) return 0;
  *host = std::string(token);
  return i + 1 < s.size() ? i + 2 : i + 1;
}

}  // namespace

void DialectLearner::Add(std::string_view line) {
  if (line.empty()) return;
  ++lines_;
  std::string host;
  LinePrefix p;
  // The label can follow a timestamp (pdsh output piped through ts, CI logs).
  int64_t ns;
  std::string_view rest = line.substr(Timestamp(line, &ns));
  int rank;
  if (SlurmstepdTag(rest, &host)) {
    // Slurm's own line, not a pdsh label: it names no host of a pdsh dialect.
  } else if (PdshLabel(rest, &host) && NcclTag(rest, &p.host, &p.pid) == 0) {
    ++host_lines_;
    hosts_.insert(host);
  } else if (SrunLabel(rest, &rank)) {
    ++label_lines_;
  }
}

PrefixDialect DialectLearner::Dialect() const {
  PrefixDialect d;
  // A real pdsh/srun log has nearly every line labelled; an unlabelled log has a few
  // "SomeError: …" lines at most.
  d.pdsh = host_lines_ >= 3 && host_lines_ * 10 >= lines_ * 3;
  d.srun = label_lines_ >= 3 && label_lines_ * 10 >= lines_ * 3;
  if (d.pdsh && hosts_.size() <= 256) d.hosts = hosts_;
  return d;
}

size_t FindMpiTag(std::string_view s, size_t from, LinePrefix* out, size_t* len) {
  for (size_t at = s.find('[', from); at != std::string_view::npos; at = s.find('[', at + 1)) {
    int rank = -1;
    std::string host;
    size_t n = MpiTag(s.substr(at), &rank, &host);
    if (!n) continue;
    TakeMpiTag(s.substr(at, n), rank, host, out);
    // --timestamp-output puts a ctime before every tag: it is part of the tag, not of the text before.
    if (at >= 24 && CTimeBeforeTag(s.substr(at - 24)) == 24) at -= 24, n += 24;
    *len = n;
    return at;
  }
  return std::string_view::npos;
}

std::string_view StripPrefixes(std::string_view line, const PrefixDialect& dialect, LinePrefix* out) {
  std::string_view s = line;
  bool after_time = false;  // the previous prefix was a timestamp: a CRI stream may follow
  for (int round = 0; round < 8 && !s.empty(); ++round) {
    size_t n = 0;
    int64_t ns = 0;
    std::string host;
    int rank = -1, local = -1, pid = 0;
    const bool cri_position = after_time;
    after_time = false;
    if ((n = Timestamp(s, &ns))) {
      out->time_ns = ns;
      after_time = true;
    } else if (cri_position && (n = CriStream(s, &out->channel))) {
    } else if ((n = KubernetesTag(s, &host))) {
      out->host = host;
    } else if (size_t ct = CTimeBeforeTag(s); (n = MpiTag(s.substr(ct), &rank, &host))) {
      // --timestamp-output's ctime (ct > 0) is part of the tag, not of the text.
      TakeMpiTag(s.substr(ct, n), rank, host, out);
      n += ct;
    } else if ((n = RayTag(s, &pid, &host))) {
      out->pid = pid;
      if (!host.empty()) out->host = host;
    } else if ((n = TorchrunTag(s, &rank, &local))) {
      if (rank >= 0) out->rank = rank;
      if (local >= 0) out->local_rank = local;
    } else if ((n = NcclTag(s, &host, &pid))) {
      out->host = host;
      out->pid = pid;
    } else if (SlurmstepdTag(s, &host)) {
      // Slurm's own line: its node is the line's host, and "slurmstepd-NODE: error: …" stays the
      // message (the catalogue reads Slurm's lines by that word); nothing follows it but the text.
      out->host = host;
      break;
    } else if (size_t k = PasteLineNumber(s);
               k && (TorchrunTag(s.substr(k), &rank, &local) || Timestamp(s.substr(k), &ns))) {
      n = k;  // the launcher's own prefix after it is read in the next round
    } else if (dialect.srun && (n = SrunLabel(s, &rank))) {
      out->rank = rank;
    } else if ((dialect.pdsh || !dialect.hosts.empty()) && (n = PdshLabel(s, &host)) &&
               (dialect.pdsh || dialect.hosts.count(host))) {
      out->host = host;
    } else {
      n = 0;
    }
    if (!n) break;
    s.remove_prefix(std::min(n, s.size()));
  }
  return s;
}

std::string_view StripProgressBar(std::string_view segment) {
  size_t bar = segment.find("%|");
  if (bar == std::string_view::npos) return segment;
  size_t close = segment.find(']', bar);
  if (close == std::string_view::npos) return {};
  std::string_view rest = segment.substr(close + 1);
  size_t i = 0;
  while (i < rest.size() && rest[i] == ' ') ++i;
  return rest.substr(i);
}

}  // namespace dsd::collectors

namespace dsd::collectors {
namespace {

// The JSON string starting at s[*i] (its opening quote), decoded into *out (\uXXXX, surrogate pairs
// included, as UTF-8); false when it is not a whole string.
bool JsonString(std::string_view s, size_t* i, std::string* out) {
  if (*i >= s.size() || s[*i] != '"') return false;
  auto hex4 = [&](size_t at, uint32_t* v) {
    if (at + 4 > s.size()) return false;
    *v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      char c = s[k];
      int d = IsDigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      *v = *v * 16 + static_cast<uint32_t>(d);
    }
    return true;
  };
  auto utf8 = [&](uint32_t cp) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | cp >> 6);
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | cp >> 12);
      *out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | cp >> 18);
      *out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
      *out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  };
  for (size_t k = *i + 1; k < s.size(); ++k) {
    char c = s[k];
    if (c == '"') {
      *i = k + 1;
      return true;
    }
    if (c != '\\') {
      *out += c;
      continue;
    }
    if (++k >= s.size()) return false;
    switch (s[k]) {
      case 'n':
        *out += '\n';
        break;
      case 't':
        *out += '\t';
        break;
      case 'r':
        *out += '\r';
        break;
      case 'b':
        *out += '\b';
        break;
      case 'f':
        *out += '\f';
        break;
      case 'u': {
        uint32_t cp = 0, low = 0;
        if (!hex4(k + 1, &cp)) return false;
        k += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && k + 6 < s.size() && s[k + 1] == '\\' && s[k + 2] == 'u' &&
            hex4(k + 3, &low) && low >= 0xDC00 && low < 0xE000) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          k += 6;
        } else if (cp >= 0xD800 && cp < 0xE000) {
          cp = 0xFFFD;  // a lone surrogate
        }
        utf8(cp);
        break;
      }
      default:
        *out += s[k];  // \" \\ \/
    }
  }
  return false;
}

// The string value of "key" in `s` (the first occurrence, at any depth), decoded; false when none.
bool JsonStringField(std::string_view s, std::string_view key, std::string* out) {
  std::string quoted = "\"" + std::string(key) + "\"";
  for (size_t at = s.find(quoted); at != std::string_view::npos; at = s.find(quoted, at + 1)) {
    size_t i = SkipSpaces(s, at + quoted.size());
    if (i >= s.size() || s[i] != ':') continue;
    i = SkipSpaces(s, i + 1);
    out->clear();
    if (JsonString(s, &i, out)) return true;
  }
  return false;
}

}  // namespace

bool DecodeJsonLogLine(std::string_view line, JsonLogLine* out) {
  std::string_view s = Trim(line);
  if (s.size() < 8 || s.front() != '{' || s.back() != '}') return false;
  // Only the records of a container runtime or a log shipper carry a program's whole line: a program's
  // own structured log ({"level":"error","msg":…,"error":…}) keeps the words of its failure in other
  // fields, and is read as the line it is.
  std::string value;
  const bool found = JsonStringField(s, "textPayload", &out->text) || JsonStringField(s, "MESSAGE", &out->text) ||
                     (JsonStringField(s, "log", &out->text) &&
                      (JsonStringField(s, "stream", &value) || JsonStringField(s, "time", &value) ||
                       s.find("\"kubernetes\"") != std::string_view::npos));
  if (!found) return false;
  while (!out->text.empty() && (out->text.back() == '\n' || out->text.back() == '\r')) out->text.pop_back();
  out->stream.clear();
  if (JsonStringField(s, "stream", &value) && (value == "stdout" || value == "stderr")) out->stream = value;
  out->time_ns = 0;
  for (std::string_view key : {"time", "timestamp", "@timestamp"}) {
    int64_t ns = 0;
    if (JsonStringField(s, key, &value) && Timestamp(value, &ns)) {
      out->time_ns = ns;
      break;
    }
  }
  out->host.clear();
  for (std::string_view key : {"pod_name", "_HOSTNAME", "hostname", "host"}) {
    if (JsonStringField(s, key, &value) && !value.empty() && value.size() <= 253 &&
        std::all_of(value.begin(), value.end(), IsHostChar)) {
      out->host = value;
      break;
    }
  }
  return true;
}

}  // namespace dsd::collectors
