// What a launcher tells each process it starts (mpirun, PMIx, PMI, Slurm, torchrun): the tracers
// read the rank's numbers from it before the library they trace knows them.
#pragma once

#include <cstdlib>
#include <initializer_list>

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

}  // namespace dsd::tracers
