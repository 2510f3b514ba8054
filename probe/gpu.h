// CUDA runtime/driver and NVML, loaded with dlopen. Without a GPU these report what is missing
// ("no NVIDIA driver") instead of failing. Stateless free functions; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "probe/dynlib.h"

namespace dsd::probe {

struct CudaInfo {
  bool runtime_found = false;
  std::string runtime_path;
  int runtime_version = 0;            // 13000 = 13.0
  int driver_version = 0;             // 0 = no driver (as cudaDriverGetVersion says)
  bool driver_library_found = false;  // libcuda.so.1
  int device_count = 0;
  // The PCI bus id of each device CUDA shows this process ("0000:3b:00.0", lowercase), in CUDA's
  // order, with CUDA_VISIBLE_DEVICES applied: device d of a rank is the GPU at pci_bus_ids[d].
  std::vector<std::string> pci_bus_ids;
  int device_error = 0;  // cudaGetDeviceCount's cudaError_t
  std::string device_error_text;
  std::string error;  // why the runtime could not be used
  bool no_driver() const { return driver_version == 0; }
};

struct GpuInfo {
  unsigned index = 0;
  std::string name, uuid, pci_bus_id;
  unsigned long long memory_total = 0;
};

struct NvmlInfo {
  bool found = false;
  std::string path;
  std::string driver_version;  // "550.54.15"
  int cuda_driver_version = 0;
  std::vector<GpuInfo> gpus;
  std::string error;
};

// "13.0" from 13000, "12.4" from 12040; "none" for 0.
std::string FormatCudaVersion(int v);

LibrarySearch CudaRuntimeSearch();
CudaInfo InspectCuda(const LibrarySearch& search = CudaRuntimeSearch());
NvmlInfo InspectNvml();

nlohmann::json ToJson(const CudaInfo& info);
nlohmann::json ToJson(const NvmlInfo& info);

}  // namespace dsd::probe
