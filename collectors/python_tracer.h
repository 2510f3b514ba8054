// Where the Python collective tracer lives (python/dsdoctor_tracer.py and libdsdoctor_pytrace.so,
// installed in lib/dsdoctor/ beside the dsdoctor binary's bin/) and how a rank's environment
// turns it on: its folder first on PYTHONPATH (its sitecustomize chains to any other) and the
// library's path in DSDOCTOR_TRACER_LIB. Programs that are not Python ignore both.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/run_files.h"

namespace dsd::collectors {

struct PythonTracer {
  std::string python_dir;  // holds sitecustomize.py and dsdoctor_tracer.py
  std::string library;     // libdsdoctor_pytrace.so
};

// The tracer installed with the running binary (found from /proc/self/exe); nullopt when its
// files are missing.
std::optional<PythonTracer> FindPythonTracer();

// Adds the tracer to a rank's environment: PYTHONPATH = python_dir + the PYTHONPATH the rank would
// have had (env's, else ours), DSDOCTOR_TRACER_LIB = library.
void AddPythonTracer(const PythonTracer& tracer, std::map<std::string, std::string>* env);

// NCCL's profiler plugin (libdsdoctor-nccl-profiler.so, tracers/nccl_profiler.cc) installed with the
// running binary; nullopt when missing.
std::optional<std::string> FindNcclProfiler();

// Turns the plugin on in a rank's environment: NCCL_PROFILER_PLUGIN = its path. A plugin the user
// configured (NCCL_PROFILER_PLUGIN in env, else ours) is not replaced: it moves to
// DSDOCTOR_NCCL_PROFILER_CHAIN, and ours forwards its events to it; with none configured, NCCL's
// default libnccl-profiler.so is chained if it exists ("?libnccl-profiler.so"). NCCL_PROFILER_PLUGIN=none
// (any case) and DSDOCTOR_NCCL_PROFILER=off (`run --no-nccl-profiler`) leave the environment as it is.
void AddNcclProfiler(const std::string& plugin, std::map<std::string, std::string>* env);

// Turns PyTorch's Flight Recorder to the run dir (docs/flight-recorder.md "Dumps on a hang"):
// DSDOCTOR_FR_DIR = its flight_recorder/ folder (made here, with watchdog/ and pipe/), unless the
// user set it. The tracer reads it at init_process_group: it dumps there on the coordinator's
// request, and points torch's own variables there, under the names the running torch reads.
void AddFlightRecorder(const RunDir& dir, std::map<std::string, std::string>* env);

// libdsdoctor-pmpi.so beside this binary (lib/dsdoctor/), for MPI programs: MPI's profiling
// interface, preloaded (tracers/pmpi_tracer.cc).
std::optional<std::string> FindPmpiTracer();
// Preloads it: LD_PRELOAD=<lib>. The rank-exec shim puts the rank's own LD_PRELOAD after it.
void AddPmpiTracer(const std::string& lib, std::map<std::string, std::string>* env);

}  // namespace dsd::collectors
