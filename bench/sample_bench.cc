// What `dsdoctor run` spends per rank per sample (every 200 ms), agent and coordinator, with the
// whole state in every sample (before deltas) and with deltas (diagnosis/sample_delta.h):
//   agent        RankMonitor::Tick on a real process and a real trace ring (4,096 records), then
//                encoding the rank's entry as JSON text (SampleDeltaWriter::EncodeTo, as the agent)
//   coordinator  finding the entries in the agent's sample frame and applying each to its rank's
//                reader (ScanSampleFrame, SampleDeltaReader::ApplyText), then reading the state out
// Each simulated training step adds 3 completed collectives to every rank's trace; a step comes
// every STEP_EVERY samples (2: 2.5 steps/s). Then the coordinator side alone for a 4,096-rank job,
// on one core.
// Usage: sample_bench [RANKS=64] [TICKS=50] [BIG_RANKS=4096] [STEP_EVERY=2] [WHOLE=1]
// (WHOLE=0 skips the whole-state encoding, for profiling the delta path alone)
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "agent/run_protocol.h"
#include "collectors/rank_monitor.h"
#include "diagnosis/sample_delta.h"
#include "runtime/trace.h"

namespace {

using namespace dsd;
using nlohmann::json;

double CpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

void Step(runtime::TraceWriter& w, uint64_t step) {
  static const char* sites[] = {"engine.backward", "engine.step", "train.py:42"};
  for (int k = 0; k < 3; ++k) {
    runtime::OpInfo op;
    op.op = runtime::Op::kAllReduce;
    op.dtype = runtime::DType::kFloat32;
    op.reduce = runtime::ReduceOp::kSum;
    op.seq = step * 3 + k;
    op.count = 1 << 20;
    op.bytes = 4 << 20;
    op.callsite = sites[k];
    w.Complete(w.Begin(op));
  }
  w.SetStep(step);
  w.Heartbeat();
}

struct Costs {
  double tick = 0, encode = 0, decode = 0;
  size_t bytes = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 64;
  const int ticks = argc > 2 ? std::atoi(argv[2]) : 50;
  const int big = argc > 3 ? std::atoi(argv[3]) : 4096;
  const int step_every = argc > 4 ? std::max(1, std::atoi(argv[4])) : 2;
  const bool whole_too = argc > 5 ? std::atoi(argv[5]) != 0 : true;
  char dir_template[] = "/tmp/dsdoctor-sample-bench.XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  std::vector<collectors::RankMonitor> monitors;
  std::vector<std::unique_ptr<runtime::TraceWriter>> writers;
  for (int r = 0; r < ranks; ++r) {
    monitors.emplace_back(r, r, "node-0", RunDir(dir));
    if (auto st = monitors.back().Start({"sleep", "600"}, {}, ""); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    runtime::TraceIdentity id;
    id.rank = r;
    id.world_size = ranks;
    auto w = runtime::TraceWriter::Create(RunDir(dir).RankTrace(r), id);
    if (!w.ok()) {
      std::fprintf(stderr, "%s\n", w.status().ToString().c_str());
      return 1;
    }
    writers.push_back(std::move(*w));
    for (uint64_t s = 0; s < 1400; ++s) Step(*writers.back(), s);  // a full ring
  }
  std::vector<diagnosis::SampleDeltaWriter> enc(ranks, diagnosis::SampleDeltaWriter());
  std::vector<diagnosis::SampleDeltaReader> dec(ranks);
  std::vector<diagnosis::RankState> held(ranks);
  Costs full, delta;
  uint64_t step = 1400;
  std::vector<std::string> big_entries;  // delta entries (text as sent), kept to replay for the big job
  for (int t = 0; t < ticks; ++t) {
    if (t % step_every == 0) {
      ++step;
      for (int r = 0; r < ranks; ++r) Step(*writers[r], step);
    }
    const int64_t now = static_cast<int64_t>(t + 1) * 200'000'000;
    // Each phase timed over all ranks at once, as the agent and the coordinator run them (one
    // clock read per rank would add its own microsecond to what is measured).
    std::vector<std::string> logs(ranks), wholes(ranks), parts(ranks);
    std::vector<json> entries(ranks);
    bool ok = true;
    double a = CpuUs();
    for (int r = 0; r < ranks; ++r) monitors[r].Tick(now, &logs[r]);
    double b = CpuUs();
    if (whole_too)
      for (int r = 0; r < ranks; ++r) wholes[r] = diagnosis::ToJson(monitors[r].state()).dump();
    double c = CpuUs();
    if (whole_too)
      for (int r = 0; r < ranks; ++r) ok &= diagnosis::RankStateFromJson(json::parse(wholes[r])).ok();
    double d = CpuUs();
    for (int r = 0; r < ranks; ++r) enc[r].EncodeTo(monitors[r].state(), &parts[r]);
    double e = CpuUs();
    // The agent's frame (agent/agent_run.cc writes it so), as the coordinator reads it.
    std::string frame = "{\"type\":\"sample\",\"now_ns\":" + std::to_string(now) + ",\"ranks\":[";
    for (int r = 0; r < ranks; ++r) frame += (r ? "," : "") + parts[r];
    frame += "]}";
    agent::SampleFrameText scanned;
    std::string fresh;
    double e2 = CpuUs();
    ok &= agent::ScanSampleFrame(frame, &scanned) && scanned.entries.size() == static_cast<size_t>(ranks);
    for (int r = 0; ok && r < ranks; ++r) {
      ok &= dec[r].ApplyText(scanned.entries[r].text, &fresh).ok();
      ok &= dec[r].StateInto(&held[r]).ok();  // as the coordinator does
    }
    double f = CpuUs();
    for (int r = 0; r < ranks; ++r) entries[r] = json::parse(parts[r]);
    if (!ok) {
      std::fprintf(stderr, "tick %d: decode failed\n", t);
      return 1;
    }
    if (t > 0) {  // the first tick is each rank's keyframe
      full.tick += b - a, delta.tick += b - a;
      full.encode += c - b, full.decode += d - c;
      delta.encode += e - d, delta.decode += f - e2;
      for (int r = 0; r < ranks; ++r) full.bytes += wholes[r].size(), delta.bytes += parts[r].size();
      if (t % step_every == 0)
        for (int r = 0; r < ranks; ++r)
          if (!entries[r].value("full", false)) big_entries.push_back(parts[r]);  // deltas, not keyframes
    }
  }
  const double n = static_cast<double>(ranks) * (ticks - 1);
  auto print = [&](const char* name, const Costs& c) {
    const double agent = (c.tick + c.encode) / n, coord = c.decode / n;
    std::printf(
        "%-6s  bytes/rank %6.0f  agent %6.1f us (tick %5.1f + encode %5.1f)  coordinator %6.1f us  "
        "=> %.4f %% of a core per rank at 5 Hz\n",
        name, c.bytes / n, agent, c.tick / n, c.encode / n, coord, (agent + coord) * 5 / 1e6 * 100);
  };
  std::printf("%d ranks (real processes, 4096-record trace rings), %d samples each, a step every %d samples\n", ranks,
              ticks - 1, step_every);
  if (whole_too) print("whole", full);
  print("delta", delta);
  // The coordinator alone for a big job: every rank's reader primed, then one tick of deltas each.
  std::vector<diagnosis::SampleDeltaReader> readers(big);
  std::vector<diagnosis::RankState> big_held(big);
  {
    diagnosis::SampleDeltaWriter w;
    std::string text;
    w.EncodeTo(monitors[0].state(), &text);
    json key = json::parse(text);
    for (auto& rd : readers) (void)rd.Apply(key);
  }
  std::vector<std::string> texts;
  if (big_entries.empty()) {
    std::fprintf(stderr, "no sample with a step was recorded: raise TICKS\n");
    return 1;
  }
  // Entries of a tick with a step (the busier kind), from the last such tick.
  big_entries.erase(big_entries.begin(), big_entries.end() - std::min<long>(ranks, big_entries.size()));
  // Frames of 8 ranks (a node of 8 GPUs), each entry a delta some rank of the small job sent.
  constexpr int kPerAgent = 8;
  for (int r = 0; r < big; r += kPerAgent) {
    std::string frame = "{\"type\":\"sample\",\"now_ns\":1,\"ranks\":[";
    for (int k = r; k < std::min(big, r + kPerAgent); ++k)
      frame += (k > r ? "," : "") + big_entries[k % big_entries.size()];
    texts.push_back(frame + "]}");
  }
  // Replaying the same delta keeps each reader valid: it drops and keeps what a real one would.
  double a = CpuUs();
  const int big_ticks = 5;
  agent::SampleFrameText scanned;
  std::string fresh;
  for (int t = 0; t < big_ticks; ++t)
    for (size_t f = 0; f < texts.size(); ++f) {
      if (!agent::ScanSampleFrame(texts[f], &scanned)) return 1;
      for (size_t k = 0; k < scanned.entries.size(); ++k) {
        const size_t r = f * kPerAgent + k;
        (void)readers[r].ApplyText(scanned.entries[k].text, &fresh);
        (void)readers[r].StateInto(&big_held[r]);
      }
    }
  double per_tick = (CpuUs() - a) / big_ticks;
  std::printf("coordinator, %d ranks: %.1f ms CPU per sample tick => %.1f %% of one core at 5 Hz (%.4f %% per rank)\n",
              big, per_tick / 1e3, per_tick * 5 / 1e6 * 100, per_tick * 5 / 1e6 * 100 / big);
  for (auto& m : monitors) m.Signal(SIGKILL);
  for (auto& m : monitors) {
    std::string log;
    for (int i = 0; i < 100 && m.state().status == diagnosis::RankStatus::kRunning; ++i) {
      m.Tick(0, &log);
      ::usleep(1000);
    }
  }
  std::filesystem::remove_all(dir);
  return 0;
}
