// Appends JSON text for single values to a string without building a nlohmann::json tree: for the
// frames sent many times a second (a run's samples, one entry per rank), where building the tree
// and dumping it cost more than the data. The text reads back as the values nlohmann's dump would
// give (strings are written as it writes them, invalid UTF-8 as U+FFFD as EncodeFrame does; a double
// may be spelled differently, 1e-04 for 0.0001, but is the same number), so readers see no difference.
// Pure functions; the caller owns the string.
//
// Reader goes the other way for the same frames: it reads values out of JSON text in place, for a
// reader that knows the shape it expects and builds its structs directly (a JSON tree for a run's
// sample cost the coordinator more than the rest of its work on it).
#pragma once

#include <concepts>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

namespace dsd::jsontext {

void AppendString(std::string* out, std::string_view s);
void AppendInt(std::string* out, int64_t v);
void AppendUInt(std::string* out, uint64_t v);
void AppendBool(std::string* out, bool v);
// Shortest text that reads back as the same double, always with a '.' or an exponent (so it reads
// back as a float); NaN and infinities as null, as nlohmann writes them.
void AppendDouble(std::string* out, double v);
// Any value, through nlohmann's dump (invalid UTF-8 replaced): for the rare and nested parts.
void AppendJson(std::string* out, const nlohmann::json& v);
// `"key":`, preceded by ',' unless *first (which it then clears): a field of an object being written.
void AppendKey(std::string* out, std::string_view key, bool* first);

// Reads one JSON text front to back (RFC 8259 syntax). Every read returns false on anything it does
// not take (bad syntax, a value of another type, an integer out of range, a \u escape of a
// surrogate, a byte above 0x7f in a string, nesting past the bound) and the reader's position is
// then unspecified: its caller gives the text to a full parser instead, which takes or reports it.
// So what Reader takes it reads exactly as nlohmann::json::parse would; what it refuses costs a
// second parse, never a different result. Not thread-safe; `text` must outlive the reader.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}
  // The next character after whitespace ('\0' at the end), not consumed.
  char Peek();
  // Consumes `c` after whitespace.
  bool Consume(char c);
  // Whitespace and nothing else is left.
  bool AtEnd();
  // A string, decoded.
  bool String(std::string* out);
  // A string without escapes, as a view into the text (object keys).
  bool PlainString(std::string_view* out);
  // An integer (no fraction or exponent) that fits int64 / uint64.
  bool Int(int64_t* out);
  bool UInt(uint64_t* out);
  // An integer that fits T (bool excluded).
  template <std::integral T>
  bool Integer(T* out) {
    if (Peek() == '-') {
      int64_t i = 0;
      if (!Int(&i) || !std::in_range<T>(i)) return false;
      *out = static_cast<T>(i);
      return true;
    }
    uint64_t u = 0;
    if (!UInt(&u) || !std::in_range<T>(u)) return false;
    *out = static_cast<T>(u);
    return true;
  }
  // Any number, as nlohmann reads it and converts it to double (an integer that fits 64 bits is
  // read as one, then converted).
  bool Number(double* out);
  bool Bool(bool* out);
  // Any value, skipped; its text is *span when given.
  bool Skip(std::string_view* span = nullptr, int max_depth = 64);
  size_t position() const { return pos_; }

 private:
  void SkipSpace();
  // The number token at pos_ (grammar checked), consumed; integral when it has no '.' or exponent.
  bool NumberToken(std::string_view* token, bool* integral);

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace dsd::jsontext
