// agents.json (RunDir::Agents): what a new coordinator needs to take over a run whose coordinator
// is gone (`dsdoctor attach RUN_DIR`, docs/run.md "Taking a run over"): the run's id, its command,
// and where each node's agent serves it with which ranks. `run` writes it once the agents are up,
// beside the agents' token (agents.token, 0600), which it removes when it ends. Its reader checks
// every field and names the file and the field in its errors.
// Pure values and functions; thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/net.h"
#include "common/run_files.h"
#include "common/status.h"
#include "coordinator/run_spec.h"

namespace dsd::coordinator {

struct TakeoverNode {
  std::string name;                        // the agent's node name
  std::string host;                        // as the plan had it
  net::Endpoint endpoint;                  // where its agent listens
  std::vector<std::pair<int, int>> ranks;  // (rank, local_rank)
};

struct Takeover {
  std::string run_id;
  std::vector<std::string> command;
  bool python = false;
  bool mpi = false;  // mpirun started the ranks (RunSpec::mpi): its teardown's kills are no culprits
  std::string launcher;
  bool simulated = false;
  double timeout_s = 60;
  double hang_after_s = 5;
  int sample_ms = 200;
  int stop_escalation_ms = 3000;
  std::vector<TakeoverNode> nodes;
  std::string coordinator_host;  // where the coordinator that wrote it ran, and its pid: `attach`
  int coordinator_pid = 0;       // refuses to take over from a coordinator still alive
};

// The record of a run whose agents (handles[i] is spec node i) are up.
Takeover TakeoverOf(const RunSpec& spec, const std::vector<std::string>& agent_names,
                    const std::vector<net::Endpoint>& endpoints);
nlohmann::json TakeoverJson(const Takeover& t);
// Parses agents.json's text; `path` names it in errors (kInvalidArgument).
Result<Takeover> ParseTakeover(const std::string& text, const std::string& path);
// Reads dir's agents.json (kNotFound when the run never had agents: `run --direct`, or one from
// before this file existed).
Result<Takeover> ReadTakeover(const RunDir& dir);

// The spec a coordinator that takes the run over works from: its nodes, ranks and run dir as the
// first coordinator had them.
RunSpec SpecOfTakeover(const Takeover& t, const RunDir& dir);

}  // namespace dsd::coordinator
