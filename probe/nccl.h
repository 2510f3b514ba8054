// NCCL, loaded with dlopen: which library, which version (the library's own ncclGetVersion), and
// which interface its bootstrap picks under a given environment (a real ncclGetUniqueId run in a
// child process, with NCCL's own log captured).
// Why a child: NCCL reads its environment once per process and ncclGetUniqueId starts a bootstrap
// root thread that never ends; a child keeps both out of dsdoctor and bounds a hang by a timeout.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "probe/dynlib.h"

namespace dsd::probe {

struct NcclVersion {
  int code = 0;  // as ncclGetVersion returns it
  int major = 0, minor = 0, patch = 0;
  std::string ToString() const;  // "2.28.9"
};

// NCCL encodes versions as major*10000+minor*100+patch since 2.9, and major*1000+minor*100+patch
// before; both are decoded.
NcclVersion DecodeNcclVersion(int code);

struct NcclInfo {
  bool found = false;
  std::string path;
  NcclVersion version;
  std::string error;                   // why not found / why the version call failed
  std::vector<LoadAttempt> attempts;   // every location tried before `path`
};

struct NcclBootstrapInfo {
  bool ran = false;        // false when NCCL was not found
  bool ok = false;         // ncclGetUniqueId returned ncclSuccess
  int result = -1;         // ncclResult_t
  std::string result_text; // ncclGetErrorString(result)
  std::string interface;   // "eth0"
  std::string address;     // "192.0.2.2"
  std::vector<std::string> warnings;  // NCCL's WARN lines, message part only
  std::vector<std::string> log;       // NCCL's log lines as printed
  std::string error;       // child crashed / timed out
};

// The NCCL search: DSDOCTOR_NCCL_LIBRARY, the loader's path, CUDA dirs, pip wheels' nvidia/nccl/lib.
LibrarySearch NcclLibrarySearch();

// Loads NCCL per `search` and asks it for its version. With `keep`, the library is moved there and
// stays loaded (else it is unloaded before returning).
NcclInfo InspectNccl(const LibrarySearch& search = NcclLibrarySearch(), DynamicLibrary* keep = nullptr);

// Runs ncclGetUniqueId from `library_path` in a child whose environment is ours overlaid with
// `env` (an empty value unsets). NCCL_DEBUG=INFO is forced so the chosen interface is logged.
NcclBootstrapInfo ProbeNcclBootstrap(const std::string& library_path, const std::map<std::string, std::string>& env,
                                     Duration timeout = std::chrono::seconds(20));

// Pure: fills interface/address/warnings/log from NCCL's output. Understands both
// "Bootstrap : Using eth0:10.0.0.1<0>" (older) and "Bootstrap: Using eth0:10.0.0.1<0>".
void ParseNcclBootstrapLog(const std::string& output, NcclBootstrapInfo* info);

nlohmann::json ToJson(const NcclInfo& info);
nlohmann::json ToJson(const NcclBootstrapInfo& info);

}  // namespace dsd::probe
