// The run session of `dsdoctor run` (docs/run.md), the counterpart of the check session: from a
// planned RunSpec it makes the run dir (run.id first), starts the live stream (events.jsonl, the
// viewers' port and token), starts an agent per node through the launcher (or the ranks directly),
// hands the ranks to the JobCoordinator and ticks it until the job is over, then stops the agents.
// Its observers are the text printer, the live stream and, under --tui, the ncurses view, which
// also paces the ticks (it draws and reads keys between them).
// Blocking; the agents' readers and the viewers' server run on threads of their own.
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <vector>

#include "common/status.h"
#include "coordinator/job_coordinator.h"
#include "coordinator/launcher.h"
#include "coordinator/run_spec.h"

namespace dsd::coordinator {

struct RunSessionIo {
  std::FILE* out = stdout;  // the ranks' lines, findings, notices (unless --quiet / --tui)
  std::FILE* err = stderr;  // notes and warnings about the setup
  // Set by the caller's SIGINT/SIGTERM handler to the signal's number: the job is stopped, and its
  // exit code is 128 + the signal.
  const std::atomic<int>* interrupt = nullptr;
  // Called once the agents are up, just before the ranks start: where the caller installs that
  // handler. Until then a signal ends dsdoctor at once (and its agents with it), so a launch that
  // hangs on an unreachable host can be interrupted.
  std::function<void()> before_ranks_start;
};

// The job's result, or why it could not run: kInvalidArgument for what the user gave (a log dir
// that cannot be made, --serve, a terminal the view cannot use), kUnavailable when an agent or its
// ranks could not start (a problem of the cluster), anything else an internal failure.
Result<JobResult> RunJobSession(const RunSpec& spec, const LauncherChoice& launcher, const RunSessionIo& io);

// `dsdoctor attach RUN_DIR` (docs/run.md "Taking a run over"): a new coordinator for a run whose
// coordinator is gone. From the run dir's agents.json and agents.token it connects to every agent,
// takes the run over ("reattach") and watches it as `run` would, to the same report and exit code.
struct AttachOptions {
  bool quiet = false;
  std::string on_hang;      // stop | wait; "": stop
  double timeout_s = 0;     // 0: the run's own
  double hang_after_s = 0;  // 0: the run's own
};
// Errors: kNotFound (no agents.json), kInvalidArgument (a bad or stale agents.json, no token),
// kUnavailable (an agent that cannot be reached or no longer serves the run: the error says so and
// points at `dsdoctor analyze`).
Result<JobResult> AttachJobSession(const RunDir& dir, const AttachOptions& options, const RunSessionIo& io);

}  // namespace dsd::coordinator
