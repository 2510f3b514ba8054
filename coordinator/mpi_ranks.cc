#include "coordinator/mpi_ranks.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include "collectors/rank_exec.h"
#include "common/file.h"
#include "common/log.h"
#include "common/process.h"
#include "common/strings.h"

namespace dsd::coordinator {

MpiRanksOptions MpiRanksOptionsFor(const RunSpec& spec, const LauncherChoice& choice) {
  MpiRanksOptions o;
  o.dsdoctor_binary = choice.remote_dsdoctor.empty() || spec.simulated ? choice.self_binary : choice.remote_dsdoctor;
  o.extra_args = choice.mpirun_args;
  o.output_file = spec.run_dir.LauncherLog();
  return o;
}

std::vector<std::string> MpiRanksCommand(const RunSpec& spec, const MpiRanksOptions& o) {
  std::vector<std::string> cmd = {o.mpirun};
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  const int world = spec.nodes.world_size();
  cmd.insert(cmd.end(), {"-np", std::to_string(world), "--bind-to", "none", "--map-by", "slot"});
  std::string hosts;
  std::vector<collectors::RankExecNode> nodes;
  for (size_t i = 0; i < spec.nodes.nodes.size(); ++i) {
    const int slots = static_cast<int>(spec.NodeRanks(i).size());
    if (slots == 0) continue;
    nodes.push_back({slots, collectors::RankExecSocketName(spec.run_id, i)});
    if (!spec.simulated) hosts += (hosts.empty() ? "" : ",") + spec.nodes.nodes[i].host + ":" + std::to_string(slots);
  }
  if (spec.simulated) hosts = "localhost:" + std::to_string(world);
  cmd.insert(cmd.end(), {"--host", hosts});
  // Where every rank starts, as the agents' ranks do (on every node: mpirun's default is its own).
  if (!spec.cwd.empty()) cmd.insert(cmd.end(), {"--wdir", spec.cwd});
  cmd.insert(cmd.end(), o.extra_args.begin(), o.extra_args.end());
  cmd.insert(cmd.end(), {o.dsdoctor_binary, "rank-exec", "--nodes", collectors::FormatRankExecNodes(nodes), "--"});
  cmd.insert(cmd.end(), spec.command.begin(), spec.command.end());
  return cmd;
}

Status MpiRankSource::Start(const RunSpec& spec, const MpiRanksOptions& options) {
  grace_ = options.grace;
  // The command line is Open MPI's (--map-by slot, --host h:slots, --allow-run-as-root): another
  // MPI's mpirun (MPICH's Hydra, Intel MPI) would refuse it or place ranks elsewhere.
  CommandOptions version_options;
  version_options.timeout = std::chrono::seconds(20);
  auto version = RunCommand({options.mpirun, "--version"}, version_options);
  if (!version.ok() || version->exit_code == 127)
    return Unavailable(options.mpirun +
                       " not found: an MPI program's ranks are started by Open MPI's mpirun "
                       "(install openmpi-bin), or run it with --no-mpi (each rank an MPI singleton)");
  if ((version->out + version->err).find("Open MPI") == std::string::npos) {
    const std::string said = version->out.substr(0, version->out.find('\n'));
    return Unavailable("`" + options.mpirun + " --version` says '" + said +
                       "': dsdoctor starts an MPI program's ranks with Open MPI's mpirun only; put it first on "
                       "PATH, or run with --no-mpi (each rank an MPI singleton)");
  }
  const auto argv = MpiRanksCommand(spec, options);
  SubprocessOptions so;
  so.log_path = options.output_file;
  // Open MPI 4.1's mpirun merges the ranks' error texts (MPI_ERRORS_ARE_FATAL's "An error occurred
  // in MPI_Allreduce …") and drops them, failing to unpack them, when a rank's output is not its
  // pipe, as here. Unmerged, it prints them into launcher.log. Other MPIs ignore the variable; a
  // value the user set wins.
  if (!std::getenv("OMPI_MCA_orte_base_help_aggregate")) so.env["OMPI_MCA_orte_base_help_aggregate"] = "0";
  so.parent_death_signal = SIGTERM;  // mpirun ends its daemons' processes when terminated
  so.umask = static_cast<int>(UserUmask());
  auto p = Subprocess::Start(argv, so);
  if (!p.ok()) return Unavailable("cannot start " + options.mpirun + " for the MPI ranks: " + p.status().message());
  log::Get("run")->info("MPI ranks: {}", Join(argv, " "));
  mpirun_ = std::move(*p);
  return Status::Ok();
}

// The run is over when every rank has ended; mpirun may still be writing what they left it (Open
// MPI's error texts arrive after the abort that ends the rank): it gets time to end by itself.
MpiRankSource::~MpiRankSource() { Stop(std::chrono::seconds(5)); }

void MpiRankSource::Stop(Duration wait_first) {
  if (!mpirun_ || exited_at_) return;
  if (mpirun_->Wait(wait_first)) {
    exited_at_ = std::chrono::steady_clock::now();
    return;
  }
  mpirun_->Signal(SIGTERM);
  if (!mpirun_->Wait(std::chrono::seconds(5))) {
    mpirun_->Signal(SIGKILL);
    (void)mpirun_->Wait(std::chrono::seconds(5));
  }
  exited_at_ = std::chrono::steady_clock::now();
}

void MpiRankSource::Tick(int64_t now_ns, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) {
  agents_->Tick(now_ns, ranks, logs);
  if (mpirun_ && !exited_at_)
    if (auto e = mpirun_->Poll()) {
      exited_at_ = std::chrono::steady_clock::now();
      log::Get("run")->info("the MPI ranks' mpirun ended: {}", e->Describe());
    }
}

void MpiRankSource::Signal(int sig) {
  agents_->Signal(sig);
  // The escalation: mpirun ends (and ends what it started but never handed over). Never waited on
  // here: Tick reaps it, the destructor makes sure.
  if (sig == SIGKILL && mpirun_ && !exited_at_ && !terminated_) {
    terminated_ = true;
    mpirun_->Signal(SIGTERM);
  }
}

bool MpiRankSource::StartsPending() const {
  return mpirun_ && !terminated_ && (!exited_at_ || std::chrono::steady_clock::now() - *exited_at_ < grace_);
}

}  // namespace dsd::coordinator
