// libFuzzer target for what an agent does with the bytes of an authenticated link before acting
// (agent/request.cc): frames decoded, every message's shape checked as a request and as a run
// stream message (agent/run_protocol.cc); and what the coordinator does with a ping reply
// (agent/ping.cc) and with an agent's run stream messages. Any bytes must
// give a value or an error, never a crash or an exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/ping.h"
#include "agent/request.h"
#include "agent/run_protocol.h"
#include "common/framing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Frames: the input as a stream of frames, as a peer would send it.
  dsd::wire::FrameDecoder decoder(1u << 20);
  decoder.Feed(bytes);
  for (int i = 0; i < 64; ++i) {
    auto next = decoder.Next();
    if (!next.ok()) {
      if (decoder.broken()) break;
      continue;
    }
    if (!next->has_value()) break;
    (void)dsd::agent::ValidateRequest(**next);
    (void)dsd::agent::ReadRunControl(**next);
    (void)dsd::agent::ReadAgentRunMessage(**next);
  }
  // And the input as one JSON payload, so the fuzzer need not learn the header to reach the checks.
  auto j = dsd::wire::ParseJsonBounded(bytes);
  if (j.ok()) {
    (void)dsd::agent::ValidateRequest(*j);
    (void)dsd::agent::ReadRunControl(*j);
    (void)dsd::agent::ReadAgentRunMessage(*j);
    (void)dsd::agent::ParsePingReply(*j, 4);
  }
  return 0;
}
