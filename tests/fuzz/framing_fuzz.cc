// libFuzzer target for the wire framing: arbitrary bytes, fed in arbitrary chunk sizes, must give
// frames or Status errors, never a crash, a hang, an exception or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/framing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the chunk size, so the fuzzer explores split headers too.
  size_t chunk = 1 + data[0] % 64;
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  dsd::wire::FrameDecoder decoder(4096);
  for (size_t off = 0; off < bytes.size(); off += chunk) {
    decoder.Feed(bytes.substr(off, chunk));
    for (int i = 0; i < 64; ++i) {
      auto next = decoder.Next();
      if (!next.ok()) {
        if (decoder.broken()) return 0;
        continue;
      }
      if (!next->has_value()) break;
      // A decoded message must re-encode.
      auto again = dsd::wire::EncodeFrame(**next, 1u << 20);
      if (!again.ok()) __builtin_trap();
    }
  }
  return 0;
}
