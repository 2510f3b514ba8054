// The agent's side of `dsdoctor run`: a "run" request turns its connection into the job's stream
// (docs/agent-protocol.md "Run stream"). The node's ranks are a collectors::NodeRanks; this file
// only moves its ticks, stacks and files over the link (agent/run_protocol.h) and the coordinator's
// stop, stacks and resync messages into it. Only an explicit stop ends the ranks: the coordinator's
// stop message or "stop" on our stdin, or the agent itself stopping. When the connection drops
// (the coordinator was killed, its ssh session was lost, a partition) the ranks run on, and a
// coordinator may take the run over on a new connection ("reattach": the same coordinator once a
// partition heals, or `dsdoctor attach RUN_DIR`); after the ranks end, the agent waits the run's
// reattach window for one before it lets the run go (docs/run.md "When the coordinator goes").
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "agent/agent.h"
#include "agent/run_protocol.h"
#include "collectors/node_ranks.h"
#include "common/file.h"
#include "common/log.h"
#include "common/run_files.h"
#include "common/strings.h"
#include "diagnosis/sample_delta.h"

namespace dsd::agent {

namespace {

static_assert(kDefaultStopEscalationMs ==
                  std::chrono::duration_cast<std::chrono::milliseconds>(collectors::kStopEscalation).count(),
              "a run request's default escalation is the nodes' (collectors::kStopEscalation)");

// Output inlined in one sample frame at most, all ranks together; the rest goes ahead of it in
// "log" messages, so no frame nears the 16 MiB limit however many ranks print at once.
constexpr size_t kInlineLogBytesPerFrame = 1u << 20;

// A coordinator that reattaches is sent at most this much of each rank's output it lacks (from the
// node's rank log); the rest stays on the node, and a line in the copy says where.
constexpr uint64_t kBackfillBytesPerRank = uint64_t{64} << 20;

// The coordinator wrote its run id into run.id before asking: finding it here means this node
// writes into the coordinator's own run dir (a shared file system, or the same machine).
bool SharesRunDir(const RunDir& dir, const std::string& run_id) {
  if (run_id.empty()) return false;
  auto text = ReadFile(dir.RunId(), 4096);
  return text.ok() && Trim(*text) == run_id;
}

// What the agent sends on one run stream, and whether anyone still listens.
class RunStreamOut {
 public:
  RunStreamOut(net::Link& link, collectors::NodeRanks& ranks, bool mirror)
      : link_(&link), ranks_(ranks), mirror_(mirror), deltas_(ranks.size()) {}

  bool gone() const { return gone_; }

  // The connection to the coordinator broke. The ranks run on (WhileGone).
  void CoordinatorGone(const std::string& why) {
    if (gone_) return;
    gone_ = true;
    log::Get("agent")->warn("run: coordinator connection lost ({})", why);
  }

  // Each tick without a coordinator: the ranks run on to their end, unless the agent stops or the
  // coordinator wrote "stop" on our stdin (an orderly end it could not send on the link).
  void WhileGone(bool stop_requested) {
    if (stopped_) return;
    const auto log = log::Get("agent");
    if (stop_requested) {
      stopped_ = true;
      log->warn("run: stopping {} ranks (the agent stops, or the coordinator ended the job)", ranks_.size());
      ranks_.Signal(SIGTERM);
    } else if (!said_running_on_) {
      said_running_on_ = true;
      log->warn(
          "run: no coordinator: {} ranks run on to their end; their logs, traces and exit files stay in {} "
          "(dsdoctor attach or analyze {})",
          ranks_.size(), ranks_.options().run_dir.path(), ranks_.options().run_dir.path());
    }
  }

  // A coordinator took the run over on `link` (a "reattach"): every rank is restated in full, the
  // output it lacks follows (from `have` on), and one that does not share our run dir gets the
  // files of exited ranks.
  void Resume(net::Link& link, const ReattachRequest& request, const StartedMessage& started) {
    link_ = &link;
    gone_ = false;
    said_running_on_ = false;
    for (auto& d : deltas_) d.Reset();
    Send(started);
    // The output the coordinator has not seen: written to the node's logs while no one was
    // attached. Sent whether or not it shares our run dir: it diagnoses what it reads.
    const RunDir& dir = ranks_.options().run_dir;
    for (size_t k = 0; k < ranks_.size() && !gone_; ++k) {
      const auto& state = ranks_.state(k);
      std::error_code ec;
      const uint64_t size = std::filesystem::file_size(dir.RankLog(state.rank), ec);
      const auto had = request.have.find(state.rank);
      uint64_t from = had == request.have.end() ? 0 : had->second;
      if (!ec && from < size) {
        if (size - from > kBackfillBytesPerRank) {
          Send(LogMessage{state.rank, "[dsdoctor: " + std::to_string(size - kBackfillBytesPerRank - from) +
                                          " bytes of this rank's output written while no coordinator was attached "
                                          "are only on " +
                                          ranks_.options().node + " in " + dir.RankLog(state.rank) + "]\n"});
          from = size - kBackfillBytesPerRank;
        }
        if (auto bytes = ReadFileRange(dir.RankLog(state.rank), from, size - from); bytes.ok())
          for (size_t at = 0; at < bytes->size(); at += kFilePieceBytes)
            Send(LogMessage{state.rank, bytes->substr(at, kFilePieceBytes)});
      }
      if (mirror_ && state.status == diagnosis::RankStatus::kExited) SendExitFiles(k);
    }
  }

  void Send(const AgentRunMessage& m) {
    if (!gone_) Sent(net::SendFrame(*link_, WriteAgentRunMessage(m)), "message");
  }

  void Handle(const RunControl& control) {
    if (const auto* stop = std::get_if<StopMessage>(&control)) {
      ranks_.Signal(stop->signal);
    } else if (const auto* resync = std::get_if<ResyncMessage>(&control)) {
      // The coordinator refused a delta of these ranks: their next entries are keyframes.
      for (int want : resync->ranks)
        for (size_t k = 0; k < ranks_.size(); ++k)
          if (ranks_.state(k).rank == want) deltas_[k].Reset();
    } else if (const auto* request = std::get_if<StacksRequest>(&control)) {
      // A capture can take seconds: a heartbeat between ranks tells the coordinator we live.
      const auto heartbeat = [&] { Send(HeartbeatMessage{ranks_.NowNs()}); };
      const int incident = request->flight_recorder_incident;
      std::vector<collectors::NodeRanks::FlightRecorderFile> dumps;
      auto stacks = ranks_.StacksAndDumps(request->ranks, incident, heartbeat, &dumps);
      StacksReply reply{request->id, {}};
      for (auto& s : stacks) {
        if (mirror_ && s.error.empty()) SendFile(s.rank, RankFile::kStack, s.text);
        reply.stacks.push_back({s.rank, s.tool, s.signature, s.error});
      }
      for (const auto& dump : dumps) {
        if (!mirror_) break;
        if (auto bytes = ReadFile(dump.path, kMaxFileBytes); bytes.ok())
          for (const auto& piece : FileMessages(dump.rank, RankFile::kFlightRecorder, *bytes, incident)) Send(piece);
      }
      Send(reply);
    }
  }

  // One tick's sample: first the files of ranks that exited (a coordinator that mirrors them has
  // them before it sees the exit) and the output too big to inline, then the frame.
  void SendSample(const collectors::NodeSample& s) {
    if (gone_) return;
    if (mirror_)
      for (size_t i : s.exited) SendExitFiles(i);
    frame_.Begin(s.now_ns);
    size_t inlined = 0;
    for (size_t k = 0; k < ranks_.size(); ++k) {
      const std::string& fresh = s.fresh[k];
      std::string_view inline_log = fresh;
      if (fresh.size() > kInlineLogBytes || inlined + fresh.size() > kInlineLogBytesPerFrame) {
        for (size_t at = 0; at < fresh.size(); at += kFilePieceBytes)
          Send(LogMessage{ranks_.state(k).rank, fresh.substr(at, kFilePieceBytes)});
        inline_log = {};
      }
      inlined += inline_log.size();
      frame_.AddRank([&](std::string* out) { deltas_[k].EncodeTo(ranks_.state(k), out); }, inline_log);
    }
    if (s.log_dir) frame_.SetLogDir(*s.log_dir);
    if (!gone_) Sent(net::SendFrameText(*link_, frame_.Finish()), "sample");
  }

 private:
  // An exited rank's exit status and its ring as it left it (a rank that never traced has none).
  void SendExitFiles(size_t i) {
    const auto& state = ranks_.state(i);
    SendFile(state.rank, RankFile::kExit, std::to_string(collectors::ShellExitStatus(state)) + "\n");
    if (auto ring = ReadFile(ranks_.options().run_dir.RankTrace(state.rank), size_t{1} << 34); ring.ok())
      SendFile(state.rank, RankFile::kTrace, *ring);
  }

  void SendFile(int rank, RankFile kind, std::string_view content) {
    for (const auto& piece : FileMessages(rank, kind, content)) Send(piece);
  }

  // Only a broken connection means the coordinator is gone; a frame we could not encode costs that
  // frame, never the job.
  void Sent(const Status& st, const char* what) {
    if (st.ok()) return;
    if (st.code() == StatusCode::kInvalidArgument) {
      log::Get("agent")->warn("run: a {} frame was dropped: {}", what, st.message());
      // The coordinator never saw these deltas: the next sample restates every rank in full.
      if (std::string_view(what) == "sample")
        for (auto& d : deltas_) d.Reset();
      return;
    }
    CoordinatorGone(st.message());
  }

  net::Link* link_;  // the coordinator's connection now (another after a reattach)
  collectors::NodeRanks& ranks_;
  const bool mirror_;
  bool gone_ = false;
  bool said_running_on_ = false;
  bool stopped_ = false;                              // without a coordinator, on an explicit stop
  std::vector<diagnosis::SampleDeltaWriter> deltas_;  // by index: each rank's entries are deltas
  SampleFrameWriter frame_;
};

}  // namespace

void Agent::ServeRun(net::Link& link, wire::FrameDecoder& decoder, const RunRequest& request) {
  auto log = log::Get("agent");
  ++runs_active_;
  struct Done {
    std::atomic<int>& n;
    ~Done() { --n; }
  } done{runs_active_};
  const RunDir run_dir(request.run_dir);
  // What the agent writes (the run dir, logs, stacks) is private; its ranks keep the user's umask.
  UsePrivateUmask(request.share_group);
  const bool shared = SharesRunDir(run_dir, request.run_id);
  std::error_code ec;
  std::filesystem::create_directories(run_dir.path(), ec);
  if (ec) {
    (void)net::SendFrame(
        link, WriteAgentRunMessage(
                  ErrorMessage{"bad_request", "run: cannot create run dir " + run_dir.path() + ": " + ec.message()}));
    return;
  }
  collectors::NodeRanksOptions o;
  o.node = options_.name;
  o.run_dir = run_dir;
  o.argv = request.argv;
  o.env = request.env;
  o.cwd = request.cwd;
  o.trace_python = request.trace_python;
  o.python = request.python;
  o.stop_escalation = std::chrono::milliseconds(request.stop_escalation_ms);
  o.rank_exec_socket = request.rank_exec_socket;
  collectors::NodeRanks ranks(std::move(o), &RealClock::Instance());
  std::vector<collectors::RankToStart> to_start;
  for (const auto& r : request.ranks) to_start.push_back({r.rank, r.local_rank, r.env});
  if (Status st = ranks.Start(to_start); !st.ok()) {
    (void)net::SendFrame(link, WriteAgentRunMessage(ErrorMessage{"spawn_failed", st.message()}));
    return;
  }
  StartedMessage started{options_.name, {}, shared};
  for (size_t i = 0; i < ranks.size(); ++i) started.ranks.push_back({ranks.state(i).rank, ranks.state(i).pid});
  log->info("run: {} {} ranks of {}{}", request.rank_exec_socket.empty() ? "started" : "awaits from mpirun",
            ranks.size(), request.argv[0],
            shared ? "" : " (run dir not shared with the coordinator: its files are sent)");
  // Findable by a coordinator that takes the run over (ServeReattach) until it ends.
  auto slot = std::make_shared<RunSlot>();
  if (!request.run_id.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    runs_[request.run_id] = slot;
  }
  RunStreamOut out(link, ranks, /*mirror=*/!shared);
  out.Send(started);
  net::Link* current = &link;  // the coordinator's connection now
  wire::FrameDecoder* current_decoder = &decoder;
  // A link taken from a reattaching connection goes back to it once broken or unused, so that its
  // thread (which owns it) may close it.
  auto give_back = [&] {
    std::lock_guard<std::mutex> lock(slot->mu);
    if (!slot->lent) return;
    slot->lent = nullptr;
    slot->cv.notify_all();
    current = &link;  // ours, broken or shut down: never the lender's, which may be gone now
    current_decoder = &decoder;
  };
  // A coordinator that reattached: its link replaces ours, whatever became of ours.
  auto take_over = [&] {
    std::unique_lock<std::mutex> lock(slot->mu);
    if (!slot->offered) return;
    // A coordinator that still held the old link (a half-open connection) is done with it; one that
    // still reads is told first, so that it steps back instead of taking the run back.
    if (!out.gone())
      (void)net::SendFrame(*current, WriteAgentRunMessage(ErrorMessage{
                                         "taken_over", "another coordinator took the run over on " + options_.name}));
    current->Shutdown();
    current = slot->lent = slot->offered;
    current_decoder = slot->offered_decoder;
    const ReattachRequest request_copy = slot->offered_request;
    slot->offered = nullptr;
    slot->cv.notify_all();
    lock.unlock();
    size_t running = 0;
    for (size_t i = 0; i < ranks.size(); ++i) running += ranks.state(i).status == diagnosis::RankStatus::kRunning;
    log->info("run: a coordinator took the run over ({} of {} ranks running)", running, ranks.size());
    out.Resume(*current, request_copy, started);  // the same ranks and pids: a rank is never restarted
  };
  const auto period = std::chrono::milliseconds(std::clamp(request.sample_ms, 20, 5000));
  // Every rank exited and no coordinator is attached: until when the agent waits for one.
  bool lingering = false;
  std::chrono::steady_clock::time_point linger_until{};
  while (true) {
    take_over();
    if (out.gone()) {  // nothing more to read: the ranks run on (or are stopped on an explicit stop)
      give_back();
      const bool stop_requested = stop_ || coordinator_stopping_;
      out.WhileGone(stop_requested);
      if (ranks.AllExited()) {
        if (!lingering) {
          lingering = true;
          linger_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(request.reattach_window_ms);
          if (request.reattach_window_ms > 0 && !stop_requested)
            log->info(
                "run: every rank exited; waiting {} s for a coordinator to collect their ends (dsdoctor attach {})",
                request.reattach_window_ms / 1000, run_dir.path());
        }
        if (stop_requested || std::chrono::steady_clock::now() >= linger_until) break;
      }
      std::this_thread::sleep_for(period);
      out.SendSample(ranks.Tick());
      continue;
    }
    lingering = false;
    auto msg = net::RecvFrame(*current, *current_decoder, period);
    if (!msg.ok() && msg.status().code() != StatusCode::kTimeout) {
      out.CoordinatorGone(msg.status().message());
    } else if (msg.ok()) {
      auto control = ReadRunControl(*msg);
      if (control.ok())
        out.Handle(*control);
      else
        log->warn("run: ignored a message from the coordinator: {}", control.status().message());
    }
    out.SendSample(ranks.Tick());
    if (ranks.AllExited() && !out.gone()) break;
  }
  if (!out.gone()) out.Send(DoneMessage{});
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = runs_.find(request.run_id); it != runs_.end() && it->second == slot) runs_.erase(it);
  }
  {
    std::lock_guard<std::mutex> lock(slot->mu);
    slot->ended = true;
    slot->lent = nullptr;
    slot->offered = nullptr;  // an offer not taken is refused (ServeReattach answers it)
    slot->cv.notify_all();
  }
  log->info("run: every rank exited");
}

void Agent::ServeReattach(net::Link& link, wire::FrameDecoder& decoder, const ReattachRequest& request) {
  auto log = log::Get("agent");
  std::shared_ptr<RunSlot> slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = runs_.find(request.run_id); it != runs_.end()) slot = it->second;
  }
  auto refuse = [&](const std::string& code, const std::string& message) {
    log->info("run: reattach refused: {}", message);
    (void)net::SendFrame(link, WriteAgentRunMessage(ErrorMessage{code, message}));
  };
  if (!slot) return refuse("no_such_run", "agent " + options_.name + " serves no run " + request.run_id);
  std::unique_lock<std::mutex> lock(slot->mu);
  if (slot->ended) return refuse("run_ended", "the run " + request.run_id + " has ended on " + options_.name);
  if (slot->offered) return refuse("busy", "another coordinator is taking over run " + request.run_id);
  slot->offered = &link;
  slot->offered_decoder = &decoder;
  slot->offered_request = request;
  // The run takes the link at its next tick, or refuses it by ending first.
  slot->cv.wait(lock, [&] { return slot->offered != &link; });
  if (slot->lent != &link) {
    lock.unlock();
    return refuse("run_ended",
                  "the run " + request.run_id + " ended on " + options_.name + " before it was taken over");
  }
  // The run streams on our link until it breaks or the run ends; the link is ours to close then.
  slot->cv.wait(lock, [&] { return slot->lent != &link; });
}

}  // namespace dsd::agent
