#include "coordinator/rank_source.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>

#include "collectors/log_dir_space.h"
#include "collectors/python_tracer.h"
#include "collectors/stack.h"
#include "common/file.h"
#include "common/log.h"

namespace dsd::coordinator {

namespace {

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

Status DirectSource::Start(const std::vector<RankLaunch>& launches, const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& env, const std::string& log_dir,
                           const std::string& cwd, bool trace_python) {
  python_ = argv[0].find("python") != std::string::npos;
  if (std::string low = collectors::RaiseOpenFileLimitFor(launches.size()); !low.empty())
    log::Get("run")->warn("{}", low);
  if (!launches.empty()) log_dir_monitor_.emplace(log_dir, launches.front().node);
  std::optional<collectors::PythonTracer> tracer;
  if (trace_python && !(tracer = collectors::FindPythonTracer()))
    log::Get("run")->warn(
        "the Python collective tracer is not installed beside this binary; Python ranks run untraced");
  for (const auto& l : launches) {
    std::string base = log_dir + "/rank-" + std::to_string(l.rank);
    monitors_.emplace_back(l.rank, l.local_rank, l.node, base + ".log", base + ".trace");
    auto e = env;
    for (const auto& [k, v] : l.env) e[k] = v;
    if (tracer) collectors::AddPythonTracer(*tracer, &e);
    DSD_RETURN_IF_ERROR(monitors_.back().Start(argv, e, cwd));
  }
  return Status::Ok();
}

void DirectSource::Tick(int64_t now, std::vector<diagnosis::RankState>& ranks, std::vector<std::string>& logs) {
  for (auto& m : monitors_) {
    m.Tick(now, &logs[m.state().rank]);
    Adopt(ranks[m.state().rank], m.state());
    if (log_dir_monitor_ && !m.write_error().empty()) log_dir_monitor_->NoteWriteError(m.write_error());
  }
  if (log_dir_monitor_)
    if (auto space = log_dir_monitor_->Poll(now)) log_dir_status_ = std::move(*space);
}

std::vector<diagnosis::LogDirStatus> DirectSource::LogDirs() const {
  if (!log_dir_status_) return {};
  return {*log_dir_status_};
}

void DirectSource::Signal(int sig) {
  for (auto& m : monitors_) m.Signal(sig);
}

std::map<int, std::string> DirectSource::Stacks(const std::vector<int>& want) {
  std::map<int, std::string> out;
  for (int r : want) {
    auto& m = monitors_[r];
    if (m.state().status != diagnosis::RankStatus::kRunning) continue;
    auto st = collectors::CaptureStack(m.state().pid, python_);
    if (!st.ok()) continue;
    out[r] = st->signature;
    (void)WriteFileAtomic(m.log_path().substr(0, m.log_path().size() - 4) + ".stack",
                          "# " + st->tool + "\n" + st->text);
  }
  return out;
}

AgentSource::~AgentSource() {
  for (auto& a : agents_) a->client.link().Shutdown();
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

Status AgentSource::Start(std::vector<agent::AgentClient> clients, const std::vector<std::vector<RankLaunch>>& per_node,
                          const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                          const std::string& log_dir, const std::string& cwd, bool trace_python, bool share_group) {
  const int sample_ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(options_.sample_period).count());
  for (size_t i = 0; i < clients.size(); ++i) {
    auto a = std::make_unique<Agent>(std::move(clients[i]));
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& l : per_node[i]) {
      ranks.push_back({{"rank", l.rank}, {"local_rank", l.local_rank}, {"env", l.env}});
      a->ranks.push_back(l.rank);
    }
    nlohmann::json req = {{"type", "run"},
                          {"argv", argv},
                          {"env", env},
                          {"log_dir", log_dir},
                          {"cwd", cwd},
                          {"ranks", ranks},
                          {"sample_ms", sample_ms},
                          {"trace_python", trace_python},
                          {"share_group", share_group},
                          {"sample_deltas", true},     // we read deltas; whole states from older agents too
                          {"compact_records", true}};  // and records as arrays (objects from older agents)
    DSD_RETURN_IF_ERROR(net::SendFrame(a->client.link(), req));
    auto reply = net::RecvFrame(a->client.link(), a->client.decoder(), std::chrono::seconds(30));
    if (!reply.ok()) return Unavailable("agent " + a->client.agent_name() + ": " + reply.status().message());
    if (!reply->contains("type") || (*reply)["type"] != "started") {
      const auto m = reply->find("message");
      return Unavailable("agent " + a->client.agent_name() + " could not start its ranks: " +
                         (m != reply->end() && m->is_string() ? m->get<std::string>() : reply->dump()));
    }
    a->last_frame = a->last_live = clock_->Now();
    Agent* raw = a.get();
    agents_.push_back(std::move(a));
    raw->reader = std::thread([this, raw] { Read(*raw); });
  }
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
  std::vector<std::pair<net::Link*, nlohmann::json>> resyncs;  // sent after unlocking: a send may block
  {
    std::lock_guard<std::mutex> lock(mu_);
    TickLocked(ranks, logs);
    for (auto& a : agents_) {
      if (a->resync.empty()) continue;
      // Refused deltas: the agent restates those ranks in full (agents before "resync" ignore it
      // and send their periodic keyframe).
      if (a->connected && !a->done)
        resyncs.emplace_back(&a->client.link(), nlohmann::json{{"type", "resync"}, {"ranks", a->resync}});
      a->resync.clear();
    }
  }
  for (const auto& [link, request] : resyncs) (void)net::SendFrame(*link, request);
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
  return out;
}

std::vector<AgentHealth> AgentSource::Health() const {
  std::lock_guard<std::mutex> lock(mu_);
  MonoTime now = clock_->Now();
  std::vector<AgentHealth> out;
  for (const auto& a : agents_) {
    AgentHealth h{a->client.agent_name(), a->ranks, a->connected, a->done, Lost(*a, now), 0, a->why};
    if (!a->done) h.silent_s = std::max(0.0, std::chrono::duration<double>(now - a->last_frame).count());
    out.push_back(std::move(h));
  }
  return out;
}

void AgentSource::Signal(int sig) {
  std::vector<net::Link*> links;  // agents_ never shrinks while the source lives
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& a : agents_)
      if (a->connected && !a->done) links.push_back(&a->client.link());
  }
  for (net::Link* link : links) (void)net::SendFrame(*link, {{"type", "stop"}, {"signal", sig}});
}

std::map<int, std::string> AgentSource::Stacks(const std::vector<int>& want) {
  std::vector<Agent*> asked;
  std::vector<std::pair<net::Link*, nlohmann::json>> requests;  // sent after unlocking: a send may block
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
      if (mine.empty()) continue;
      asked.push_back(a.get());
      a->stacks_pending = true;
      requests.emplace_back(&a->client.link(), nlohmann::json{{"type", "stacks"}, {"id", id}, {"ranks", mine}});
    }
  }
  for (const auto& [link, request] : requests) (void)net::SendFrame(*link, request);
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

void AgentSource::Read(Agent& a) {
  auto log = log::Get("run");
  diagnosis::SampleFrameText sample;  // its entries' storage is reused frame after frame
  while (true) {
    // Sample frames, nearly all of them, are read in place (diagnosis::ScanSampleFrame); any other
    // frame, or one of another shape, is parsed as a JSON tree.
    auto text = net::RecvFrameText(a.client.link(), a.client.decoder(), std::chrono::seconds(3600));
    const bool in_place = text.ok() && diagnosis::ScanSampleFrame(*text, &sample);
    Result<nlohmann::json> msg = nlohmann::json();
    if (!text.ok())
      msg = text.status();
    else if (!in_place)
      msg = wire::ParseFramePayload(*text);
    if (!msg.ok()) {
      if (msg.status().code() == StatusCode::kTimeout) continue;
      // Shut the socket down whatever the error (a broken stream too), so the agent sees it and
      // stops its ranks rather than blocking on a coordinator that no longer reads.
      a.client.link().Shutdown();
      std::lock_guard<std::mutex> lock(mu_);
      // The agent is gone (killed, its node down) or the link broke. Its ranks' fate is unknown:
      // they keep their last state, and no exit code is made up for them.
      if (!a.done) {
        a.connected = false;
        a.why = "connection lost: " + msg.status().message();
        log->warn("agent {}: {}", a.client.agent_name(), a.why);
      }
      cv_.notify_all();
      return;
    }
    const bool live = !a.client.link().HasPendingInput() && a.client.decoder().buffered() == 0;
    std::lock_guard<std::mutex> lock(mu_);
    a.last_frame = clock_->Now();
    try {
      if (in_place) {
        ++reads_.frames_in_place;
        HandleSample(a, sample, live);
      } else {
        Handle(a, *msg, live);
      }
    } catch (const nlohmann::json::exception& e) {
      // An agent's frame of the wrong shape degrades that frame, never the coordinator.
      log->warn("agent {}: ignoring a malformed frame: {}", a.client.agent_name(), e.what());
    }
  }
}

void AgentSource::HandleSample(Agent& a, const diagnosis::SampleFrameText& frame, bool live) {
  if (live) a.last_live = a.last_frame;
  std::string fresh;  // a rank's output that came with its entry
  for (const auto& entry : frame.entries) {
    const int r = entry.rank;
    if (std::find(a.ranks.begin(), a.ranks.end(), r) == a.ranks.end()) continue;
    // Each entry holds what changed since the rank's previous one (diagnosis/sample_delta.h).
    auto& reader = deltas_[r];
    fresh.clear();
    const Status applied = reader.ApplyText(entry.text, &fresh);
    ++(reader.last_in_place() ? reads_.entries_in_place : reads_.entries_parsed);
    if (!applied.ok()) {
      if (delta_refused_.insert(r).second) {  // once until one applies again: never a line per tick
        log::Get("run")->warn("agent {}: ignoring rank {}'s samples until it restates them: {}", a.client.agent_name(),
                              r, applied.message());
        a.resync.push_back(r);
      }
      continue;
    }
    delta_refused_.erase(r);
    if (reader.rank() != r) continue;
    // The state itself is read out at the next Tick (TickLocked).
    if (frame.now_ns)
      sampled_at_[r] = *frame.now_ns;
    else
      sampled_at_.erase(r);
    if (!fresh.empty()) pending_log_[r] += fresh;
  }
  if (!frame.log_dir.empty()) {
    if (auto space = wire::ParseJsonBounded(frame.log_dir); space.ok()) {
      if (auto d = diagnosis::LogDirStatusFromJson(*space); d.ok()) {
        d->node = a.client.agent_name();  // the node is who we connected to, whatever the frame says
        a.log_dir = std::move(*d);
      }
    }
  }
}

void AgentSource::Handle(Agent& a, const nlohmann::json& msg, bool live) {
  const auto type = msg.find("type");
  if (type == msg.end() || !type->is_string()) return;
  if (*type == "sample") {
    diagnosis::SampleFrameText frame;
    (void)diagnosis::SampleFrameFromJson(msg, &frame);
    ++reads_.frames_parsed;
    HandleSample(a, frame, live);
  } else if (*type == "log") {
    // A rank's output that did not fit its sample: it comes first, in order.
    const auto rank = msg.find("rank");
    const auto text = msg.find("log");
    if (rank != msg.end() && rank->is_number_integer() && text != msg.end() && text->is_string() &&
        std::find(a.ranks.begin(), a.ranks.end(), rank->get<int>()) != a.ranks.end())
      pending_log_[rank->get<int>()] += text->get<std::string>();
  } else if (*type == "stacks") {
    // A reply to an earlier request that timed out describes ranks as they were then: dropped.
    const auto id = msg.find("id");
    if (id != msg.end() && (!id->is_number_integer() || id->get<int64_t>() != stacks_id_)) return;
    const auto list = msg.find("stacks");
    if (list != msg.end() && list->is_array())
      for (const auto& s : *list)
        if (s.is_object() && s.contains("signature") && s["signature"].is_string() && s.contains("rank") &&
            s["rank"].is_number_integer())
          stacks_[s["rank"].get<int>()] = s["signature"].get<std::string>();
    a.stacks_answered = true;
    a.stacks_pending = false;
    cv_.notify_all();
  } else if (*type == "done") {
    a.done = true;
    cv_.notify_all();
  }
  // "heartbeat" (between stack captures) and anything else only count as a sign of life.
}

}  // namespace dsd::coordinator
