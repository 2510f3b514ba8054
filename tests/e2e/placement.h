// Where the simulated nodes of a `dsdoctor run` e2e test live (docs/run.md "Nodes that share
// nothing"):
//   kLocal          `run --local N --slots S`: agents on 127.0.0.2… of this machine, one file system
//   kSharedNothing  netns_cluster.sh with ISOLATED=1: each node's agent in its own network, UTS and
//                   mount namespace (hostname node-<i>, /etc/hosts naming the nodes, private /tmp and
//                   /dev/shm), reached by `run --launcher attach` from the coordinator's namespace;
//                   the run dir (under /tmp) is each node's own, so everything the report and
//                   `analyze` need must reach the coordinator over the links.
// Tests parameterized over both expect the same findings, and the same files in the coordinator's
// run dir. kSharedNothing needs root (namespaces, mounts): it skips elsewhere, and fails under
// DSDOCTOR_REQUIRE_NETNS=1 (CI). Header-only; each test binary includes it once.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

#include "common/file.h"
#include "common/process.h"

namespace dsd::e2e {

enum class Placement { kLocal, kSharedNothing };

inline std::string PlacementName(const ::testing::TestParamInfo<Placement>& info) {
  return info.param == Placement::kLocal ? "Local" : "SharedNothing";
}
// How gtest (and so ctest's test list) prints the parameter.
inline void PrintTo(Placement p, std::ostream* os) { *os << (p == Placement::kLocal ? "Local" : "SharedNothing"); }

// Whether the placement can run here; a reason to skip when not.
inline std::string PlacementUnavailable(Placement p) {
  if (p == Placement::kLocal) return "";
  auto probe = RunCommand({"unshare", "-n", "-m", "-u", "sh", "-c", "ip link set lo up && hostname probe"}, {});
  if (::geteuid() != 0 || !probe.ok() || probe->exit_code != 0)
    return "isolated nodes need root, unshare (network, mount, UTS namespaces) and iproute2";
  return "";
}

#define REQUIRE_PLACEMENT(p)                                                 \
  if (std::string why = ::dsd::e2e::PlacementUnavailable(p); !why.empty()) { \
    if (std::getenv("DSDOCTOR_REQUIRE_NETNS")) FAIL() << why;                \
    GTEST_SKIP() << why;                                                     \
  }

// Folders a test made (run dirs, and the hostfile, output, report and checkpoints beside them): removed when the test
// ends without a failure, kept for a look when it failed. A full ctest run left ~200 of them in /tmp.
class RemovedWhenPassed : public ::testing::EmptyTestEventListener {
 public:
  static void Add(const std::string& path) { Get().paths_.push_back(path); }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result() && !info.result()->Failed())
      for (const std::string& path : paths_) {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
        for (const char* beside : {".hostfile", ".out", ".json", ".ckpt"})
          std::filesystem::remove_all(path + beside, ec);
      }
    paths_.clear();
  }

 private:
  static RemovedWhenPassed& Get() {
    // gtest owns its listeners; one per test binary, added at the first folder.
    static RemovedWhenPassed* self = [] {
      auto* l = new RemovedWhenPassed;
      ::testing::UnitTest::GetInstance()->listeners().Append(l);
      return l;
    }();
    return *self;
  }
  std::vector<std::string> paths_;
};

// A fresh run dir for a test: under /tmp, which every isolated node covers with its own tmpfs (so
// the nodes cannot share it, whatever TMPDIR says). Removed when the test passes.
inline std::string PlacedRunDir(const std::string& name, Placement p) {
  std::string dir = "/tmp/dsd-" + name + (p == Placement::kLocal ? "" : "-sn") + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  RemovedWhenPassed::Add(dir);
  return dir;
}

// Whether a run's output shows the coordinator copied the nodes' files (kSharedNothing must).
inline bool CopiedTheNodesFiles(const std::string& out) {
  return out.find("does not share the run dir") != std::string::npos &&
         out.find("its rank files are copied here") != std::string::npos;
}

// The command line of `dsdoctor run <flags> -- <command>` on `nodes` nodes of `slots` slots each,
// placed as asked, with its run dir `dir` (PlacedRunDir). For kSharedNothing the hostfile is written
// beside `dir` (dir + ".hostfile") and MASTER_ADDR is node-0's address; env gets what the cluster
// script needs; `coordinator_script`, when given, is the bash script run in the coordinator's
// namespace instead of `run` alone ($1 is dsdoctor, the rest run's arguments).
inline std::vector<std::string> PlacedRunArgv(Placement p, int nodes, int slots, const std::string& dir,
                                              const std::vector<std::string>& flags,
                                              const std::vector<std::string>& command,
                                              std::map<std::string, std::string>* env,
                                              const std::string& coordinator_script = "") {
  std::vector<std::string> argv;
  if (p == Placement::kLocal) {
    argv = {DSDOCTOR_BIN, "run", "--local", std::to_string(nodes), "--slots", std::to_string(slots)};
  } else {
    static std::atomic<int> cluster{0};
    std::string hostfile;
    for (int i = 0; i < nodes; ++i) hostfile += "node-" + std::to_string(i) + " slots=" + std::to_string(slots) + "\n";
    EXPECT_TRUE(WriteFileAtomic(dir + ".hostfile", hostfile).ok());
    (*env)["ISOLATED"] = "1";
    (*env)["DSD"] = DSDOCTOR_BIN;
    // The software the nodes run, wherever the checkout is (under /tmp too): the source tree (test
    // programs, .deps) and the build tree (dsdoctor, examples, the tracer).
    (*env)["KEEP"] = std::string(DSDOCTOR_SOURCE_DIR) + ":" +
                     std::filesystem::path(DSDOCTOR_BIN).parent_path().parent_path().string();
    // The agents' addresses and token exist once the cluster is up: the coordinator's namespace
    // gets them as $AGENTS and $TOKEN_FILE.
    argv = {
        "bash",
        NETNS_CLUSTER,
        "dsdsn" + std::to_string(::getpid()) + "x" + std::to_string(cluster++),
        std::to_string(nodes),
        "-1",
        "0",
        "--",
        "bash",
        "-c",
        !coordinator_script.empty()
            ? coordinator_script
            : "dsd=$1; shift; exec \"$dsd\" run --launcher attach --agents \"$AGENTS\" --token-file \"$TOKEN_FILE\" "
              "\"$@\"",
        "_",
        DSDOCTOR_BIN,
        "--hostfile",
        dir + ".hostfile",
        "--master_addr",
        "198.18.0.10"};
  }
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace dsd::e2e
