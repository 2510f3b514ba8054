// Where `run` gets its ranks' states: the agents of the nodes (AgentSource, the default) or
// children of this process (DirectSource, `run --direct`: the same collectors::NodeRanks an agent
// serves, called in-process). The JobCoordinator only sees the RankSource interface, so its tests
// drive it with a fake.
// Thread-safety: a RankSource is used from one thread (the coordinator's); AgentSource has
// reader threads of its own and guards what they share.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/client.h"
#include "agent/run_protocol.h"
#include "collectors/node_ranks.h"
#include "common/clock.h"
#include "coordinator/plan.h"
#include "coordinator/run_dir_mirror.h"
#include "coordinator/run_spec.h"
#include "diagnosis/sample_delta.h"
#include "diagnosis/state.h"

namespace dsd::coordinator {

// How one node's agent is doing, as the coordinator sees it (docs/run.md "Agent liveness").
struct AgentHealth {
  std::string node;
  std::vector<int> ranks;
  bool connected = true;  // false: the connection ended before the agent said "done"
  bool done = false;      // every rank of the node exited and the agent said so
  bool lost = false;      // disconnected, or silent for longer than the source allows
  bool gone = false;      // its address refuses connections: the agent, and the ranks that die with it, are gone
  double silent_s = 0;    // time since its last frame, counted while the coordinator was awake
  std::string why;        // how the connection ended ("" while connected)
};

class RankSource {
 public:
  virtual ~RankSource() = default;
  // Copies the newest state of every rank into `ranks` (keeping the coordinator's own fields:
  // stack) and appends each rank's new output (raw bytes) to logs[rank].
  virtual void Tick(int64_t now_ns, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) = 0;
  virtual void Signal(int sig) = 0;
  // rank → stack signature, for the given ranks (one per class); ranks of lost agents are skipped.
  // A non-zero `flight_recorder_incident` first makes every torch rank of every node dump its
  // Flight Recorder for that incident (into the run dir; mirrored nodes send theirs).
  virtual std::map<int, std::string> Stacks(const std::vector<int>& ranks, int flight_recorder_incident = 0) = 0;
  // One entry per agent; empty when the ranks are our own children.
  virtual std::vector<AgentHealth> Health() const { return {}; }
  // False while the coordinator is catching up after it was stopped or slow: some agent's newest
  // sample came from the backlog rather than live, so the states may be stale and must not be
  // diagnosed (docs/run.md "Agent liveness").
  virtual bool CaughtUp() const { return true; }
  // The newest report of each node's log dir file system (docs/run.md "A full disk").
  virtual std::vector<diagnosis::LogDirStatus> LogDirs() const { return {}; }
  // True while ranks that have not started may still start (mpirun is starting an MPI run's
  // ranks): until then the job is not over for lack of running ranks.
  virtual bool StartsPending() const { return false; }
};

// Copies a sampled state over the coordinator's, keeping the stack the coordinator captured.
void Adopt(diagnosis::RankState& into, const diagnosis::RankState& from);

// The ranks as children of this process, on this machine (`run --direct`).
class DirectSource final : public RankSource {
 public:
  // `clock` is borrowed and must outlive the source.
  explicit DirectSource(Clock* clock) : clock_(clock) {}
  // Starts every rank of the spec; on an error none runs.
  Status Start(const RunSpec& spec);
  void Tick(int64_t now_ns, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) override;
  void Signal(int sig) override;
  std::map<int, std::string> Stacks(const std::vector<int>& want, int flight_recorder_incident = 0) override;
  std::vector<diagnosis::LogDirStatus> LogDirs() const override;

 private:
  Clock* clock_;
  std::optional<collectors::NodeRanks> ranks_;
  std::optional<diagnosis::LogDirStatus> log_dir_;  // its newest report
};

struct AgentSourceOptions {
  Duration sample_period = std::chrono::milliseconds(200);  // asked of every agent
  int lost_after_samples = 5;  // an agent silent this many sample periods (at least 1 s) is lost
  Duration stack_timeout = std::chrono::seconds(30);
  std::string token;  // the agents' token: a connection that broke is made again ("reattach")
  // A connected agent silent this long (and at least twice the silence that makes it lost) has its
  // link closed and made again: a half-open connection (a partition the kernel has not noticed,
  // which it would only after ~15 min of retransmissions) is never waited on for ever.
  Duration relink_after = std::chrono::seconds(5);
};

// One connection per agent, each read by its own thread; the coordinator's thread only sends.
// Every agent sends a sample each period whether or not anything changed: the heartbeat.
// When an agent's connection breaks, its reader connects again, once a second, and takes the run
// over with a "reattach" (docs/agent-protocol.md): a partition that heals loses nothing but the
// time it lasted. A refused connection means the agent is gone with its ranks (AgentHealth::gone).
class AgentSource final : public RankSource {
 public:
  // `clock` is borrowed and must outlive the source.
  AgentSource(AgentSourceOptions options, Clock* clock) : options_(options), clock_(clock) {}
  ~AgentSource() override;
  // Sends each agent (clients[i] is node i of the spec) the run request for its ranks and waits
  // for its "started". Errors: an agent that refused or could not start its ranks (named).
  Status Start(std::vector<agent::AgentClient> clients, const RunSpec& spec);
  // Takes over a run the agents serve already (`dsdoctor attach`): a "reattach" instead of a run
  // request, the node's rank files are appended to, never restarted, and the tail of each rank's
  // log already in the run dir is read first, so the diagnosis sees what was printed before.
  Status Reattach(std::vector<agent::AgentClient> clients, const RunSpec& spec);
  void Tick(int64_t now_ns, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) override;
  void Signal(int sig) override;
  std::map<int, std::string> Stacks(const std::vector<int>& want, int flight_recorder_incident = 0) override;
  std::vector<AgentHealth> Health() const override;
  bool CaughtUp() const override;
  std::vector<diagnosis::LogDirStatus> LogDirs() const override;
  // How the agents' sample frames and their rank entries were read: in place (the usual way, from
  // agents of this version) or through a JSON tree (other shapes). Logged at debug level at the end.
  struct SampleReads {
    uint64_t frames_in_place = 0, frames_parsed = 0, entries_in_place = 0, entries_parsed = 0;
  };
  SampleReads sample_reads() const;

 private:
  struct Agent {
    explicit Agent(agent::AgentClient c)
        : client(std::make_shared<agent::AgentClient>(std::move(c))), name(client->agent_name()) {}
    // Replaced when the reader connects again; senders take a copy of the pointer under mu_.
    std::shared_ptr<agent::AgentClient> client;
    const std::string name;
    std::vector<int> ranks;
    std::thread reader;
    // Guarded by mu_:
    bool gone = false;        // its address refused a new connection
    bool taken_over = false;  // another coordinator took the run over: never connect again
    MonoTime last_frame{};    // when its newest frame arrived
    MonoTime last_live{};     // when a sample arrived with nothing queued behind it
    bool connected = true;
    bool done = false;
    std::string why;
    std::optional<diagnosis::LogDirStatus> log_dir;  // its newest report
    bool mirrored = false;                           // its run dir is not ours: its files reach us over the link
    bool stacks_answered = false;
    // Capturing stacks: the agent sends only heartbeats between ranks (py-spy takes a while per rank).
    bool stacks_pending = false;
    // Its ranks whose deltas we refused: the next Tick asks the agent to restate them in full.
    std::vector<int> resync;
  };
  Status Begin(std::vector<agent::AgentClient> clients, const RunSpec& spec, bool reattach);
  // Sends node `index`'s run request and reads its "started"; adds its ranks to *mirrored_ranks
  // when its files are to be copied here.
  Status StartRun(Agent& a, const RunSpec& spec, size_t index, size_t* mirrored_ranks);
  // Takes a's run over (SendReattach), after reading the tail of its ranks' logs on disk.
  Status ResumeRun(Agent& a, const RunSpec& spec, size_t* mirrored_ranks);
  void Read(Agent& a);
  // After a's connection broke: connects again until it takes the run over (true) or the source
  // closes or the agent is gone (false).
  bool Relink(Agent& a, std::optional<agent::AgentClient>* client);
  // Sends the reattach request on `client` and reads its "started"; mirrors the node's files.
  Status SendReattach(Agent& a, agent::AgentClient& client);
  // The bytes of each of a's ranks' output we have (seen_).
  std::map<int, uint64_t> LogBytes(const std::vector<int>& ranks) const;
  void TickLocked(std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs);  // mu_ held
  // The frames' contents; the rank output they carried for the mirror goes to *mirror_out.
  void Handle(Agent& a, const agent::AgentRunMessage& msg, bool live,
              std::vector<std::pair<int, std::string>>* mirror_out);  // mu_ held
  void HandleSample(Agent& a, const agent::SampleFrameText& frame, bool live,
                    std::vector<std::pair<int, std::string>>* mirror_out);  // mu_ held
  bool Lost(const Agent& a, MonoTime now) const;                            // mu_ held
  Duration SilenceLimit() const;                                            // lost_after_samples periods, at least 1 s

  AgentSourceOptions options_;
  Clock* clock_;
  std::optional<RunDirMirror> mirror_;  // the coordinator's copy of the files of nodes that do not share its run dir
  std::optional<diagnosis::LogDirStatus> mirror_status_;  // its newest report (guarded by mu_)
  std::vector<std::unique_ptr<Agent>> agents_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // By rank: the agents' samples are deltas; each reader holds the rank's newest state.
  std::map<int, diagnosis::SampleDeltaReader> deltas_;
  std::map<int, int64_t> sampled_at_;  // by rank: now_ns of the frame its newest entry came in
  std::set<int> delta_refused_;        // ranks whose last entry did not apply
  std::map<int, std::string> pending_log_;
  // By rank: the bytes of its output received (from its log's start): what a reattach asks the
  // agent to continue from.
  std::map<int, uint64_t> seen_;
  SampleReads reads_;
  std::map<int, std::string> stacks_;
  MonoTime last_tick_{};   // the coordinator's previous Tick
  MonoTime resumed_{};     // when the coordinator last came back from a stall
  int64_t stacks_id_ = 0;  // the newest stacks request; replies to older ones are dropped
  RunDir run_dir_;
  std::string run_id_;
  bool closing_ = false;  // the destructor runs: readers stop connecting again (guarded by mu_)
};

}  // namespace dsd::coordinator
