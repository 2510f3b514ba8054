#include "common/json_text.h"

#include <charconv>
#include <cmath>

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

}  // namespace dsd::jsontext
