#include "common/json_text.h"

#include <charconv>
#include <cmath>

namespace dsd::jsontext {

void AppendString(std::string* out, std::string_view s) {
  // Printable ASCII without quote or backslash (names, callsites, states) is written as it is;
  // anything else is escaped by nlohmann's serializer, the one EncodeFrame uses.
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      AppendJson(out, nlohmann::json(s));
      return;
    }
  }
  out->push_back('"');
  out->append(s);
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
