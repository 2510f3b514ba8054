#include "collectors/torchelastic_error.h"

#include <nlohmann/json.hpp>

#include "common/json_get.h"
#include "common/strings.h"

namespace dsd::collectors {

namespace {

// "1700000000" (torch writes a string) or a number.
int64_t Seconds(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string s = it->get<std::string>();
    if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos) return 0;
    return std::stoll(s);
  }
  return 0;
}

}  // namespace

std::optional<TorchElasticError> ParseTorchElasticError(std::string_view text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto m = j.find("message");
  if (m == j.end()) return std::nullopt;
  TorchElasticError e;
  if (m->is_string()) {  // the older form: the message alone, the timestamp beside it
    e.message = m->get<std::string>();
    e.timestamp_s = Seconds(j, "timestamp");
  } else if (m->is_object()) {
    e.message = JsonString(*m, "message");
    auto extra = m->find("extraInfo");
    if (extra != m->end() && extra->is_object()) {
      e.py_callstack = JsonString(*extra, "py_callstack");
      e.timestamp_s = Seconds(*extra, "timestamp");
    }
    auto code = m->find("errorCode");
    if (code != m->end() && code->is_number_integer()) {
      const int64_t c = code->get<int64_t>();
      e.error_code = c >= -255 && c <= 255 ? static_cast<int>(c) : 0;
    }
  } else {
    return std::nullopt;
  }
  if (e.message.empty() && e.py_callstack.empty()) return std::nullopt;
  return e;
}

std::string TorchElasticErrorAsLog(const TorchElasticError& error) {
  std::string out = !error.py_callstack.empty() ? error.py_callstack : error.message;
  if (!out.empty() && out.back() != '\n') out += '\n';
  // torchrun's agent gives the worker's exit code (negative: the signal that ended it).
  if (error.error_code < 0)
    out += "exitcode: " + std::to_string(error.error_code) + " (killed by signal " + std::to_string(-error.error_code) +
           ")\n";
  else if (error.error_code > 0)
    out += "exitcode: " + std::to_string(error.error_code) + "\n";
  return out;
}

int TorchElasticErrorRank(std::string_view path) {
  size_t slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (!StartsWith(name, "rank")) return -1;
  name.remove_prefix(4);
  if (!name.empty() && (name[0] == '_' || name[0] == '-')) name.remove_prefix(1);
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
  if (digits == 0 || digits > 7 || (digits < name.size() && name[digits] != '.')) return -1;
  return SafeInt(name.substr(0, digits));
}

}  // namespace dsd::collectors
