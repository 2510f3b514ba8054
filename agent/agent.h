// The per-node agent: serves the framed protocol (docs/agent-protocol.md) on one TCP address.
// Every connection is a TLS 1.3 link keyed by the job token (common/tls_link.h): a peer without
// the token never gets past the handshake, which runs with bounded work in Run()'s poll loop;
// the agent logs the refusal and stays up. docs/security.md has the threat model.
// Thread model: Run() accepts and authenticates on the calling thread and serves each
// authenticated link on its own detached thread; shared state (extra listeners, stop flag) is
// guarded by a mutex/atomics.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/run_protocol.h"
#include "common/kv_table.h"
#include "common/net.h"
#include "common/tls_link.h"
#include "probe/collective.h"
#include "probe/inventory.h"

namespace dsd::agent {

struct AgentOptions {
  std::string listen_addr = "127.0.0.1";
  int port = 0;  // 0: any free port, reported by the ready line
  std::string token;
  std::string name;                // node name in reports; default: hostname
  bool exit_on_stdin_eof = false;  // launched by a coordinator: its end of our stdin closing = it is gone
                                   // (the agent exits then, or after the ranks of a run it serves)
  Duration auth_timeout = std::chrono::seconds(5);
  bool mpi = false;  // started by mpirun with MPI initialised: serves backend "mpi" all-reduces
};

class Agent {
 public:
  // `inventory` is borrowed and must outlive the agent.
  Agent(AgentOptions options, probe::InventorySource* inventory);
  ~Agent();

  // Binds; prints nothing. After success, port() is the bound port.
  Status Bind();
  int port() const { return port_; }
  // Serves until Stop() or a shutdown request (or stdin EOF when so configured).
  Status Run();
  void Stop();

 private:
  void Serve(net::Link link, std::string peer);
  nlohmann::json Handle(const nlohmann::json& request, bool* close_after);
  nlohmann::json HandlePing(const nlohmann::json& request);
  nlohmann::json HandleListen(const nlohmann::json& request);
  nlohmann::json HandleKvSet(const nlohmann::json& request);
  nlohmann::json HandleKvGet(const nlohmann::json& request);
  nlohmann::json HandleAllReduce(const nlohmann::json& request);
  nlohmann::json HandleP2pSend(const nlohmann::json& request);
  nlohmann::json HandleNcclAllReduce(const nlohmann::json& request, const std::vector<size_t>& sizes,
                                     const probe::SweepOptions& sweep);
  // After a "run" request the connection is the job's stream until every rank exited (agent_run.cc).
  void ServeRun(net::Link& link, wire::FrameDecoder& decoder, const RunRequest& request);
  // After a "reattach" request the connection is lent to the run it names, until the run gives it
  // back (the link broke, or the run ended); an unknown run is an error reply (agent_run.cc).
  void ServeReattach(net::Link& link, wire::FrameDecoder& decoder, const ReattachRequest& request);
  // After a "sink" request the connection carries raw bytes until the peer shuts down its side.
  nlohmann::json Sink(net::Link& link, wire::FrameDecoder& decoder);

  AgentOptions options_;
  net::LinkKey key_;  // derived from options_.token
  probe::InventorySource* inventory_;
  net::Fd listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<int, std::shared_ptr<net::Fd>> extra_listeners_;  // port → listener (rendezvous ports)
  std::vector<std::thread> listener_threads_;                // their accept loops, joined by Run
  std::set<net::Link*> live_links_;                          // served now; shut down when Run ends
  std::atomic<int> active_connections_{0};
  // Runs being served (agent_run.cc); while one is, the coordinator's death does not end the agent
  // (docs/run.md "When the coordinator goes"): its ranks run on to their end.
  std::atomic<int> runs_active_{0};
  std::atomic<bool> coordinator_gone_{false};      // stdin closed: the coordinator's process is gone
  std::atomic<bool> coordinator_stopping_{false};  // it wrote "stop" first: an orderly end, ranks stop
  // A run being served, as a coordinator taking it over finds it: by run id. The serving thread of
  // the reattaching connection offers its link; the run takes it (and shuts down the one it had)
  // at its next tick, and gives it back when it breaks or the run ends.
  struct RunSlot {
    std::mutex mu;
    std::condition_variable cv;
    net::Link* offered = nullptr;  // a reattaching connection's link, until taken or refused
    wire::FrameDecoder* offered_decoder = nullptr;
    ReattachRequest offered_request;
    net::Link* lent = nullptr;  // the taken link the run uses now
    bool ended = false;         // the run is over: nothing more is taken
  };
  std::map<std::string, std::shared_ptr<RunSlot>> runs_;  // by run id; guarded by mu_
  // Key-value service for rendezvous (gloo stores of bandwidth probes), on the master's agent.
  KvTable kv_;
};

// The line an agent prints on stdout once it listens, for launchers to read:
// "DSDOCTOR_AGENT_READY name=<name> addr=<addr> port=<port> pid=<pid>"
std::string ReadyLine(const std::string& name, const std::string& addr, int port);

}  // namespace dsd::agent
