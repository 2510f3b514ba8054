// Test helpers (header-only, tests only): run N ranks of a real Gloo job as threads of the test
// process, each with its own World from InitDistributed over a loopback TCP store.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <latch>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/net.h"
#include "runtime/distributed.h"

namespace dsd::runtime::testing {

// A port free now, outside the range outgoing connections draw from (net::PickUnusedPort).
inline int FreePort() { return net::PickUnusedPort(); }

inline std::map<std::string, std::string> RankEnvMap(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)}, {"WORLD_SIZE", std::to_string(world)}, {"LOCAL_RANK", std::to_string(rank)},
          {"MASTER_ADDR", "127.0.0.1"},   {"MASTER_PORT", std::to_string(port)}, {"DSDOCTOR_RENDEZVOUS_TIMEOUT", "20"}};
}

// Runs body(world) on `n` threads, one rank each; fails the test if a rank cannot initialise.
inline void RunRanks(int n, const std::function<void(World&)>& body,
                     const std::function<void(int, std::map<std::string, std::string>&)>& edit_env = {}) {
  int port = FreePort();
  std::vector<std::thread> threads;
  // A rank whose body ends at once (Initialize rejecting its config) would close its connections
  // while another rank still connects the full mesh: every rank waits until all are initialised.
  std::latch initialised(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      DistributedOptions o;
      o.env = RankEnvMap(r, n, port);
      if (edit_env) edit_env(r, o.env);
      o.comm_timeout = std::chrono::seconds(30);
      auto world = InitDistributed(o);
      initialised.arrive_and_wait();
      ASSERT_TRUE(world.ok()) << "rank " << r << ": " << world.status().ToString();
      body(**world);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace dsd::runtime::testing
