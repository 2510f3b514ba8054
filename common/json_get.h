// Fields of untrusted JSON (a Flight Recorder dump, torchrun's error file, an agent's report) read
// without throwing: a missing key, a value of another type or a container that is not an object
// gives the empty default (nlohmann's value() and get() throw on those). Header-only; pure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dsd {

inline std::string JsonString(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::string();
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

inline bool JsonBool(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace dsd
