// What a launcher tells each process it starts (mpirun, PMIx, PMI, Slurm, torchrun): the tracers
// read the rank's numbers from it before the library they trace knows them.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "common/run_files.h"

namespace dsd::tracers {

// The first of `names` set to a number in [0, 2^24); -1 when none is.
inline int LauncherInt(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (!v || !*v) continue;
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (*end == '\0' && x >= 0 && x < (1 << 24)) return static_cast<int>(x);
  }
  return -1;
}

// Whether the process is to write a trace: DSDOCTOR_TRACE_FILE or DSDOCTOR_TRACE_DIR set.
inline bool TraceRequested() {
  const char* f = std::getenv("DSDOCTOR_TRACE_FILE");
  const char* d = std::getenv("DSDOCTOR_TRACE_DIR");
  return (f && *f) || (d && *d);
}

// Where rank `rank` writes it, as the bundled runtime: DSDOCTOR_TRACE_FILE, else the run dir's
// rank-<r>.trace in DSDOCTOR_TRACE_DIR; "" when neither is set.
inline std::string TracePathFor(int rank) {
  if (const char* f = std::getenv("DSDOCTOR_TRACE_FILE"); f && *f) return f;
  const char* d = std::getenv("DSDOCTOR_TRACE_DIR");
  if (!d || !*d || rank < 0) return "";
  return RunDir(d).RankTrace(rank);
}

}  // namespace dsd::tracers
