// Every file name of a run dir (docs/run.md "Log dir"), in one place, like leveldb's filename.h:
// the coordinator, the agents, direct mode, the bundled runtime, `analyze` and the TUI build a run
// dir's paths only through RunDir, and read names back only through ParseRunFileName.
//
//   rank-<r>.log     the rank's stdout+stderr
//   rank-<r>.trace   its collective trace ring (docs/trace.md)
//   rank-<r>.exit    its exit status as a shell reports it ("139" = 128 + SIGSEGV)
//   rank-<r>.stack   the stack captured when it hung ("# tool" first)
//   run.json         the coordinator's manifest and report
//   run.id           the run's id, written first: an agent that finds it under the same path shares
//                    the coordinator's file system (docs/agent-protocol.md "Run stream")
//   events.jsonl     the live view's event stream
//   viewer.addr      where `dsdoctor tui --attach` connects
//   viewer.token     the viewers' token
//   dsdoctor.log     dsdoctor's own log lines while `run --tui`'s view had the terminal
//   agents.json      where each node's agent serves the run, and its ranks: what `dsdoctor attach`
//                    needs to take the run over (docs/run.md "Taking a run over")
//   agents.token     the agents' token (0600) while the run is watched; removed when run ends
//   flight_recorder/ PyTorch's Flight Recorder (docs/flight-recorder.md): `request` (the newest
//                    incident number, written by the node to make every torch rank dump),
//                    incident-<n>/rank_<r> (rank r's dump for incident n), watchdog/rank_<r> (dumps
//                    torch's own watchdog wrote on a timeout), pipe/rank_<r>.pipe (NCCL's dump pipes)
// Values only; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dsd {

// kFlightRecorder is a rank's Flight Recorder dump of one incident (FlightRecorderDump): sent over a
// run stream like the others, never named by RankFileName.
enum class RankFile { kLog, kTrace, kExit, kStack, kFlightRecorder };

// "log", "trace", "exit", "stack": the extension of a rank's file.
std::string_view RankFileExtension(RankFile kind);

// "rank-3.log"
std::string RankFileName(int rank, RankFile kind);

struct ParsedRunFileName {
  int rank = -1;
  RankFile kind = RankFile::kLog;
};
// A rank's file name ("rank-3.trace": rank 3, kTrace), or nullopt for any other name, including one
// RankFileName would not write ("rank-07.log"). Ranks have at most 7 digits: no int overflow.
std::optional<ParsedRunFileName> ParseRunFileName(std::string_view name);
// The same for a path: its last component ("/logs/rank-2.log", "rank-2.log").
std::optional<ParsedRunFileName> ParseRunFilePath(std::string_view path);

class RunDir {
 public:
  RunDir() = default;
  explicit RunDir(std::string path) : path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  bool empty() const { return path_.empty(); }

  std::string RankPath(int rank, RankFile kind) const { return Join(RankFileName(rank, kind)); }
  std::string RankLog(int rank) const { return RankPath(rank, RankFile::kLog); }
  std::string RankTrace(int rank) const { return RankPath(rank, RankFile::kTrace); }
  std::string RankExit(int rank) const { return RankPath(rank, RankFile::kExit); }
  std::string RankStack(int rank) const { return RankPath(rank, RankFile::kStack); }
  std::string Manifest() const { return Join(kManifest); }
  std::string RunId() const { return Join(kRunId); }
  std::string Events() const { return Join(kEvents); }
  std::string ViewerAddr() const { return Join(kViewerAddr); }
  std::string ViewerToken() const { return Join(kViewerToken); }
  std::string CoordinatorLog() const { return Join(kCoordinatorLog); }
  std::string Agents() const { return Join(kAgents); }
  std::string AgentsToken() const { return Join(kAgentsToken); }
  std::string LauncherLog() const { return Join(kLauncherLog); }
  std::string FlightRecorderDir() const { return Join(kFlightRecorderDir); }
  std::string FlightRecorderRequest() const { return Join(std::string(kFlightRecorderDir) + "/request"); }
  std::string FlightRecorderIncident(int incident) const {
    return Join(std::string(kFlightRecorderDir) + "/" + kFlightRecorderIncidentPrefix + std::to_string(incident));
  }
  std::string FlightRecorderDump(int incident, int rank) const {
    return FlightRecorderIncident(incident) + "/" + kFlightRecorderDumpPrefix + std::to_string(rank);
  }
  // Torch's own dump file and pipe prefixes (TORCH_FR_DUMP_TEMP_FILE, TORCH_NCCL_DEBUG_INFO_PIPE_FILE):
  // torch appends the rank.
  std::string FlightRecorderWatchdog() const { return Join(std::string(kFlightRecorderDir) + "/watchdog"); }
  std::string FlightRecorderWatchdogPrefix() const {
    return FlightRecorderWatchdog() + "/" + kFlightRecorderDumpPrefix;
  }
  std::string FlightRecorderPipePrefix() const {
    return Join(std::string(kFlightRecorderDir) + "/pipe/" + kFlightRecorderDumpPrefix);
  }

  static constexpr const char* kManifest = "run.json";
  static constexpr const char* kRunId = "run.id";
  static constexpr const char* kEvents = "events.jsonl";
  static constexpr const char* kViewerAddr = "viewer.addr";
  static constexpr const char* kViewerToken = "viewer.token";
  static constexpr const char* kCoordinatorLog = "dsdoctor.log";
  static constexpr const char* kAgents = "agents.json";
  static constexpr const char* kAgentsToken = "agents.token";
  // What the tool that started every agent (srun, pdsh, mpirun) printed on stderr for the whole
  // run: srun's "task 1: Killed", slurmstepd's memory kill, pdsh's ssh failures.
  static constexpr const char* kLauncherLog = "launcher.log";
  static constexpr const char* kFlightRecorderDir = "flight_recorder";
  static constexpr const char* kFlightRecorderIncidentPrefix = "incident-";
  static constexpr const char* kFlightRecorderDumpPrefix = "rank_";

 private:
  std::string Join(std::string_view name) const;
  std::string path_;
};

}  // namespace dsd
