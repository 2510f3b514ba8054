// Gloo over TCP as a Communicator. Rendezvous goes through any gloo::rendezvous::Store; dsdoctor's
// agents pass one backed by the master node's agent (agent/agent_store.h). Gloo reports failures
// by throwing; they become Status here.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>

#include <memory>
#include <string>

#include "probe/collective.h"

namespace dsd::probe {

// A Gloo context connected to all other ranks (full mesh) over TCP from `bind_host`; shared with the
// training runtime's Gloo backend.
Result<std::shared_ptr<gloo::rendezvous::Context>> ConnectGlooContext(int rank, int size, gloo::rendezvous::Store& store,
                                                                      const std::string& bind_host, Duration timeout);

// Connects this rank to all others (full mesh) over TCP from `bind_host`.
Result<std::unique_ptr<Communicator>> CreateGlooCommunicator(int rank, int size, gloo::rendezvous::Store& store,
                                                             const std::string& bind_host, Duration timeout);

}  // namespace dsd::probe
