// libFuzzer target for the Flight Recorder dump reader (collectors/pickle.cc, then
// collectors/flight_recorder.cc's entries → trace records): a dump comes from the user's job, so
// whatever it holds must give a value or a named error, never a crash, an exception, an unbounded
// allocation or code run. Small limits keep each input's cost bounded.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/flight_recorder.h"
#include "collectors/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dsd::collectors::PickleLimits limits;
  limits.max_depth = 32;
  limits.max_values = 100000;
  // As analyze reads a dump: only the tail of "entries" converted (odd inputs pick either path).
  if (size % 2) limits.tail_key = "entries", limits.tail_items = 3;
  auto j = dsd::collectors::ParsePickle(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!j.ok()) return 0;
  (void)j->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (j->is_object() && j->contains("entries") && (*j)["entries"].is_array()) {
    dsd::collectors::FlightRecorderDump dump;
    dump.rank = 1;
    dump.doc = std::move(*j);
    auto r = dsd::collectors::RankStateFromDump(dump);
    for (const auto& rec : r.recent) (void)rec.Describe();
  }
  return 0;
}
