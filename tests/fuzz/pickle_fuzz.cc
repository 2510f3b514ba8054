// libFuzzer target for the Flight Recorder dump reader's pickle subset (collectors/pickle.cc): a dump
// comes from the user's job, so whatever it holds must give a value or a named error, never a crash,
// an unbounded allocation or code run. Small limits keep each input's cost bounded.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsd::collectors::PickleLimits limits;
  limits.max_depth = 32;
  limits.max_values = 100000;
  auto j = dsd::collectors::ParsePickle(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (j.ok()) (void)j->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
