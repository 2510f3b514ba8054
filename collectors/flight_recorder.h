// PyTorch's Flight Recorder dumps as evidence (docs/flight-recorder.md): each rank's dump (the pickle
// torch writes to TORCH_FR_DUMP_TEMP_FILE<rank>, or its JSON form) becomes that rank's trace records,
// so the diagnosis engine names mismatches, missing ranks and stalls from them as from dsdoctor's own
// traces. Entries join across ranks by (process group, collective sequence number); a rank's newest
// entry that did not complete is where it waits. Pure functions over the files' bytes; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "diagnosis/state.h"

namespace dsd::collectors {

// Whether `head` (a file's first bytes) looks like a Flight Recorder dump: a pickle (protocol 2-5)
// or JSON document that starts with its keys.
bool LooksLikeFlightRecorderDump(std::string_view head);

// One rank's dump, parsed (a pickle or JSON; errors name the file and the field).
struct FlightRecorderDump {
  std::string path;
  int rank = -1;  // from the file name's trailing number
  std::string version;
  nlohmann::json doc;
};
// Of a pickle's entries only the newest `keep_entries` are converted (a full ring is 2,000 entries;
// the diagnosis reads the newest 64); the JSON form is read whole.
Result<FlightRecorderDump> ReadFlightRecorderDump(const std::string& path, size_t keep_entries = SIZE_MAX);

// The rank state a dump describes: its entries (newest `keep` of them) as trace records, the newest
// unfinished collective as in flight. `comm` ids are a hash of the process group's name (0 for the
// default group), the same on every rank.
diagnosis::RankState RankStateFromDump(const FlightRecorderDump& dump, size_t keep = 64);

// Every dump in `dir` (files whose names end in the rank, with a Flight Recorder head), as a job:
// ranks running (a dump is a snapshot of a live job), now = the newest time any dump names. Ranks
// with no dump are said in evidence_missing, never taken as healthy. NotFound when `dir` holds none.
Result<diagnosis::JobState> LoadFlightRecorderDir(const std::string& dir, std::vector<std::string>* warnings);

}  // namespace dsd::collectors
