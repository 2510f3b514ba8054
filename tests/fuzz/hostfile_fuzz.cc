// libFuzzer target: the hostfile grammar, DeepSpeed's resource filters and the plan built on them.
// Input: HOSTFILE \0 INCLUDE-OR-EXCLUDE-SPEC \0 FLAGS, where FLAGS' first bytes pick include vs
// exclude and the --num_nodes / --num_gpus values. Any input must give a plan or a Status, never a
// crash, and a plan must render.
#include <cstddef>
#include <cstdint>
#include <string>

#include "coordinator/hostfile.h"
#include "coordinator/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  size_t a = in.find('\0');
  std::string hostfile = in.substr(0, a);
  std::string spec, flags;
  if (a != std::string::npos) {
    size_t b = in.find('\0', a + 1);
    spec = in.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    if (b != std::string::npos) flags = in.substr(b + 1);
  }
  auto hf = dsd::coordinator::ParseHostfile("fuzz", hostfile);
  if (!hf.ok()) return 0;
  dsd::coordinator::PlanOptions o;
  unsigned char f0 = flags.size() > 0 ? flags[0] : 0;
  if (f0 & 1) o.include = spec;
  if (f0 & 2) o.exclude = spec;
  if (flags.size() > 1) o.num_nodes = static_cast<signed char>(flags[1]);
  if (flags.size() > 2) o.num_gpus = static_cast<signed char>(flags[2]) * ((f0 & 4) ? 64 : 1);
  auto plan = dsd::coordinator::PlanNodes(*hf, o);
  if (!plan.ok()) return 0;
  dsd::coordinator::JobNodes nodes{"fuzz", false, plan->nodes, plan->notes};
  auto ranks = dsd::coordinator::PlanRanks(nodes, {}, "master", 29500);
  (void)dsd::coordinator::PlanJson(nodes, ranks, "ssh").dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  (void)dsd::coordinator::PlanText(nodes, ranks, "ssh");
  return 0;
}
