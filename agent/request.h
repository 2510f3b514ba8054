// The shapes of the requests an agent accepts (docs/agent-protocol.md), checked before any of them
// is acted on: each field's type and range, each string's and list's length. Requests come only
// over authenticated links, but a bug or a version skew in the coordinator must cost one
// bad_request reply, never the agent or the ranks it runs.
// Pure and total: any JSON value gets a Status, never an exception. Thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace dsd::agent {

// A request on a fresh link: inventory, listen, ping, kv_set, kv_get, allreduce, p2p_send, sink,
// run (checked by ReadRunRequest, agent/run_protocol.h), shutdown. An unknown type is
// kUnimplemented; a bad field is kInvalidArgument naming it.
Status ValidateRequest(const nlohmann::json& request);

}  // namespace dsd::agent
