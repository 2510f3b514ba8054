#include "probe/gpu.h"

#include <algorithm>
#include <cctype>

#include "common/log.h"

namespace dsd::probe {
namespace {

using IntOutFn = int (*)(int*);
using ErrStrFn = const char* (*)(int);

// NVML's ABI (nvml.h): opaque device handles, C structs below.
using nvmlDevice_t = void*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlPciInfo_t {  // nvmlPciInfo_v3
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

}  // namespace

std::string FormatCudaVersion(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

LibrarySearch CudaRuntimeSearch() {
  LibrarySearch s;
  s.what = "CUDA runtime";
  s.override_env = "DSDOCTOR_CUDART_LIBRARY";
  s.sonames = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"};
  s.dirs = DefaultCudaLibraryDirs();
  return s;
}

CudaInfo InspectCuda(const LibrarySearch& search) {
  CudaInfo info;
  auto log = log::Get("probe");
  info.driver_library_found = DynamicLibrary::Open("libcuda.so.1").ok();
  auto lib = FindAndOpen(search);
  if (!lib.ok()) {
    info.error = lib.status().message();
    log->debug("CUDA runtime: {}", info.error);
    return info;
  }
  info.runtime_found = true;
  info.runtime_path = lib->path();
  auto rt = lib->Symbol<IntOutFn>("cudaRuntimeGetVersion");
  auto drv = lib->Symbol<IntOutFn>("cudaDriverGetVersion");
  auto count = lib->Symbol<IntOutFn>("cudaGetDeviceCount");
  auto errstr = lib->Symbol<ErrStrFn>("cudaGetErrorString");
  if (!rt.ok() || !drv.ok() || !count.ok() || !errstr.ok()) {
    info.error = "CUDA runtime at " + info.runtime_path + " lacks the expected entry points";
    return info;
  }
  (*rt)(&info.runtime_version);
  (*drv)(&info.driver_version);
  info.device_error = (*count)(&info.device_count);
  if (info.device_error != 0) {
    info.device_count = 0;
    info.device_error_text = (*errstr)(info.device_error);
  }
  // Which GPU each visible device is: two agents on one host with different CUDA_VISIBLE_DEVICES
  // both have a device 0, and NVML's list (every GPU, its own order) cannot say which.
  if (auto bus_id = lib->Symbol<int (*)(char*, int, int)>("cudaDeviceGetPCIBusId"); bus_id.ok()) {
    for (int d = 0; d < info.device_count; ++d) {
      char id[64] = {};
      if ((*bus_id)(id, sizeof id - 1, d) != 0) {
        info.pci_bus_ids.clear();  // all or none: a partial list would shift the devices
        break;
      }
      std::string text(id);
      std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
      info.pci_bus_ids.push_back(std::move(text));
    }
  }
  log->debug("CUDA runtime {} driver {} devices {} ({})", FormatCudaVersion(info.runtime_version),
             FormatCudaVersion(info.driver_version), info.device_count, info.device_error_text);
  return info;
}

NvmlInfo InspectNvml() {
  NvmlInfo info;
  LibrarySearch s;
  s.what = "NVML";
  s.override_env = "DSDOCTOR_NVML_LIBRARY";
  s.sonames = {"libnvidia-ml.so.1"};
  s.dirs = {"/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"};
  auto lib = FindAndOpen(s);
  auto log = log::Get("probe");
  if (!lib.ok()) {
    info.error = lib.status().message();
    log->debug("NVML: {}", info.error);
    return info;
  }
  info.found = true;
  info.path = lib->path();
  auto init = lib->Symbol<int (*)()>("nvmlInit_v2");
  auto shutdown = lib->Symbol<int (*)()>("nvmlShutdown");
  auto errstr = lib->Symbol<ErrStrFn>("nvmlErrorString");
  auto drv = lib->Symbol<int (*)(char*, unsigned)>("nvmlSystemGetDriverVersion");
  auto cuda_drv = lib->Symbol<int (*)(int*)>("nvmlSystemGetCudaDriverVersion_v2");
  auto count = lib->Symbol<int (*)(unsigned*)>("nvmlDeviceGetCount_v2");
  auto handle = lib->Symbol<int (*)(unsigned, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2");
  auto name = lib->Symbol<int (*)(nvmlDevice_t, char*, unsigned)>("nvmlDeviceGetName");
  auto uuid = lib->Symbol<int (*)(nvmlDevice_t, char*, unsigned)>("nvmlDeviceGetUUID");
  auto mem = lib->Symbol<int (*)(nvmlDevice_t, nvmlMemory_t*)>("nvmlDeviceGetMemoryInfo");
  auto pci = lib->Symbol<int (*)(nvmlDevice_t, nvmlPciInfo_t*)>("nvmlDeviceGetPciInfo_v3");
  if (!init.ok() || !shutdown.ok() || !errstr.ok() || !drv.ok() || !count.ok() || !handle.ok() || !name.ok()) {
    info.error = "NVML at " + info.path + " lacks the expected entry points";
    return info;
  }
  if (int rc = (*init)(); rc != 0) {
    info.error = std::string("nvmlInit failed: ") + (*errstr)(rc);
    return info;
  }
  char buf[96] = {};
  if ((*drv)(buf, sizeof buf) == 0) info.driver_version = buf;
  if (cuda_drv.ok()) (*cuda_drv)(&info.cuda_driver_version);
  unsigned n = 0;
  (*count)(&n);
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t dev = nullptr;
    if ((*handle)(i, &dev) != 0) continue;
    GpuInfo g;
    g.index = i;
    if ((*name)(dev, buf, sizeof buf) == 0) g.name = buf;
    if (uuid.ok() && (*uuid)(dev, buf, sizeof buf) == 0) g.uuid = buf;
    nvmlMemory_t m{};
    if (mem.ok() && (*mem)(dev, &m) == 0) g.memory_total = m.total;
    nvmlPciInfo_t p{};
    if (pci.ok() && (*pci)(dev, &p) == 0) g.pci_bus_id = p.busId;
    info.gpus.push_back(g);
  }
  (*shutdown)();
  log->debug("NVML: driver {} with {} GPUs", info.driver_version, info.gpus.size());
  return info;
}

nlohmann::json ToJson(const CudaInfo& info) {
  return {{"runtime_found", info.runtime_found},
          {"runtime_path", info.runtime_path},
          {"runtime_version", FormatCudaVersion(info.runtime_version)},
          {"driver_version", FormatCudaVersion(info.driver_version)},
          {"driver_library_found", info.driver_library_found},
          {"device_count", info.device_count},
          {"pci_bus_ids", info.pci_bus_ids},
          {"device_error", info.device_error_text},
          {"error", info.error}};
}

nlohmann::json ToJson(const NvmlInfo& info) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : info.gpus) {
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"uuid", g.uuid},
                    {"pci_bus_id", g.pci_bus_id},
                    {"memory_total_bytes", g.memory_total}});
  }
  return {{"found", info.found},
          {"path", info.path},
          {"driver_version", info.driver_version},
          {"cuda_driver_version", FormatCudaVersion(info.cuda_driver_version)},
          {"gpus", gpus},
          {"error", info.error}};
}

}  // namespace dsd::probe
