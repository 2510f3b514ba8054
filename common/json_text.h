// Appends JSON text for single values to a string without building a nlohmann::json tree: for the
// frames sent many times a second (a run's samples, one entry per rank), where building the tree
// and dumping it cost more than the data. The text reads back as the values nlohmann's dump would
// give (strings are written as it writes them, invalid UTF-8 as U+FFFD as EncodeFrame does; a double
// may be spelled differently, 1e-04 for 0.0001, but is the same number), so readers see no difference.
// Pure functions; the caller owns the string.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

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

}  // namespace dsd::jsontext
