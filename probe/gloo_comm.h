// Gloo over TCP as a Communicator. Rendezvous goes through any gloo::rendezvous::Store; dsdoctor's
// agents pass one backed by the master node's agent (agent/agent_store.h). Gloo reports failures
// by throwing; they become Status here.
//
// The probe runs Gloo's pairs in synchronous mode: the calling thread writes and reads the sockets
// itself. In Gloo's default (asynchronous) mode every message is handed to the device's event-loop
// thread and back, and below ~1 MiB an all-reduce then measures those wake-ups instead of the link
// (docs/performance.md, "all-reduce probe"). Synchronous pairs only serve bound buffers, so every
// operation goes through an algorithm object built once per size: recursive doubling up to
// kGlooRecursiveDoublingMaxBytes (one exchange per step, the latency-optimal choice), recursive
// halving then doubling above (bandwidth-optimal); both ours, on Gloo's pairs and bound buffers.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>

#include <memory>
#include <string>
#include <vector>

#include "probe/collective.h"

namespace dsd::probe {

inline constexpr size_t kGlooRecursiveDoublingMaxBytes = 64 << 10;

struct GlooProbeOptions {
  // Spin on non-blocking reads instead of sleeping in read(2): the lowest latency when every rank
  // has a core to itself, far worse when ranks share cores (each spinner holds a core its peer needs).
  bool busy_poll = false;
};

// A Gloo context connected to all other ranks (full mesh) over TCP from `bind_host`; shared with the
// training runtime's Gloo backend (which stays in asynchronous mode).
Result<std::shared_ptr<gloo::rendezvous::Context>> ConnectGlooContext(int rank, int size,
                                                                      gloo::rendezvous::Store& store,
                                                                      const std::string& bind_host, Duration timeout);

// Connects this rank to all others (full mesh) over TCP from `bind_host` and switches every pair to
// synchronous mode. Not thread-safe: one thread drives the communicator.
Result<std::unique_ptr<Communicator>> CreateGlooCommunicator(int rank, int size, gloo::rendezvous::Store& store,
                                                             const std::string& bind_host, Duration timeout,
                                                             const GlooProbeOptions& options = {});

// Whether ranks sharing this host should busy-poll: only when each can have a core of its own.
bool GlooBusyPollFits(int ranks_on_host, int host_cpus);

// Where each rank runs: ranks with the same (non-empty) hostname share its `cpus` cores; 0 cpus or
// no hostname (not known) never busy-polls.
struct RankHost {
  std::string hostname;
  int cpus = 0;
};
// GlooBusyPollFits for every rank, counting the ranks on each host.
std::vector<bool> GlooBusyPollPerRank(const std::vector<RankHost>& ranks);

}  // namespace dsd::probe
