#include "probe/nccl.h"

#include <cstdio>
#include <regex>

#include "common/log.h"
#include "common/process.h"
#include "common/strings.h"

namespace dsd::probe {
namespace {

// ncclUniqueId is 128 opaque bytes (NCCL_UNIQUE_ID_BYTES).
struct NcclUniqueId {
  char internal[128];
};
using GetVersionFn = int (*)(int*);
using GetUniqueIdFn = int (*)(NcclUniqueId*);
using GetErrorStringFn = const char* (*)(int);

constexpr const char* kResultMarker = "DSDOCTOR_NCCL_RESULT ";

}  // namespace

std::string NcclVersion::ToString() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

NcclVersion DecodeNcclVersion(int code) {
  NcclVersion v;
  v.code = code;
  if (code >= 10000) {
    v.major = code / 10000;
    v.minor = (code % 10000) / 100;
  } else {
    v.major = code / 1000;
    v.minor = (code % 1000) / 100;
  }
  v.patch = code % 100;
  return v;
}

LibrarySearch NcclLibrarySearch() {
  LibrarySearch s;
  s.what = "NCCL";
  s.override_env = "DSDOCTOR_NCCL_LIBRARY";
  s.sonames = {"libnccl.so.2", "libnccl.so"};
  s.dirs = DefaultCudaLibraryDirs();
  // pip wheels (nvidia-nccl-cu12/13), as PyTorch and DeepSpeed installs bring them.
  for (const char* d : {"/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib",
                        "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib",
                        "/usr/lib/python3/dist-packages/nvidia/nccl/lib"}) {
    s.dirs.push_back(d);
  }
  return s;
}

NcclInfo InspectNccl(const LibrarySearch& search, DynamicLibrary* keep) {
  NcclInfo info;
  auto lib = FindAndOpen(search, &info.attempts);
  if (!lib.ok()) {
    info.error = lib.status().message();
    return info;
  }
  info.found = true;
  info.path = lib->path();
  auto get_version = lib->Symbol<GetVersionFn>("ncclGetVersion");
  if (!get_version.ok()) {
    info.error = get_version.status().message();
    return info;
  }
  int code = 0;
  int rc = (*get_version)(&code);
  if (rc != 0) {
    info.error = "ncclGetVersion returned " + std::to_string(rc);
    return info;
  }
  info.version = DecodeNcclVersion(code);
  log::Get("probe")->debug("NCCL {} at {}", info.version.ToString(), info.path);
  if (keep) *keep = std::move(*lib);
  return info;
}

void ParseNcclBootstrapLog(const std::string& output, NcclBootstrapInfo* info) {
  static const std::regex kUsing(R"(NCCL INFO Bootstrap ?: Using ([^:\s]+):(\S+?)<\d+>)");
  static const std::regex kWarn(R"(NCCL WARN (.*)$)");
  for (const auto& raw : Split(output, '\n')) {
    std::string line(Trim(raw));
    if (line.empty() || StartsWith(line, kResultMarker)) continue;
    if (line.find("NCCL ") != std::string::npos) info->log.push_back(line);
    std::smatch m;
    if (info->interface.empty() && std::regex_search(line, m, kUsing)) {
      info->interface = m[1];
      info->address = m[2];
    } else if (std::regex_search(line, m, kWarn)) {
      info->warnings.emplace_back(Trim(m[1].str()));
    }
  }
}

NcclBootstrapInfo ProbeNcclBootstrap(const std::string& library_path, const std::map<std::string, std::string>& env,
                                     Duration timeout) {
  NcclBootstrapInfo info;
  info.ran = true;
  ChildOptions opts;
  opts.timeout = timeout;
  opts.env = env;
  opts.env["NCCL_DEBUG"] = "INFO";
  opts.env["NCCL_DEBUG_FILE"] = "";  // unset: NCCL must log to our pipe
  auto child = RunInChild([&library_path]() -> int {
    auto lib = DynamicLibrary::Open(library_path);
    if (!lib.ok()) {
      std::printf("%s-1 %s\n", kResultMarker, lib.status().message().c_str());
      return 2;
    }
    auto get_id = lib->Symbol<GetUniqueIdFn>("ncclGetUniqueId");
    auto err_str = lib->Symbol<GetErrorStringFn>("ncclGetErrorString");
    if (!get_id.ok() || !err_str.ok()) {
      std::printf("%s-1 ncclGetUniqueId/ncclGetErrorString missing\n", kResultMarker);
      return 2;
    }
    NcclUniqueId id;
    int rc = (*get_id)(&id);
    std::fflush(stdout);
    std::printf("%s%d %s\n", kResultMarker, rc, (*err_str)(rc));
    std::fflush(stdout);
    return 0;
  }, opts);
  auto log = log::Get("probe");
  if (!child.ok()) {
    info.error = child.status().message();
    return info;
  }
  ParseNcclBootstrapLog(child->output, &info);
  size_t marker = child->output.rfind(kResultMarker);
  if (marker == std::string::npos) {
    info.error = "NCCL bootstrap probe ended without a result: " + DescribeChildEnd(*child);
    log->debug("{}; output: {}", info.error, child->output);
    return info;
  }
  std::string tail(Trim(child->output.substr(marker + std::string(kResultMarker).size())));
  tail = tail.substr(0, tail.find('\n'));
  size_t space = tail.find(' ');
  try {
    info.result = std::stoi(tail.substr(0, space));
  } catch (...) {
    info.result = -1;
  }
  info.result_text = space == std::string::npos ? "" : tail.substr(space + 1);
  info.ok = info.result == 0;
  log->debug("NCCL bootstrap: result {} ({}), interface '{}' {}", info.result, info.result_text, info.interface,
             info.address);
  return info;
}

nlohmann::json ToJson(const NcclInfo& info) {
  nlohmann::json j = {{"found", info.found}, {"path", info.path}, {"error", info.error}};
  if (info.found) {
    j["version"] = info.version.ToString();
    j["version_code"] = info.version.code;
  }
  nlohmann::json tried = nlohmann::json::array();
  for (const auto& a : info.attempts) tried.push_back({{"candidate", a.candidate}, {"error", a.error}});
  j["tried"] = tried;
  return j;
}

nlohmann::json ToJson(const NcclBootstrapInfo& info) {
  return {{"ran", info.ran},           {"ok", info.ok},           {"result", info.result},
          {"result_text", info.result_text}, {"interface", info.interface}, {"address", info.address},
          {"warnings", info.warnings}, {"log", info.log},         {"error", info.error}};
}

}  // namespace dsd::probe
