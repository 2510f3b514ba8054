#include "common/json_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

namespace dsd::jsontext {

void AppendString(std::string* out, std::string_view s) {
  // ASCII (names, callsites, a rank's output after SanitizeForStream) is escaped here, as nlohmann
  // escapes it; text with other bytes goes through nlohmann's serializer, the one EncodeFrame uses,
  // which also replaces invalid UTF-8.
  for (const char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return AppendJson(out, nlohmann::json(s));
  out->push_back('"');
  size_t plain = 0;  // start of the run of characters written as they are
  for (size_t i = 0; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u >= 0x20 && u != '"' && u != '\\') continue;
    out->append(s.data() + plain, i - plain);
    plain = i + 1;
    switch (u) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        const char esc[] = {'\\', 'u', '0', '0', kHex[u >> 4], kHex[u & 15]};
        out->append(esc, sizeof esc);
      }
    }
  }
  out->append(s.data() + plain, s.size() - plain);
  out->push_back('"');
}

void AppendInt(std::string* out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

void AppendUInt(std::string* out, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

void AppendBool(std::string* out, bool v) { out->append(v ? "true" : "false"); }

void AppendDouble(std::string* out, double v) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  const std::string_view text(buf, static_cast<size_t>(r.ptr - buf));
  out->append(text);
  if (text.find_first_of(".e") == std::string_view::npos) out->append(".0");
}

void AppendJson(std::string* out, const nlohmann::json& v) {
  out->append(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void AppendKey(std::string* out, std::string_view key, bool* first) {
  if (!*first) out->push_back(',');
  *first = false;
  AppendString(out, key);
  out->push_back(':');
}

void Reader::SkipSpace() {
  while (pos_ < text_.size()) {
    const char c = text_[pos_];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
    ++pos_;
  }
}

char Reader::Peek() {
  SkipSpace();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

bool Reader::Consume(char c) {
  if (Peek() != c || pos_ >= text_.size()) return false;
  ++pos_;
  return true;
}

bool Reader::AtEnd() {
  SkipSpace();
  return pos_ == text_.size();
}

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The string starting at text[*pos] (its opening quote), decoded into *out when out is given.
// Bytes above 0x7f are refused (so is invalid UTF-8, which the full parser then reports) and so
// are escaped surrogates: both are rare here, and the full parser reads them.
bool ScanString(std::string_view text, size_t* pos, std::string* out) {
  size_t at = *pos;
  if (at >= text.size() || text[at] != '"') return false;
  ++at;
  if (out) out->clear();
  while (true) {
    size_t run = at;
    while (at < text.size()) {
      const auto u = static_cast<unsigned char>(text[at]);
      if (u == '"' || u == '\\' || u < 0x20 || u >= 0x80) break;
      ++at;
    }
    if (out) out->append(text.data() + run, at - run);
    if (at >= text.size()) return false;
    const char c = text[at];
    if (c == '"') {
      *pos = at + 1;
      return true;
    }
    if (c != '\\' || at + 1 >= text.size()) return false;  // a control character or a high byte
    const char e = text[at + 1];
    at += 2;
    char plain = 0;
    switch (e) {
      case '"':
      case '\\':
      case '/':
        plain = e;
        break;
      case 'b':
        plain = '\b';
        break;
      case 'f':
        plain = '\f';
        break;
      case 'n':
        plain = '\n';
        break;
      case 'r':
        plain = '\r';
        break;
      case 't':
        plain = '\t';
        break;
      case 'u': {
        if (at + 4 > text.size()) return false;
        int cp = 0;
        for (int k = 0; k < 4; ++k) {
          const int d = HexDigit(text[at + k]);
          if (d < 0) return false;
          cp = cp * 16 + d;
        }
        at += 4;
        if (cp >= 0xD800 && cp <= 0xDFFF) return false;
        if (out) {
          if (cp < 0x80) {
            out->push_back(static_cast<char>(cp));
          } else if (cp < 0x800) {
            out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          } else {
            out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
            out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          }
        }
        continue;
      }
      default:
        return false;
    }
    if (out) out->push_back(plain);
  }
}

}  // namespace

bool Reader::String(std::string* out) {
  SkipSpace();
  return ScanString(text_, &pos_, out);
}

bool Reader::PlainString(std::string_view* out) {
  SkipSpace();
  if (pos_ >= text_.size() || text_[pos_] != '"') return false;
  const size_t start = pos_ + 1;
  size_t at = start;
  while (at < text_.size()) {
    const auto u = static_cast<unsigned char>(text_[at]);
    if (u == '"') break;
    if (u == '\\' || u < 0x20 || u >= 0x80) return false;
    ++at;
  }
  if (at >= text_.size()) return false;
  *out = text_.substr(start, at - start);
  pos_ = at + 1;
  return true;
}

bool Reader::NumberToken(std::string_view* token, bool* integral) {
  SkipSpace();
  const size_t start = pos_;
  size_t at = pos_;
  auto digit = [&](size_t i) { return i < text_.size() && text_[i] >= '0' && text_[i] <= '9'; };
  if (at < text_.size() && text_[at] == '-') ++at;
  if (!digit(at)) return false;
  if (text_[at] == '0') {
    ++at;
  } else {
    while (digit(at)) ++at;
  }
  *integral = true;
  if (at < text_.size() && text_[at] == '.') {
    *integral = false;
    ++at;
    if (!digit(at)) return false;
    while (digit(at)) ++at;
  }
  if (at < text_.size() && (text_[at] == 'e' || text_[at] == 'E')) {
    *integral = false;
    ++at;
    if (at < text_.size() && (text_[at] == '+' || text_[at] == '-')) ++at;
    if (!digit(at)) return false;
    while (digit(at)) ++at;
  }
  *token = text_.substr(start, at - start);
  pos_ = at;
  return true;
}

bool Reader::Int(int64_t* out) {
  std::string_view t;
  bool integral = false;
  if (!NumberToken(&t, &integral) || !integral) return false;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), *out);
  return r.ec == std::errc() && r.ptr == t.data() + t.size();
}

bool Reader::UInt(uint64_t* out) {
  std::string_view t;
  bool integral = false;
  if (!NumberToken(&t, &integral) || !integral || t[0] == '-') return false;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), *out);
  return r.ec == std::errc() && r.ptr == t.data() + t.size();
}

bool Reader::Number(double* out) {
  std::string_view t;
  bool integral = false;
  if (!NumberToken(&t, &integral)) return false;
  const char* end = t.data() + t.size();
  if (integral) {
    // nlohmann keeps an integer that fits 64 bits as one; converted to double it rounds as here.
    if (t[0] == '-') {
      int64_t i = 0;
      if (auto r = std::from_chars(t.data(), end, i); r.ec == std::errc() && r.ptr == end) {
        *out = static_cast<double>(i);
        return true;
      }
    } else {
      uint64_t u = 0;
      if (auto r = std::from_chars(t.data(), end, u); r.ec == std::errc() && r.ptr == end) {
        *out = static_cast<double>(u);
        return true;
      }
    }
  }
  // Out of range (an infinity, a value below the smallest denormal) is refused: the full parser
  // decides what it becomes.
  const auto r = std::from_chars(t.data(), end, *out);
  return r.ec == std::errc() && r.ptr == end;
}

bool Reader::Bool(bool* out) {
  SkipSpace();
  const std::string_view rest = text_.substr(pos_);
  if (rest.starts_with("true")) {
    *out = true;
    pos_ += 4;
    return true;
  }
  if (rest.starts_with("false")) {
    *out = false;
    pos_ += 5;
    return true;
  }
  return false;
}

bool Reader::Skip(std::string_view* span, int max_depth) {
  max_depth = std::min(max_depth, 64);  // open containers are kept as bits of one word
  SkipSpace();
  const size_t start = pos_;
  uint64_t objects = 0;  // bit d: the container open at depth d is an object
  int depth = 0;
  while (true) {
    // A value.
    const char c = Peek();
    if (c == '{' || c == '[') {
      if (depth >= max_depth) return false;
      ++pos_;
      const bool object = c == '{';
      objects = object ? objects | (uint64_t{1} << depth) : objects & ~(uint64_t{1} << depth);
      ++depth;
      if (Consume(object ? '}' : ']')) {
        --depth;
      } else {
        if (object && (!String(nullptr) || !Consume(':'))) return false;
        continue;  // its first member's value
      }
    } else if (c == '"') {
      if (!String(nullptr)) return false;
    } else if (c == 't' || c == 'f') {
      bool b = false;
      if (!Bool(&b)) return false;
    } else if (c == 'n') {
      if (!text_.substr(pos_).starts_with("null")) return false;
      pos_ += 4;
    } else {
      double number = 0;  // read, not only matched: the full parser refuses a number out of range
      if (!Number(&number)) return false;
    }
    // After a value: the next member, or the ends of the containers it closes.
    while (true) {
      if (depth == 0) {
        if (span) *span = text_.substr(start, pos_ - start);
        return true;
      }
      const bool object = (objects >> (depth - 1)) & 1;
      if (Consume(',')) {
        if (object && (!String(nullptr) || !Consume(':'))) return false;
        break;
      }
      if (!Consume(object ? '}' : ']')) return false;
      --depth;
    }
  }
}

}  // namespace dsd::jsontext
