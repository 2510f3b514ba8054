// The agent's side of `dsdoctor run`: a "run" request turns its connection into the job's stream
// (docs/agent-protocol.md). The agent starts the node's ranks, ticks them every sample_ms and
// sends what changed; the coordinator may send "stop" and "stacks". When the connection drops
// (the coordinator died) every rank is stopped: SIGTERM, then SIGKILL after 3 s.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "agent/agent.h"
#include "agent/request.h"
#include "collectors/log_dir_space.h"
#include "collectors/python_tracer.h"
#include "collectors/rank_monitor.h"
#include "collectors/stack.h"
#include "common/file.h"
#include "common/json_text.h"
#include "common/log.h"
#include "diagnosis/sample_delta.h"
#include "runtime/trace.h"

namespace dsd::agent {

using nlohmann::json;

namespace {
// A rank's new output rides in its sample up to this size; more goes in "log" frames of
// kLogChunkBytes, so no frame nears the 16 MiB limit however fast the ranks print.
constexpr size_t kInlineLogBytes = 256 << 10;
constexpr size_t kLogChunkBytes = 1 << 20;
}  // namespace

void Agent::ServeRun(net::Link& link, wire::FrameDecoder& decoder, const json& request) {
  auto log = log::Get("agent");
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string log_dir, cwd;
  int sample_ms = 200;
  std::vector<collectors::RankMonitor> ranks;
  try {
    argv = request.at("argv").get<std::vector<std::string>>();
    env = request.value("env", std::map<std::string, std::string>{});
    log_dir = request.at("log_dir").get<std::string>();
    cwd = request.value("cwd", std::string());
    sample_ms = std::clamp(request.value("sample_ms", 200), 20, 5000);
    if (argv.empty()) throw std::runtime_error("argv is empty");
    // What the agent writes (the log dir, logs, stacks) is private; its ranks keep the user's umask.
    UsePrivateUmask(request.value("share_group", false));
    std::error_code ec;
    std::filesystem::create_directories(log_dir, ec);
    if (ec) throw std::runtime_error("cannot create log dir " + log_dir + ": " + ec.message());
    for (const auto& r : request.at("ranks")) {
      int rank = r.at("rank").get<int>();
      std::string base = log_dir + "/rank-" + std::to_string(rank);
      ranks.emplace_back(rank, r.value("local_rank", 0), options_.name, base + ".log", base + ".trace");
    }
  } catch (const std::exception& e) {
    (void)net::SendFrame(link,
                         {{"type", "error"}, {"code", "bad_request"}, {"message", std::string("run: ") + e.what()}});
    return;
  }
  // Python ranks get the collective tracer unless the coordinator said no (run --no-trace).
  std::optional<collectors::PythonTracer> tracer;
  if (request.value("trace_python", true)) {
    tracer = collectors::FindPythonTracer();
    if (!tracer)
      log->warn("run: the Python collective tracer is not installed beside this binary; Python ranks run untraced");
  }
  // A node of hundreds of ranks needs more than the usual 1,024 descriptors.
  if (std::string low = collectors::RaiseOpenFileLimitFor(ranks.size()); !low.empty()) log->warn("run: {}", low);
  json started = json::array();
  size_t i = 0;
  for (const auto& r : request["ranks"]) {
    auto rank_env = env;
    for (const auto& [k, v] : r.value("env", std::map<std::string, std::string>{})) rank_env[k] = v;
    if (tracer) collectors::AddPythonTracer(*tracer, &rank_env);
    Status st = ranks[i].Start(argv, rank_env, cwd);
    if (!st.ok()) {
      for (auto& m : ranks) m.Signal(SIGKILL);
      (void)net::SendFrame(link, {{"type", "error"}, {"code", "spawn_failed"}, {"message", st.message()}});
      return;
    }
    started.push_back({{"rank", ranks[i].state().rank}, {"pid", ranks[i].state().pid}});
    ++i;
  }
  log->info("run: started {} ranks of {}", ranks.size(), argv[0]);
  if (!net::SendFrame(link, {{"type", "started"}, {"node", options_.name}, {"ranks", started}}).ok()) return;
  int64_t stop_deadline = 0;
  bool coordinator_gone = false;
  collectors::LogDirMonitor log_dir_monitor(log_dir, options_.name);
  // Each rank's sample carries only what changed since the one before (diagnosis/sample_delta.h),
  // when the coordinator reads deltas; an older one gets whole states.
  const bool send_deltas = request.value("sample_deltas", false);
  // Records as arrays when the coordinator reads them (checked by ValidateRequest).
  const bool compact_records = request.value("compact_records", false);
  // A coordinator that reads arrays also sends "resync" (they came together): keyframes can be
  // rare. An older one repairs a refused rank only at a keyframe: every 50 samples for it.
  std::vector<diagnosis::SampleDeltaWriter> deltas(
      ranks.size(), diagnosis::SampleDeltaWriter(compact_records, compact_records ? diagnosis::kKeyframeEvery
                                                                                  : diagnosis::kLegacyKeyframeEvery));
  while (true) {
    auto msg = net::RecvFrame(link, decoder, std::chrono::milliseconds(sample_ms));
    if (!msg.ok() && msg.status().code() != StatusCode::kTimeout && !coordinator_gone) {
      log->warn("run: coordinator connection lost ({}): stopping {} ranks", msg.status().message(), ranks.size());
      coordinator_gone = true;
      for (auto& m : ranks) m.Signal(SIGTERM);
      stop_deadline = runtime::TraceNowNs() + 3'000'000'000LL;
    } else if (msg.ok() && !ValidateRunStreamMessage(*msg).ok()) {
      log->warn("run: ignored a message from the coordinator: {}", ValidateRunStreamMessage(*msg).message());
    } else if (msg.ok()) {
      std::string type = msg->value("type", "");
      if (type == "stop") {
        int sig = msg->value("signal", SIGTERM);
        for (auto& m : ranks) m.Signal(sig);
        if (sig != SIGKILL && !stop_deadline) stop_deadline = runtime::TraceNowNs() + 3'000'000'000LL;
      } else if (type == "resync") {
        // The coordinator refused a delta of these ranks: their next entries are keyframes.
        for (int want : msg->value("ranks", std::vector<int>{}))
          for (size_t k = 0; k < ranks.size(); ++k)
            if (ranks[k].state().rank == want) deltas[k].Reset();
      } else if (type == "stacks") {
        json out = json::array();
        bool first = true;
        for (int want : msg->value("ranks", std::vector<int>{})) {
          for (auto& m : ranks) {
            if (m.state().rank != want || m.state().status != diagnosis::RankStatus::kRunning) continue;
            // A capture can take seconds: a heartbeat between ranks tells the coordinator we live.
            if (!first) (void)net::SendFrame(link, {{"type", "heartbeat"}, {"now_ns", runtime::TraceNowNs()}});
            first = false;
            bool python = argv[0].find("python") != std::string::npos;
            auto st = collectors::CaptureStack(m.state().pid, python);
            if (st.ok()) {
              std::string stack_file = "rank-" + std::to_string(want) + ".stack";
              if (Status w = WriteFileAtomic(log_dir + "/" + stack_file, "# " + st->tool + "\n" + st->text); !w.ok())
                log_dir_monitor.NoteWriteError(stack_file + ": " + w.message());
              out.push_back({{"rank", want}, {"tool", st->tool}, {"signature", st->signature}});
            } else {
              out.push_back({{"rank", want}, {"error", st.status().message()}});
            }
          }
        }
        json reply = {{"type", "stacks"}, {"stacks", out}};
        if (msg->contains("id")) reply["id"] = (*msg)["id"];  // the coordinator drops replies to older requests
        (void)net::SendFrame(link, reply);
      }
    }
    int64_t now = runtime::TraceNowNs();
    if (stop_deadline && now > stop_deadline) {
      for (auto& m : ranks) m.Signal(SIGKILL);
      stop_deadline = 0;
    }
    // The sample frame is written as text (common/json_text.h): built as a JSON tree and dumped,
    // it cost more than reading the ranks.
    std::string sample = "{\"type\":\"sample\",\"now_ns\":";
    jsontext::AppendInt(&sample, now);
    sample.append(",\"ranks\":[");
    std::vector<json> log_frames;  // output too big for one sample goes ahead of it in chunks
    bool all_exited = true;
    for (size_t k = 0; k < ranks.size(); ++k) {
      auto& m = ranks[k];
      std::string fresh;
      m.Tick(now, &fresh);
      if (k) sample.push_back(',');
      if (send_deltas) {
        deltas[k].EncodeTo(m.state(), &sample);
      } else {
        json s = diagnosis::ToJson(m.state());
        s["last_output_ns"] = m.state().last_output_ns;
        jsontext::AppendJson(&sample, s);
      }
      if (!fresh.empty()) {
        std::string text = collectors::SanitizeForStream(fresh);  // ASCII: any cut is a character boundary
        if (text.size() <= kInlineLogBytes) {
          sample.pop_back();  // the entry's closing brace: "log" is one more of its fields
          sample.append(",\"log\":");
          jsontext::AppendString(&sample, text);
          sample.push_back('}');
        } else {
          for (size_t at = 0; at < text.size(); at += kLogChunkBytes)
            log_frames.push_back({{"type", "log"}, {"rank", m.state().rank}, {"log", text.substr(at, kLogChunkBytes)}});
        }
      }
      all_exited &= m.state().status == diagnosis::RankStatus::kExited;
    }
    sample.push_back(']');
    for (auto& m : ranks)
      if (!m.write_error().empty()) log_dir_monitor.NoteWriteError(m.write_error());
    // The log dir's file system: a full disk is named, not guessed from silence.
    if (auto space = log_dir_monitor.Poll(now)) {
      sample.append(",\"log_dir\":");
      jsontext::AppendJson(&sample, diagnosis::ToJson(*space));
    }
    sample.push_back('}');
    // Only a broken connection means the coordinator is gone; a frame we could not encode costs
    // that frame, never the job.
    auto sent = [&](Status st, const char* type) {
      if (st.ok()) return;
      if (st.code() == StatusCode::kInvalidArgument) {
        log->warn("run: a {} frame was dropped: {}", type, st.message());
        // The coordinator never saw these deltas: the next sample restates every rank in full.
        if (std::string_view(type) == "sample")
          for (auto& d : deltas) d.Reset();
        return;
      }
      coordinator_gone = true;
      for (auto& m : ranks) m.Signal(SIGTERM);
      stop_deadline = now + 3'000'000'000LL;
    };
    for (const auto& f : log_frames)
      if (!coordinator_gone) sent(net::SendFrame(link, f), "log");
    if (!coordinator_gone) sent(net::SendFrameText(link, sample), "sample");
    if (all_exited) break;
  }
  if (!coordinator_gone) (void)net::SendFrame(link, {{"type", "done"}});
  log->info("run: every rank exited");
}

}  // namespace dsd::agent
