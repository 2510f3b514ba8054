#include "collectors/python_tracer.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>

namespace dsd::collectors {

std::optional<PythonTracer> FindPythonTracer() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  auto root = exe.parent_path().parent_path() / "lib" / "dsdoctor";
  PythonTracer t{(root / "python").string(), (root / "libdsdoctor_pytrace.so").string()};
  if (::access((t.python_dir + "/sitecustomize.py").c_str(), R_OK) != 0 || ::access(t.library.c_str(), R_OK) != 0)
    return std::nullopt;
  return t;
}

void AddPythonTracer(const PythonTracer& tracer, std::map<std::string, std::string>* env) {
  std::string path;
  if (auto it = env->find("PYTHONPATH"); it != env->end())
    path = it->second;
  else if (const char* p = std::getenv("PYTHONPATH"))
    path = p;
  (*env)["PYTHONPATH"] = path.empty() ? tracer.python_dir : tracer.python_dir + ":" + path;
  (*env)["DSDOCTOR_TRACER_LIB"] = tracer.library;
}

namespace {

// lib/dsdoctor/<name> beside this binary's bin/, when readable.
std::optional<std::string> FindTracerLibrary(const char* name) {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  auto lib = (exe.parent_path().parent_path() / "lib" / "dsdoctor" / name).string();
  if (::access(lib.c_str(), R_OK) != 0) return std::nullopt;
  return lib;
}

}  // namespace

std::optional<std::string> FindNcclProfiler() { return FindTracerLibrary("libdsdoctor-nccl-profiler.so"); }

std::optional<std::string> FindPmpiTracer() { return FindTracerLibrary("libdsdoctor-pmpi.so"); }

void AddPmpiTracer(const std::string& lib, std::map<std::string, std::string>* env) {
  std::string& preload = (*env)["LD_PRELOAD"];
  if (preload.find(lib) == std::string::npos) preload = preload.empty() ? lib : lib + ":" + preload;
}

namespace {
// A variable as the rank will see it: env's (where "" means unset), else ours.
std::string RankValue(const std::map<std::string, std::string>& env, const char* name) {
  if (auto it = env.find(name); it != env.end()) return it->second;
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

void AddFlightRecorder(const RunDir& dir, std::map<std::string, std::string>* env) {
  if (!RankValue(*env, "DSDOCTOR_FR_DIR").empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir.FlightRecorderWatchdog(), ec);
  std::filesystem::create_directories(std::filesystem::path(dir.FlightRecorderPipePrefix()).parent_path(), ec);
  (*env)["DSDOCTOR_FR_DIR"] = dir.FlightRecorderDir();
}

void AddNcclProfiler(const std::string& plugin, std::map<std::string, std::string>* env) {
  auto value = [&](const char* name) { return RankValue(*env, name); };
  if (value("DSDOCTOR_NCCL_PROFILER") == "off") return;
  std::string user = value("NCCL_PROFILER_PLUGIN");
  if (user == plugin) return;
  std::string lower = user;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "none") return;  // the user turned profiler plugins off (NCCL reads it in any case)
  // The user's plugin keeps working: ours loads it and forwards its events. With none set, NCCL
  // would have loaded libnccl-profiler.so if there is one: it is chained too, if it exists ('?').
  (*env)["DSDOCTOR_NCCL_PROFILER_CHAIN"] = user.empty() ? "?libnccl-profiler.so" : user;
  (*env)["NCCL_PROFILER_PLUGIN"] = plugin;
}

}  // namespace dsd::collectors
