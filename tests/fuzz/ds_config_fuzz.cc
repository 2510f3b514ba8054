// libFuzzer target for the strict ds_config parser (runtime/config.cc): any bytes give a Config or
// an error naming the field, never a crash (1e999 and deep nesting once did), a hang or unbounded
// memory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto c = dsd::runtime::ParseConfig(text, "fuzz.json");
  if (!c.ok()) (void)c.status().message();
  return 0;
}
