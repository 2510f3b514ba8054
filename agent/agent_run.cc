// The agent's side of `dsdoctor run`: a "run" request turns its connection into the job's stream
// (docs/agent-protocol.md "Run stream"). The node's ranks are a collectors::NodeRanks; this file
// only moves its ticks, stacks and files over the link (agent/run_protocol.h) and the coordinator's
// stop, stacks and resync messages into it. When the connection drops, the ranks run on if the
// coordinator's process is gone (its end of our stdin closed within kDecideAfterLoss: a kill, a
// lost ssh session); otherwise (a partition, an agent without that pipe, the agent stopping) every
// rank is stopped, SIGKILL after the request's escalation delay (docs/run.md "When the coordinator
// goes").
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

// After the run connection drops, how long the agent waits to learn whether the coordinator's
// process is gone (stdin closing comes within milliseconds of a kill) before it stops the ranks.
constexpr auto kDecideAfterLoss = std::chrono::seconds(3);

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
      : link_(link), ranks_(ranks), mirror_(mirror), deltas_(ranks.size()) {}

  bool gone() const { return gone_; }

  // The connection to the coordinator broke. What becomes of the ranks is decided by WhileGone.
  void CoordinatorGone(const std::string& why) {
    if (gone_) return;
    gone_ = true;
    lost_at_ = std::chrono::steady_clock::now();
    log::Get("agent")->warn("run: coordinator connection lost ({})", why);
  }

  // Each tick after the loss: the ranks run on when the coordinator's process is gone; they are
  // stopped, as the coordinator would have, when the agent itself stops or when the coordinator
  // still lives after kDecideAfterLoss (it lost us: it fails the job without these ranks).
  void WhileGone(bool agent_stopping, bool coordinator_process_gone) {
    if (stopped_ || (decided_ && !agent_stopping)) return;  // a later stop still stops them
    const auto log = log::Get("agent");
    if (agent_stopping ||
        (!coordinator_process_gone && std::chrono::steady_clock::now() - lost_at_ > kDecideAfterLoss)) {
      decided_ = stopped_ = true;
      log->warn("run: stopping {} ranks ({})", ranks_.size(),
                agent_stopping ? "the agent stops" : "the coordinator lives but lost this node");
      ranks_.Signal(SIGTERM);
    } else if (coordinator_process_gone) {
      decided_ = true;
      log->warn(
          "run: the coordinator's process is gone: {} ranks run on to their end; their logs, traces and exit "
          "files stay in {} (dsdoctor analyze {})",
          ranks_.size(), ranks_.options().run_dir.path(), ranks_.options().run_dir.path());
    }
  }

  void Send(const AgentRunMessage& m) {
    if (!gone_) Sent(net::SendFrame(link_, WriteAgentRunMessage(m)), "message");
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
      auto stacks = ranks_.Stacks(request->ranks, [&] { Send(HeartbeatMessage{ranks_.NowNs()}); });
      StacksReply reply{request->id, {}};
      for (auto& s : stacks) {
        if (mirror_ && s.error.empty()) SendFile(s.rank, RankFile::kStack, s.text);
        reply.stacks.push_back({s.rank, s.tool, s.signature, s.error});
      }
      Send(reply);
    }
  }

  // One tick's sample: first the files of ranks that exited (a coordinator that mirrors them has
  // them before it sees the exit) and the output too big to inline, then the frame.
  void SendSample(const collectors::NodeSample& s) {
    if (gone_) return;
    if (mirror_)
      for (size_t i : s.exited) {
        const auto& state = ranks_.state(i);
        SendFile(state.rank, RankFile::kExit, std::to_string(collectors::ShellExitStatus(state)) + "\n");
        // The ring as the rank left it; a rank that never traced has none.
        if (auto ring = ReadFile(ranks_.options().run_dir.RankTrace(state.rank), size_t{1} << 34); ring.ok())
          SendFile(state.rank, RankFile::kTrace, *ring);
      }
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
    if (!gone_) Sent(net::SendFrameText(link_, frame_.Finish()), "sample");
  }

 private:
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

  net::Link& link_;
  collectors::NodeRanks& ranks_;
  const bool mirror_;
  bool gone_ = false;
  bool decided_ = false;  // after the loss: the ranks were stopped, or left to run on
  bool stopped_ = false;
  std::chrono::steady_clock::time_point lost_at_{};
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
  collectors::NodeRanks ranks(std::move(o), &RealClock::Instance());
  std::vector<collectors::RankToStart> to_start;
  for (const auto& r : request.ranks) to_start.push_back({r.rank, r.local_rank, r.env});
  if (Status st = ranks.Start(to_start); !st.ok()) {
    (void)net::SendFrame(link, WriteAgentRunMessage(ErrorMessage{"spawn_failed", st.message()}));
    return;
  }
  StartedMessage started{options_.name, {}, shared};
  for (size_t i = 0; i < ranks.size(); ++i) started.ranks.push_back({ranks.state(i).rank, ranks.state(i).pid});
  log->info("run: started {} ranks of {}{}", ranks.size(), request.argv[0],
            shared ? "" : " (run dir not shared with the coordinator: its files are sent)");
  RunStreamOut out(link, ranks, /*mirror=*/!shared);
  out.Send(started);
  const auto period = std::chrono::milliseconds(std::clamp(request.sample_ms, 20, 5000));
  while (true) {
    if (out.gone()) {  // nothing more to read: the ranks run on or are being stopped (WhileGone)
      out.WhileGone(stop_ || coordinator_stopping_, coordinator_gone_ && !coordinator_stopping_);
      std::this_thread::sleep_for(period);
      out.SendSample(ranks.Tick());
      if (ranks.AllExited()) break;
      continue;
    }
    auto msg = net::RecvFrame(link, decoder, period);
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
    if (ranks.AllExited()) break;
  }
  if (!out.gone()) out.Send(DoneMessage{});
  log->info("run: every rank exited");
}

}  // namespace dsd::agent
