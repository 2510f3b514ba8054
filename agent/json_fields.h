// Checks of a JSON message's fields before anything acts on it: each field's type and range, each
// string's and list's length, the first problem kept as a Status naming the message and the field
// ("run.ranks[0]: field 'rank' must be an integer in 0..1048575"). Shared by the agent's request
// checks (agent/request.cc) and the readers of the run protocol (agent/run_protocol.cc).
// Pure and total: any JSON value gets a Status, never an exception. Header-only; thread-compatible.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace dsd::agent::fields {

using nlohmann::json;

inline constexpr size_t kMaxName = 4096;        // host names, keys, paths
inline constexpr size_t kMaxValue = 16u << 20;  // a value can be as big as a frame
inline constexpr int64_t kMaxPort = 65535;
inline constexpr int64_t kMaxTimeoutMs = 24LL * 3600 * 1000;

// Checks the fields of one JSON object; the first problem found is kept.
class Fields {
 public:
  Fields(const json& j, std::string what) : j_(j), what_(std::move(what)) {
    if (!j_.is_object()) Fail("is not a JSON object");
  }

  Fields& Int(const char* key, int64_t lo, int64_t hi, bool required = false) {
    const json* v = Get(key, required);
    if (v && !IntIn(*v, lo, hi))
      Fail(std::string("field '") + key + "' must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    return *this;
  }
  Fields& Number(const char* key, double lo, double hi, bool required = false) {
    const json* v = Get(key, required);
    if (v && (!v->is_number() || !(v->get<double>() >= lo && v->get<double>() <= hi)))
      Fail(std::string("field '") + key + "' must be a number in " + Short(lo) + ".." + Short(hi));
    return *this;
  }
  Fields& Bool(const char* key) {
    const json* v = Get(key, false);
    if (v && !v->is_boolean()) Fail(std::string("field '") + key + "' must be true or false");
    return *this;
  }
  Fields& String(const char* key, size_t max_len, bool required = false) {
    const json* v = Get(key, required);
    if (v && !StringOk(*v, max_len))
      Fail(std::string("field '") + key + "' must be a string of at most " + std::to_string(max_len) + " bytes");
    return *this;
  }
  Fields& StringList(const char* key, size_t max_items, size_t max_len, bool required = false, bool non_empty = false) {
    const json* v = Get(key, required);
    if (!v) return *this;
    bool ok = v->is_array() && v->size() <= max_items && (!non_empty || !v->empty());
    for (size_t i = 0; ok && i < v->size(); ++i) ok = StringOk((*v)[i], max_len);
    if (!ok)
      Fail(std::string("field '") + key + "' must be a list of at most " + std::to_string(max_items) + " strings" +
           (non_empty ? ", not empty" : ""));
    return *this;
  }
  Fields& IntList(const char* key, size_t max_items, int64_t lo, int64_t hi, bool required = false) {
    const json* v = Get(key, required);
    if (!v) return *this;
    bool ok = v->is_array() && v->size() <= max_items;
    for (size_t i = 0; ok && i < v->size(); ++i) ok = IntIn((*v)[i], lo, hi);
    if (!ok)
      Fail(std::string("field '") + key + "' must be a list of at most " + std::to_string(max_items) + " integers in " +
           std::to_string(lo) + ".." + std::to_string(hi));
    return *this;
  }
  // {"NAME": "value", …}
  Fields& StringMap(const char* key, size_t max_items) {
    const json* v = Get(key, false);
    if (!v) return *this;
    bool ok = v->is_object() && v->size() <= max_items;
    if (ok)
      for (const auto& [k, val] : v->items())
        if (k.size() > kMaxName || !StringOk(val, kMaxValue)) {
          ok = false;
          break;
        }
    if (!ok)
      Fail(std::string("field '") + key + "' must be an object of at most " + std::to_string(max_items) +
           " string values");
    return *this;
  }
  // {"host": "node-1", "port": 29500}
  Fields& Endpoint(const char* key, bool required = false) {
    const json* v = Get(key, required);
    if (!v) return *this;
    Fields inner(*v, what_ + "." + key);
    inner.String("host", kMaxName, true).Int("port", 0, kMaxPort, true);
    if (!inner.status().ok()) status_ = inner.status();
    return *this;
  }
  // A list of objects, each checked by `each`.
  template <typename Each>
  Fields& Objects(const char* key, size_t max_items, bool required, Each each) {
    const json* v = Get(key, required);
    if (!v) return *this;
    if (!v->is_array() || v->size() > max_items) {
      Fail(std::string("field '") + key + "' must be a list of at most " + std::to_string(max_items) + " objects");
      return *this;
    }
    for (size_t i = 0; i < v->size() && status_.ok(); ++i) {
      Fields inner((*v)[i], what_ + "." + key + "[" + std::to_string(i) + "]");
      each(inner);
      if (!inner.status().ok()) status_ = inner.status();
    }
    return *this;
  }

  const Status& status() const { return status_; }

 private:
  const json* Get(const char* key, bool required) {
    if (!status_.ok() || !j_.is_object()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (required) Fail(std::string("field '") + key + "' is missing");
      return nullptr;
    }
    return &*it;
  }
  static bool IntIn(const json& v, int64_t lo, int64_t hi) {
    if (v.is_number_unsigned()) {  // what the parser makes of every non-negative integer
      const uint64_t u = v.get<uint64_t>();
      return hi >= 0 && u <= static_cast<uint64_t>(hi) && (lo <= 0 || u >= static_cast<uint64_t>(lo));
    }
    if (v.is_number_integer()) return v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    return false;
  }
  static bool StringOk(const json& v, size_t max_len) {
    return v.is_string() && v.get_ref<const std::string&>().size() <= max_len;
  }
  static std::string Short(double d) {
    std::string s = std::to_string(d);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  void Fail(const std::string& why) {
    if (status_.ok()) status_ = InvalidArgument(what_ + ": " + why);
  }

  const json& j_;
  std::string what_;
  Status status_ = Status::Ok();
};

// The message's "type", or why it has none; `what` is "request" or "message".
inline Result<std::string> TypeOf(const json& j, const char* what) {
  if (!j.is_object()) return InvalidArgument(std::string(what) + " is not a JSON object");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return InvalidArgument(std::string(what) + " has no string 'type'");
  return t->get<std::string>();
}

}  // namespace dsd::agent::fields
