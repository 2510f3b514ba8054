// A reader of the pickle subset that PyTorch's Flight Recorder dumps are written in (docs/flight-recorder.md):
// protocols 2 to 5 with dicts, lists, tuples, sets, str, bytes, int, float, bool, None and the memo.
// Nothing is executed: the opcodes that name or call Python objects (GLOBAL, STACK_GLOBAL, REDUCE,
// BUILD, INST, OBJ, NEWOBJ, PERSID…) are refused with their offset. Depth, values and input size
// are bounded, so a hostile or torn file costs bounded time and memory and gives a named error.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dsd::collectors {

struct PickleLimits {
  size_t max_depth = 64;               // nesting of containers
  size_t max_values = 50'000'000;      // values made (a memo reference counts again)
  size_t max_bytes = size_t{1} << 31;  // input
  // A list under a dict key of this name becomes only its last tail_items items (a Flight
  // Recorder dump's newest entries): the rest is parsed, never converted. Empty: every list whole.
  std::string tail_key;
  size_t tail_items = 0;
};

// The object a pickle holds, as JSON: dicts become objects (a non-string key by its JSON text),
// tuples, lists and sets arrays, bytes strings (as read; JSON output replaces invalid UTF-8).
// Errors name the offset and the opcode.
Result<nlohmann::json> ParsePickle(std::string_view data, const PickleLimits& limits = {});

}  // namespace dsd::collectors
