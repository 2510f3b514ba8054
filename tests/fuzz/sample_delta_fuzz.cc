// libFuzzer target for what the coordinator does with the rank entries of an agent's sample frames
// (diagnosis/sample_delta.cc, diagnosis/state.cc): each line of the input is one entry, applied to a
// reader that holds a rank's state, and to a fresh one. Any bytes must give a state or an error,
// never a crash or an exception; and whatever state a reader holds, a writer's keyframe and deltas
// of it must rebuild exactly that state in another reader (both record forms).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/framing.h"
#include "diagnosis/sample_delta.h"

namespace {

using dsd::diagnosis::RankState;

RankState Primer() {
  RankState s;
  s.rank = 1;
  s.node = "node-1";
  s.pid = 42;
  s.status = dsd::diagnosis::RankStatus::kRunning;
  s.has_trace = true;
  s.proc.valid = true;
  s.proc.state = 'S';
  for (int i = 0; i < 4; ++i) {
    dsd::diagnosis::OpRecord r;
    r.op = "all_reduce";
    r.seq = static_cast<uint64_t>(i);
    r.state = i == 3 ? "started" : "completed";
    r.started_ns = 1000 * (i + 1);
    s.recent.push_back(r);
  }
  s.in_flight = s.recent.back();
  return s;
}

// What `reader` holds, sent through writers into fresh readers: the same state must come out.
void CheckRoundTrip(const dsd::diagnosis::SampleDeltaReader& reader) {
  RankState held;
  if (!reader.StateInto(&held).ok()) return;
  for (bool compact : {false, true}) {
    dsd::diagnosis::SampleDeltaWriter w(compact);
    dsd::diagnosis::SampleDeltaReader again;
    // A keyframe of the primer, then a delta to the held state: both paths of the writer.
    for (const RankState* s : {static_cast<const RankState*>(nullptr), static_cast<const RankState*>(&held)}) {
      static const RankState primer = Primer();
      auto entry = dsd::wire::ParseJsonBounded(w.Encode(s ? *s : primer).dump());
      if (!entry.ok() || !again.Apply(*entry).ok()) std::abort();
    }
    auto got = again.State();
    if (!got.ok() || dsd::diagnosis::ToJson(*got) != dsd::diagnosis::ToJson(held)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  dsd::diagnosis::SampleDeltaReader primed;
  {
    dsd::diagnosis::SampleDeltaWriter w(true);
    auto key = dsd::wire::ParseJsonBounded(w.Encode(Primer()).dump());
    if (!key.ok() || !primed.Apply(*key).ok()) std::abort();
  }
  int lines = 0;
  while (!bytes.empty() && lines++ < 32) {
    size_t end = bytes.find('\n');
    std::string_view line = bytes.substr(0, end);
    bytes = end == std::string_view::npos ? std::string_view() : bytes.substr(end + 1);
    auto entry = dsd::wire::ParseJsonBounded(line);
    if (!entry.ok()) continue;
    (void)primed.Apply(*entry);
    dsd::diagnosis::SampleDeltaReader fresh;
    (void)fresh.Apply(*entry);
    CheckRoundTrip(primed);
    CheckRoundTrip(fresh);
  }
  return 0;
}
