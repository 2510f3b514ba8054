#include "coordinator/rank_source.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "collectors/rank_exec.h"
#include "collectors/rank_monitor.h"
#include "common/file.h"
#include "common/log.h"

namespace dsd::coordinator {

namespace {

// How long ~AgentSource waits for agents to end ranks it stops (their escalation to SIGKILL is 3 s).
constexpr auto kStopReachesAgents = std::chrono::seconds(5);

// `dsdoctor attach` diagnoses this much of the end of each rank's log already on disk.
constexpr uint64_t kPriorLogBytes = 1u << 20;

// Between two attempts to connect again to an agent whose link broke.
constexpr auto kRelinkEvery = std::chrono::seconds(1);

// A sample's state replaces the rank's (`assign` writes it over `into`), but what the coordinator
// decided stays: its judgement that the agent was lost, and a stack it captured when the sample has none.
template <typename Assign>
void AdoptWith(diagnosis::RankState& into, Assign assign) {
  std::string stack = std::move(into.stack);
  const bool unobserved = into.unobserved;
  assign(into);
  into.unobserved = unobserved;
  if (into.stack.empty()) into.stack = std::move(stack);
}

}  // namespace

void Adopt(diagnosis::RankState& into, const diagnosis::RankState& from) {
  AdoptWith(into, [&](diagnosis::RankState& s) { s = from; });
}

Status DirectSource::Start(const RunSpec& spec) {
  collectors::NodeRanksOptions o;
  o.node = spec.nodes.nodes.empty() ? std::string("node-0") : spec.nodes.nodes[0].host;
  o.run_dir = spec.run_dir;
  o.argv = spec.command;
  o.env = spec.env;
  o.cwd = spec.cwd;
  o.trace_python = spec.trace_python;
  o.python = spec.python;
  o.stop_escalation = spec.stop_escalation;
  ranks_.emplace(std::move(o), clock_);
  std::vector<collectors::RankToStart> start;
  start.reserve(spec.ranks.ranks.size());
  for (const auto& l : spec.ranks.ranks) start.push_back({l.rank, l.local_rank, spec.ranks.RankEnv(l)});
  return ranks_->Start(start);
}

void DirectSource::Tick(int64_t, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) {
  if (!ranks_) return;
  const collectors::NodeSample& s = ranks_->Tick();
  for (size_t i = 0; i < ranks_->size(); ++i) {
    const int r = ranks_->state(i).rank;
    if (r < 0 || r >= static_cast<int>(ranks.size())) continue;
    logs[r] += s.fresh[i];
    Adopt(ranks[r], ranks_->state(i));
  }
  if (s.log_dir) log_dir_ = *s.log_dir;
}

std::vector<diagnosis::LogDirStatus> DirectSource::LogDirs() const {
  if (!log_dir_) return {};
  return {*log_dir_};
}

void DirectSource::Signal(int sig) {
  if (ranks_) ranks_->Signal(sig);
}

std::map<int, std::string> DirectSource::Stacks(const std::vector<int>& want, int flight_recorder_incident) {
  std::map<int, std::string> out;
  if (!ranks_) return out;
  // The dumps stay on disk: this process's run dir is the run's.
  for (const auto& s : ranks_->StacksAndDumps(want, flight_recorder_incident, {}))
    if (s.error.empty()) out[s.rank] = s.signature;
  return out;
}

AgentSource::~AgentSource() {
  // Ranks that still run when the source ends (an error after they started, a coordinator that
  // gives up) are stopped here: ending `run` ends the job. Only a coordinator that vanishes without
  // this (kill -9, a crash, a lost ssh session) leaves them running (docs/run.md "When the
  // coordinator goes"). The stop must reach the agents before the links close: wait until each
  // said done or its link broke, a few seconds at most.
  auto still_running = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return std::any_of(agents_.begin(), agents_.end(), [](const auto& a) { return a->connected && !a->done; });
  };
  if (still_running()) {
    Signal(SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + kStopReachesAgents;
    while (still_running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    for (auto& a : agents_) a->client->link().Shutdown();
    cv_.notify_all();
  }
  for (auto& a : agents_)
    if (a->reader.joinable()) a->reader.join();
  const SampleReads r = sample_reads();
  log::Get("run")->debug("sample frames: {} read in place, {} parsed; rank entries: {} read in place, {} parsed",
                         r.frames_in_place, r.frames_parsed, r.entries_in_place, r.entries_parsed);
}

AgentSource::SampleReads AgentSource::sample_reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reads_;
}

Status AgentSource::Start(std::vector<agent::AgentClient> clients, const RunSpec& spec) {
  return Begin(std::move(clients), spec, /*reattach=*/false);
}

Status AgentSource::Reattach(std::vector<agent::AgentClient> clients, const RunSpec& spec) {
  return Begin(std::move(clients), spec, /*reattach=*/true);
}

std::map<int, uint64_t> AgentSource::LogBytes(const std::vector<int>& ranks) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int, uint64_t> have;
  for (int r : ranks)
    if (auto it = seen_.find(r); it != seen_.end()) have[r] = it->second;
  return have;
}

Status AgentSource::SendReattach(Agent& a, agent::AgentClient& client) {
  DSD_RETURN_IF_ERROR(net::SendFrame(client.link(), agent::WriteReattachRequest({run_id_, LogBytes(a.ranks)})));
  auto reply = net::RecvFrame(client.link(), client.decoder(), std::chrono::seconds(30));
  if (!reply.ok()) return Unavailable("agent " + a.name + ": " + reply.status().message());
  auto msg = agent::ReadAgentRunMessage(*reply);
  if (!msg.ok()) return Unavailable("agent " + a.name + ": " + msg.status().message());
  if (const auto* error = std::get_if<agent::ErrorMessage>(&*msg))
    return NotFound("agent " + a.name + " cannot hand the run over: " + error->message);
  const auto* started = std::get_if<agent::StartedMessage>(&*msg);
  if (!started) return Unavailable("agent " + a.name + " answered the reattach request with " + reply->dump());
  if (!started->shared_run_dir) {
    mirror_->Resume(a.ranks);
    std::lock_guard<std::mutex> lock(mu_);
    a.mirrored = true;
  }
  return Status::Ok();
}

Status AgentSource::StartRun(Agent& a, const RunSpec& spec, size_t index, size_t* mirrored_ranks) {
  agent::RunRequest req;
  req.argv = spec.command;
  req.env = spec.env;
  if (index < spec.ranks.node_env.size())  // the node's shared variables once, each rank's own beside it
    for (const auto& [k, v] : spec.ranks.node_env[index]) req.env[k] = v;
  req.cwd = spec.cwd;
  req.run_dir = spec.run_dir.path();
  req.run_id = spec.run_id;
  req.sample_ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(options_.sample_period).count());
  req.trace_python = spec.trace_python;
  req.python = spec.python;
  req.share_group = spec.share_group;
  req.stop_escalation_ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(spec.stop_escalation).count());
  req.reattach_window_ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(spec.reattach_window).count());
  for (const auto& l : spec.NodeRanks(index)) req.ranks.push_back({l.rank, l.local_rank, RankPlan::OwnEnv(l)});
  if (spec.mpi) req.rank_exec_socket = collectors::RankExecSocketName(spec.run_id, index);
  const std::string& name = a.name;
  DSD_RETURN_IF_ERROR(net::SendFrame(a.client->link(), agent::WriteRunRequest(req)));
  auto reply = net::RecvFrame(a.client->link(), a.client->decoder(), std::chrono::seconds(30));
  if (!reply.ok()) return Unavailable("agent " + name + ": " + reply.status().message());
  auto msg = agent::ReadAgentRunMessage(*reply);
  if (!msg.ok()) return Unavailable("agent " + name + ": " + msg.status().message());
  if (const auto* error = std::get_if<agent::ErrorMessage>(&*msg))
    return Unavailable("agent " + name + " could not start its ranks: " + error->message);
  const auto* started = std::get_if<agent::StartedMessage>(&*msg);
  if (!started) return Unavailable("agent " + name + " answered the run request with " + reply->dump());
  // A node that did not find run.id has its rank files copied here, unless they turn out to be
  // here after all (a shared file system slow to show run.id to the node).
  if (!started->shared_run_dir) {
    a.mirrored = mirror_->Adopt(a.ranks);
    *mirrored_ranks += a.ranks.size();
    if (a.mirrored)
      log::Get("run")->info("agent {} does not share the run dir {}: its rank files are copied here", name,
                            spec.run_dir.path());
    else
      log::Get("run")->info("agent {} did not find run.id, but its rank logs are in {}: not copied", name,
                            spec.run_dir.path());
  }
  return Status::Ok();
}

Status AgentSource::ResumeRun(Agent& a, const RunSpec& spec, size_t* mirrored_ranks) {
  // What the run dir holds of each rank's output: its tail is diagnosed first, as if it had just
  // been printed (the agent sends what it lacks next). Under mu_: earlier agents' readers run.
  for (int r : a.ranks) {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(spec.run_dir.RankLog(r), ec);
    if (ec || !size) continue;
    const uint64_t from = size > kPriorLogBytes ? size - kPriorLogBytes : 0;
    if (auto tail = ReadFileRange(spec.run_dir.RankLog(r), from, size - from); tail.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_[r] = from + tail->size();
      pending_log_[r] = std::move(*tail);
    }
  }
  DSD_RETURN_IF_ERROR(SendReattach(a, *a.client));
  if (a.mirrored) *mirrored_ranks += a.ranks.size();
  return Status::Ok();
}

Status AgentSource::Begin(std::vector<agent::AgentClient> clients, const RunSpec& spec, bool reattach) {
  run_dir_ = spec.run_dir;
  run_id_ = spec.run_id;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  mirror_.emplace(spec.run_dir, std::string(host) + " (coordinator)");
  size_t mirrored_ranks = 0;
  for (size_t i = 0; i < clients.size(); ++i) {
    auto a = std::make_unique<Agent>(std::move(clients[i]));
    for (const auto& l : spec.NodeRanks(i)) a->ranks.push_back(l.rank);
    DSD_RETURN_IF_ERROR(reattach ? ResumeRun(*a, spec, &mirrored_ranks) : StartRun(*a, spec, i, &mirrored_ranks));
    a->last_frame = a->last_live = clock_->Now();
    Agent* raw = a.get();
    agents_.push_back(std::move(a));
    raw->reader = std::thread([this, raw] { Read(*raw); });
  }
  // A copied rank's log stays open here (RunDirMirror): room for them beside the links.
  if (mirrored_ranks)
    if (std::string low = collectors::RaiseOpenFileLimitFor(mirrored_ranks); !low.empty())
      log::Get("run")->warn("copying the nodes' rank files: {}", low);
  last_tick_ = resumed_ = clock_->Now();
  return Status::Ok();
}

bool AgentSource::Lost(const Agent& a, MonoTime now) const {
  if (a.done) return false;
  if (!a.connected) return true;
  // An agent capturing stacks sends only a heartbeat between ranks: each capture may take up to the
  // stack tool's timeout, so its silence counts against stack_timeout, not the sample limit.
  if (a.stacks_pending) return now - a.last_frame > options_.stack_timeout;
  return now - a.last_frame > SilenceLimit();
}

Duration AgentSource::SilenceLimit() const {
  return std::max<Duration>(options_.sample_period * options_.lost_after_samples, std::chrono::seconds(1));
}

void AgentSource::Tick(int64_t, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) {
  std::vector<std::pair<std::shared_ptr<agent::AgentClient>, nlohmann::json>> resyncs;  // sent unlocked: may block
  // The coordinator's own run dir, when it copies nodes' files: probed without holding mu_, so a
  // slow disk never holds up the agents' readers.
  std::optional<diagnosis::LogDirStatus> mirror_status;
  if (mirror_)
    mirror_status = mirror_->Poll(
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock_->WallNow().time_since_epoch()).count());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (mirror_status) mirror_status_ = std::move(mirror_status);
    TickLocked(ranks, logs);
    for (auto& a : agents_) {
      if (a->resync.empty()) continue;
      // Refused deltas: the agent restates those ranks in full (agents before "resync" ignore it
      // and send their periodic keyframe).
      if (a->connected && !a->done)
        resyncs.emplace_back(a->client, agent::WriteRunControl(agent::ResyncMessage{a->resync}));
      a->resync.clear();
    }
  }
  for (const auto& [client, request] : resyncs) (void)net::SendFrame(client->link(), request);
}

void AgentSource::TickLocked(std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) {
  MonoTime now = clock_->Now();
  // A gap far longer than a tick means we were stopped (SIGSTOP, a debugger) or starved: the
  // agents' silence during it is ours, not theirs, and what is queued is old news.
  // The same limit: a gap that would make an agent lost makes us the suspect.
  if (now - last_tick_ > SilenceLimit()) {
    log::Get("run")->info("the coordinator was away for {:.1f} s; catching up with the agents before diagnosing",
                          std::chrono::duration<double>(now - last_tick_).count());
    resumed_ = now;
    for (auto& a : agents_)
      if (!Lost(*a, last_tick_)) a->last_frame = std::max(a->last_frame, now);  // lost before the gap: still lost
  }
  last_tick_ = now;
  // Each rank's newest state, read out of its delta reader once per tick (not once per sample).
  for (const auto& entry : deltas_) {
    // Not a structured binding: the lambda below captures the reader (clang before 16 refuses that).
    const int r = entry.first;
    const diagnosis::SampleDeltaReader& reader = entry.second;
    if (r < 0 || r >= static_cast<int>(ranks.size()) || reader.rank() != r) continue;
    auto& into = ranks[r];
    // Assigned over the previous state: its records' storage is reused.
    AdoptWith(into, [&](diagnosis::RankState& s) { (void)reader.StateInto(&s); });
    // When the agent read this state (its clock): ages are measured to it, never to ours.
    if (!into.sample_ns)
      if (auto at = sampled_at_.find(r); at != sampled_at_.end()) into.sample_ns = at->second;
  }
  for (auto& [r, text] : pending_log_)
    if (r >= 0 && r < static_cast<int>(logs.size())) logs[r] += text;
  pending_log_.clear();
}

bool AgentSource::CaughtUp() const {
  std::lock_guard<std::mutex> lock(mu_);
  MonoTime now = clock_->Now();
  for (const auto& a : agents_)
    if (!a->done && !Lost(*a, now) && a->last_live < resumed_) return false;
  return true;
}

std::vector<diagnosis::LogDirStatus> AgentSource::LogDirs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<diagnosis::LogDirStatus> out;
  for (const auto& a : agents_)
    if (a->log_dir) out.push_back(*a->log_dir);
  if (mirror_status_) out.push_back(*mirror_status_);
  return out;
}

std::vector<AgentHealth> AgentSource::Health() const {
  std::lock_guard<std::mutex> lock(mu_);
  MonoTime now = clock_->Now();
  std::vector<AgentHealth> out;
  for (const auto& a : agents_) {
    AgentHealth h{a->name, a->ranks, a->connected, a->done, Lost(*a, now), a->gone && !a->connected, 0, a->why};
    if (!a->done) h.silent_s = std::max(0.0, std::chrono::duration<double>(now - a->last_frame).count());
    out.push_back(std::move(h));
  }
  return out;
}

void AgentSource::Signal(int sig) {
  std::vector<std::shared_ptr<agent::AgentClient>> clients;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& a : agents_)
      if (a->connected && !a->done) clients.push_back(a->client);
  }
  const nlohmann::json stop = agent::WriteRunControl(agent::StopMessage{sig});
  for (const auto& client : clients) (void)net::SendFrame(client->link(), stop);
}

std::map<int, std::string> AgentSource::Stacks(const std::vector<int>& want, int flight_recorder_incident) {
  std::vector<Agent*> asked;
  std::vector<std::pair<std::shared_ptr<agent::AgentClient>, nlohmann::json>> requests;  // sent unlocked: may block
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stacks_.clear();
    id = ++stacks_id_;
    MonoTime now = clock_->Now();
    for (auto& a : agents_) {
      a->stacks_answered = false;
      if (a->done || Lost(*a, now)) continue;  // a lost agent answers nothing: never wait for it
      std::vector<int> mine;
      for (int r : want)
        if (std::find(a->ranks.begin(), a->ranks.end(), r) != a->ranks.end()) mine.push_back(r);
      // Flight Recorder dumps are asked of every node: the culprit may be a rank whose stack is not.
      if (mine.empty() && flight_recorder_incident == 0) continue;
      asked.push_back(a.get());
      a->stacks_pending = true;
      requests.emplace_back(a->client,
                            agent::WriteRunControl(agent::StacksRequest{id, mine, flight_recorder_incident}));
    }
  }
  for (const auto& [client, request] : requests) (void)net::SendFrame(client->link(), request);
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + options_.stack_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    MonoTime now = clock_->Now();
    bool all = std::all_of(asked.begin(), asked.end(),
                           [&](Agent* a) { return a->stacks_answered || a->done || Lost(*a, now); });
    if (all) break;
    cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  // We waited, we were not stalled: the readers kept receiving meanwhile.
  last_tick_ = clock_->Now();
  return stacks_;
}

bool AgentSource::Relink(Agent& a, std::optional<agent::AgentClient>* out) {
  auto log = log::Get("run");
  if (options_.token.empty()) return false;  // a source made without the token cannot connect again
  net::Endpoint endpoint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    endpoint = a.client->endpoint();
  }
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, kRelinkEvery, [&] { return closing_; });
      if (closing_) return false;
    }
    net::ConnectOutcome outcome = net::ConnectOutcome::kError;
    auto c = agent::AgentClient::Connect(endpoint, options_.token, std::chrono::seconds(3), &outcome);
    if (!c.ok()) {
      // Nothing listens on its port (the host answered): the agent is gone, and its ranks died with
      // it. A timeout or no route is a partition, which may heal: keep trying.
      if (outcome == net::ConnectOutcome::kRefused) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!a.gone) log->warn("agent {}: {}: the agent is gone", a.name, c.status().message());
        a.gone = true;
      }
      continue;
    }
    Status st = SendReattach(a, *c);
    if (st.code() == StatusCode::kNotFound) {  // it no longer serves the run (it ended, or restarted)
      std::lock_guard<std::mutex> lock(mu_);
      log->warn("agent {}: {}", a.name, st.message());
      a.gone = true;
      a.why = st.message();
      return false;
    }
    if (!st.ok()) continue;
    out->emplace(std::move(*c));
    return true;
  }
}

void AgentSource::Read(Agent& a) {
  auto log = log::Get("run");
  agent::SampleFrameText sample;                        // its entries' storage is reused frame after frame
  std::vector<std::pair<int, std::string>> mirror_out;  // rank output for the mirror, written unlocked
  std::shared_ptr<agent::AgentClient> client;
  {
    std::lock_guard<std::mutex> lock(mu_);
    client = a.client;
  }
  while (true) {
    // Sample frames, nearly all of them, are read in place (agent::ScanSampleFrame); any other
    // frame, or one of another shape, is parsed as a JSON tree.
    auto text = net::RecvFrameText(client->link(), client->decoder(), std::chrono::seconds(1));
    const bool in_place = text.ok() && agent::ScanSampleFrame(*text, &sample);
    Result<nlohmann::json> msg = nlohmann::json();
    if (!text.ok())
      msg = text.status();
    else if (!in_place)
      msg = wire::ParseFramePayload(*text);
    if (!msg.ok() && msg.status().code() == StatusCode::kTimeout) {
      // Silence: a half-open connection (a partition the kernel has not noticed) is made again.
      std::lock_guard<std::mutex> lock(mu_);
      const Duration silent = clock_->Now() - a.last_frame;
      if (closing_ || a.done || a.stacks_pending || silent <= std::max(options_.relink_after, 2 * SilenceLimit()))
        continue;
      msg = Unavailable("nothing from the agent for " +
                        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(silent).count()) + " s");
    }
    if (!msg.ok()) {
      // The agent is gone (killed, its node down) or the link broke. Its ranks run on if they can
      // (an agent stops them only when told): they keep their last state, no exit code is made up
      // for them, and the link is made again to take the run over once the agent can be reached.
      client->link().Shutdown();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (a.done || closing_) {
          cv_.notify_all();
          return;
        }
        a.connected = false;
        if (a.taken_over) {
          a.why = "another coordinator took the run over (dsdoctor attach)";
          log->warn("agent {}: {}; this one no longer watches its ranks", a.name, a.why);
          cv_.notify_all();
          return;
        }
        a.why = "connection lost: " + msg.status().message();
        log->warn("agent {}: {}; connecting again", a.name, a.why);
        cv_.notify_all();
      }
      std::optional<agent::AgentClient> fresh;
      if (!Relink(a, &fresh)) return;
      client = std::make_shared<agent::AgentClient>(std::move(*fresh));
      std::lock_guard<std::mutex> lock(mu_);
      a.client = client;
      a.connected = true;
      a.why.clear();
      a.stacks_pending = false;
      a.last_frame = a.last_live = clock_->Now();
      log->warn("agent {}: connected again; the run goes on", a.name);
      cv_.notify_all();
      continue;
    }
    // A tree: a sample of another shape, or any other message (read and checked here, unlocked).
    bool is_sample = in_place;
    Result<agent::AgentRunMessage> typed = agent::AgentRunMessage{agent::DoneMessage{}};
    if (!in_place) {
      is_sample = agent::SampleFrameFromJson(*msg, &sample);
      if (!is_sample) typed = agent::ReadAgentRunMessage(*msg);
    }
    if (!is_sample && !typed.ok()) {
      // An agent's frame of the wrong shape degrades that frame, never the coordinator.
      log->warn("agent {}: ignoring a malformed frame: {}", a.name, typed.status().message());
      std::lock_guard<std::mutex> lock(mu_);
      a.last_frame = clock_->Now();
      continue;
    }
    const bool live = !client->link().HasPendingInput() && client->decoder().buffered() == 0;
    mirror_out.clear();
    try {
      // A node's file for our copy of its run dir (only its own ranks'): written before the frames
      // after it are handled, so a rank's ring is on disk before the sample that reports its exit.
      if (!is_sample && a.mirrored)
        if (const auto* file = std::get_if<agent::FileMessage>(&*typed)) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            a.last_frame = clock_->Now();  // a sign of life while the file is written
          }
          if (std::find(a.ranks.begin(), a.ranks.end(), file->rank) != a.ranks.end())
            mirror_->Write(*file);
          else
            log->warn("agent {}: ignoring a file of rank {}, which is not its own", a.name, file->rank);
        }
      {
        std::lock_guard<std::mutex> lock(mu_);
        a.last_frame = clock_->Now();
        if (is_sample) {
          ++(in_place ? reads_.frames_in_place : reads_.frames_parsed);
          HandleSample(a, sample, live, &mirror_out);
        } else {
          Handle(a, *typed, live, &mirror_out);
        }
      }
      if (a.mirrored)
        for (const auto& [rank, bytes] : mirror_out) mirror_->AppendLog(rank, bytes);
    } catch (const std::exception& e) {
      // Whatever an agent sends costs at most that frame, never the coordinator.
      log->warn("agent {}: a frame could not be handled: {}", a.name, e.what());
    }
  }
}

void AgentSource::HandleSample(Agent& a, const agent::SampleFrameText& frame, bool live,
                               std::vector<std::pair<int, std::string>>* mirror_out) {
  if (live) a.last_live = a.last_frame;
  std::string wire_log, fresh;  // a rank's output that came with its entry (base64, then raw)
  for (const auto& entry : frame.entries) {
    const int r = entry.rank;
    if (std::find(a.ranks.begin(), a.ranks.end(), r) == a.ranks.end()) continue;
    // Each entry holds what changed since the rank's previous one (diagnosis/sample_delta.h).
    auto& reader = deltas_[r];
    wire_log.clear();
    const Status applied = reader.ApplyText(entry.text, &wire_log);
    ++(reader.last_in_place() ? reads_.entries_in_place : reads_.entries_parsed);
    if (!applied.ok()) {
      if (delta_refused_.insert(r).second) {  // once until one applies again: never a line per tick
        log::Get("run")->warn("agent {}: ignoring rank {}'s samples until it restates them: {}", a.name, r,
                              applied.message());
        a.resync.push_back(r);
      }
      // The state waits for the keyframe; the rank's output does not: it is never dropped.
      wire_log.clear();
      (void)agent::EntryLog(entry.text, &wire_log);
    } else {
      delta_refused_.erase(r);
      // The state itself is read out at the next Tick (TickLocked).
      if (reader.rank() == r) {
        if (frame.now_ns)
          sampled_at_[r] = *frame.now_ns;
        else
          sampled_at_.erase(r);
      }
    }
    if (wire_log.empty()) continue;
    fresh.clear();
    if (!agent::DecodeLog(wire_log, &fresh)) {
      log::Get("run")->warn("agent {}: rank {}'s output in a sample is not base64; dropped", a.name, r);
      continue;
    }
    pending_log_[r] += fresh;
    seen_[r] += fresh.size();
    if (a.mirrored) mirror_out->emplace_back(r, fresh);
  }
  if (!frame.log_dir.empty()) {
    if (auto space = wire::ParseJsonBounded(frame.log_dir); space.ok()) {
      if (auto d = diagnosis::LogDirStatusFromJson(*space); d.ok()) {
        d->node = a.name;  // the node is who we connected to, whatever the frame says
        a.log_dir = std::move(*d);
      }
    }
  }
}

void AgentSource::Handle(Agent& a, const agent::AgentRunMessage& msg, bool live,
                         std::vector<std::pair<int, std::string>>* mirror_out) {
  if (const auto* chunk = std::get_if<agent::LogMessage>(&msg)) {
    // A rank's output that did not fit its sample: it comes first, in order.
    if (std::find(a.ranks.begin(), a.ranks.end(), chunk->rank) == a.ranks.end()) return;
    pending_log_[chunk->rank] += chunk->bytes;
    seen_[chunk->rank] += chunk->bytes.size();
    if (a.mirrored) mirror_out->emplace_back(chunk->rank, chunk->bytes);
  } else if (const auto* reply = std::get_if<agent::StacksReply>(&msg)) {
    // A reply to an earlier request that timed out describes ranks as they were then: dropped.
    if (reply->id != stacks_id_) return;
    for (const auto& s : reply->stacks)
      if (s.error.empty() && std::find(a.ranks.begin(), a.ranks.end(), s.rank) != a.ranks.end())
        stacks_[s.rank] = s.signature;
    a.stacks_answered = true;
    a.stacks_pending = false;
    cv_.notify_all();
  } else if (std::holds_alternative<agent::DoneMessage>(msg)) {
    a.done = true;
    cv_.notify_all();
  } else if (const auto* error = std::get_if<agent::ErrorMessage>(&msg)) {
    if (error->code == "taken_over") a.taken_over = true;
    log::Get("run")->warn("agent {}: {} ({})", a.name, error->message, error->code);
  }
  // A heartbeat (between stack captures), a file (mirrored before) and anything else only count as
  // a sign of life.
}

}  // namespace dsd::coordinator
