// The ranks of an MPI run (RunSpec::mpi): one mpirun, started by the coordinator once every node's
// agent listens for its ranks, whose command is `dsdoctor rank-exec` (collectors/rank_exec.h), so
// that each rank is a member of mpirun's world and is handed to its node's agent. `--map-by slot`
// over `--host h1:s1,h2:s2,…` puts rank r where the plan put it (ranks are numbered node after
// node); simulated nodes share this machine, `--host localhost:W`. mpirun's own output goes to the
// run dir's launcher.log beside the agents' launcher's, where the log catalogue reads it.
//
// MpiRankSource wraps the agents' source: the same ranks, plus the mpirun, whose life tells when
// ranks that have not started never will (StartsPending). Owned by the coordinator's thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "coordinator/launcher.h"
#include "coordinator/rank_source.h"
#include "coordinator/run_spec.h"

namespace dsd::coordinator {

struct MpiRanksOptions {
  std::string mpirun = "mpirun";
  std::string dsdoctor_binary;          // on every node (the agents' own)
  std::vector<std::string> extra_args;  // --mpirun-opts: the user's (--mca btl …, -x …)
  std::string output_file;              // mpirun's stdout and stderr, appended (launcher.log)
  // After mpirun exited, how long a rank that has not started is still waited for: its agent's
  // sample that says it started may be on its way.
  Duration grace = std::chrono::seconds(2);
};

// What `run` gives it: the nodes' dsdoctor (this binary when simulated), the user's --mpirun-opts,
// the run dir's launcher.log.
MpiRanksOptions MpiRanksOptionsFor(const RunSpec& spec, const LauncherChoice& choice);

// mpirun's command line for the spec's ranks (pure).
std::vector<std::string> MpiRanksCommand(const RunSpec& spec, const MpiRanksOptions& options);

class MpiRankSource final : public RankSource {
 public:
  explicit MpiRankSource(std::unique_ptr<RankSource> agents) : agents_(std::move(agents)) {}
  ~MpiRankSource() override;  // ends mpirun if it still runs 5 s on (SIGTERM, then SIGKILL)

  // Starts mpirun. Errors: it cannot be started (not found: the message says what to install).
  Status Start(const RunSpec& spec, const MpiRanksOptions& options);

  void Tick(int64_t now_ns, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) override;
  // The agents signal the ranks they hold; a SIGKILL (a stop's escalation) sends mpirun SIGTERM as
  // well, so that a rank it has not handed over yet does not run on unwatched.
  void Signal(int sig) override;
  std::map<int, std::string> Stacks(const std::vector<int>& ranks, int flight_recorder_incident = 0) override {
    return agents_->Stacks(ranks, flight_recorder_incident);
  }
  std::vector<AgentHealth> Health() const override { return agents_->Health(); }
  bool CaughtUp() const override { return agents_->CaughtUp(); }
  std::vector<diagnosis::LogDirStatus> LogDirs() const override { return agents_->LogDirs(); }
  bool StartsPending() const override;

 private:
  void Stop(Duration wait_first);
  std::unique_ptr<RankSource> agents_;
  std::optional<Subprocess> mpirun_;
  Duration grace_{};
  std::optional<std::chrono::steady_clock::time_point> exited_at_;
  bool terminated_ = false;  // a stop's escalation sent it SIGTERM
};

}  // namespace dsd::coordinator
