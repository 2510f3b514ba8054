#include "probe/report.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace dsd::probe {
namespace {

NodeInventory HealthyInventory() {
  NodeInventory inv;
  inv.system.hostname = "node-a";
  inv.system.kernel = "Linux 6.1.0";
  inv.system.machine = "x86_64";
  inv.system.cpus = 8;
  inv.system.memory_total = 64ull << 30;
  inv.system.memory_available = 60ull << 30;
  inv.system.interfaces = {{"lo", true, true, true, 65536, {{"inet", "127.0.0.1", 8}}},
                           {"eth0", true, true, false, 9000, {{"inet", "198.18.0.2", 24}}}};
  inv.system.shm_present = true;
  inv.system.shm_size = 8ull << 30;
  inv.system.shm_free = 8ull << 30;
  inv.system.memlock_soft = inv.system.memlock_hard = SystemInfo::kUnlimited;
  inv.nccl.found = true;
  inv.nccl.path = "/usr/lib/libnccl.so.2";
  inv.nccl.version = DecodeNcclVersion(22104);
  inv.nccl_bootstrap.ran = inv.nccl_bootstrap.ok = true;
  inv.nccl_bootstrap.result = 0;
  inv.nccl_bootstrap.interface = "eth0";
  inv.nccl_bootstrap.address = "198.18.0.2";
  return inv;
}

const CheckRow& Row(const std::vector<CheckRow>& rows, const std::string& name) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const CheckRow& r) { return r.name == name; });
  if (it == rows.end()) throw std::runtime_error("no row " + name);
  return *it;
}

TEST(ReportTest, HealthyNodeHasNoFailures) {
  auto rows = EvaluateNode(HealthyInventory());
  EXPECT_EQ(ReportExitCode(rows), 0);
  EXPECT_EQ(Row(rows, "NCCL").summary, "2.21.4 at /usr/lib/libnccl.so.2");
  EXPECT_EQ(Row(rows, "NCCL bootstrap").status, CheckStatus::kOk);
  EXPECT_EQ(Row(rows, "/dev/shm").status, CheckStatus::kOk);
  EXPECT_EQ(Row(rows, "memlock").status, CheckStatus::kOk);
}

TEST(ReportTest, SmallShmWarnsWithRemedy) {
  auto inv = HealthyInventory();
  inv.system.shm_size = 64ull << 20;
  auto rows = EvaluateNode(inv);
  const auto& r = Row(rows, "/dev/shm");
  EXPECT_EQ(r.status, CheckStatus::kWarn);
  EXPECT_NE(r.summary.find("64 MiB"), std::string::npos);
  EXPECT_NE(r.remedy.find("--shm-size"), std::string::npos);
}

TEST(ReportTest, MemlockMattersOnlyWithInfiniband) {
  auto inv = HealthyInventory();
  inv.system.memlock_soft = 8 << 20;
  EXPECT_EQ(Row(EvaluateNode(inv), "memlock").status, CheckStatus::kInfo);
  inv.system.infiniband_devices = {"mlx5_0"};
  EXPECT_EQ(Row(EvaluateNode(inv), "memlock").status, CheckStatus::kWarn);
}

TEST(ReportTest, BootstrapFailureUnderBadIfnameFailsAndNamesRealInterfaces) {
  auto inv = HealthyInventory();
  inv.env["NCCL_SOCKET_IFNAME"] = "nosuch0";
  inv.nccl_bootstrap = {};
  inv.nccl_bootstrap.ran = true;
  inv.nccl_bootstrap.result = 5;
  inv.nccl_bootstrap.result_text = "invalid usage";
  inv.nccl_bootstrap.warnings = {"Bootstrap : no socket interface found"};
  auto rows = EvaluateNode(inv);
  const auto& r = Row(rows, "NCCL bootstrap");
  EXPECT_EQ(r.status, CheckStatus::kFail);
  EXPECT_NE(r.summary.find("NCCL_SOCKET_IFNAME=nosuch0"), std::string::npos);
  EXPECT_NE(r.remedy.find("up here: eth0"), std::string::npos);
  EXPECT_EQ(ReportExitCode(rows), 1);
}

TEST(ReportTest, LoopbackOrDockerBootstrapWarns) {
  auto inv = HealthyInventory();
  inv.nccl_bootstrap.interface = "lo";
  EXPECT_EQ(Row(EvaluateNode(inv), "NCCL bootstrap").status, CheckStatus::kWarn);
  inv.nccl_bootstrap.interface = "docker0";
  EXPECT_EQ(Row(EvaluateNode(inv), "NCCL bootstrap").status, CheckStatus::kWarn);
}

TEST(ReportTest, MissingNcclWarnsAndSkipsBootstrap) {
  auto inv = HealthyInventory();
  inv.nccl = {};
  inv.nccl.error = "NCCL not found";
  inv.nccl_bootstrap = {};
  auto rows = EvaluateNode(inv);
  EXPECT_EQ(Row(rows, "NCCL").status, CheckStatus::kWarn);
  EXPECT_EQ(Row(rows, "NCCL bootstrap").status, CheckStatus::kInfo);
  EXPECT_EQ(ReportExitCode(rows), 0);
}

TEST(ReportTest, NoDriverIsSaidPlainly) {
  auto inv = HealthyInventory();
  inv.cuda.runtime_found = true;
  inv.cuda.runtime_version = 13000;
  inv.cuda.driver_version = 0;
  inv.cuda.device_error = 35;
  inv.cuda.device_error_text = "CUDA driver version is insufficient for CUDA runtime version";
  EXPECT_NE(Row(EvaluateNode(inv), "CUDA").summary.find("runtime 13.0, no NVIDIA driver"), std::string::npos);
  inv.cuda.driver_version = 12040;  // a driver older than the runtime
  EXPECT_EQ(Row(EvaluateNode(inv), "CUDA").status, CheckStatus::kWarn);
}

TEST(ReportTest, DeepSpeedEnvProblemsNameFileAndLine) {
  auto inv = HealthyInventory();
  inv.deepspeed_env.push_back(ParseDsEnv("/home/u/.deepspeed_env", "NCCL_IB_DISABLE=1\n\n"));
  auto rows = EvaluateNode(inv);
  const auto& r = Row(rows, ".deepspeed_env");
  EXPECT_EQ(r.status, CheckStatus::kFail);
  ASSERT_EQ(r.details.size(), 1u);
  EXPECT_EQ(r.details[0].rfind("/home/u/.deepspeed_env:2: blank line", 0), 0u) << r.details[0];
}

TEST(ReportTest, TextIsAlignedWithMarks) {
  std::vector<CheckRow> rows = {{"a", CheckStatus::kOk, "fine", {}, ""},
                                {"longer name", CheckStatus::kFail, "broken", {"detail"}, "fix it"}};
  std::string text = RenderChecksText("title", rows, {});
  EXPECT_NE(text.find("[ ok ]  a            fine\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[FAIL]  longer name  broken\n"), std::string::npos) << text;
  EXPECT_NE(text.find("                     remedy: fix it\n"), std::string::npos) << text;
  EXPECT_NE(text.find("1 failed, 0 warnings, 2 checks"), std::string::npos);
  EXPECT_EQ(text.find("\033["), std::string::npos);  // no colour unless asked
}

TEST(ReportTest, JsonDocumentFollowsTheSchema) {
  auto inv = HealthyInventory();
  auto rows = EvaluateNode(inv);
  auto j = ReportJson(inv, rows);
  EXPECT_EQ(j["schema"], "dsdoctor.report/1");
  EXPECT_EQ(j["inventory"]["nccl"]["version"], "2.21.4");
  EXPECT_EQ(j["inventory"]["nccl_bootstrap"]["interface"], "eth0");
  EXPECT_EQ(j["inventory"]["system"]["interfaces"][1]["mtu"], 9000);
  EXPECT_EQ(j["checks"].size(), rows.size());
  EXPECT_EQ(j["summary"]["fail"], 0);
  for (const auto& c : j["checks"]) {
    EXPECT_TRUE(c["status"] == "ok" || c["status"] == "info" || c["status"] == "warn" || c["status"] == "fail");
  }
}

TEST(InventoryTest, JobEnvReachesTheBootstrapProbeAndTheEnvSection) {
  FakeInventorySource fake;
  fake.canned = HealthyInventory();
  fake.process_env = {{"NCCL_DEBUG", "WARN"}, {"HOME", "/root"}, {"NCCL_IB_HCA", "mlx5"}};
  auto inv = CollectInventory(fake, {{"NCCL_SOCKET_IFNAME", "eth0"}, {"NCCL_IB_HCA", ""}});
  ASSERT_EQ(fake.bootstrap_calls.size(), 1u);
  EXPECT_EQ(fake.bootstrap_calls[0].at("NCCL_SOCKET_IFNAME"), "eth0");
  EXPECT_EQ(inv.env.at("NCCL_SOCKET_IFNAME"), "eth0");
  EXPECT_EQ(inv.env.at("NCCL_DEBUG"), "WARN");
  EXPECT_EQ(inv.env.count("HOME"), 0u);        // not job-relevant
  EXPECT_EQ(inv.env.count("NCCL_IB_HCA"), 0u);  // unset by the job env
}

}  // namespace
}  // namespace dsd::probe
