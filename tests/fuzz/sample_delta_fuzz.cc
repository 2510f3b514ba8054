// libFuzzer target for what the coordinator does with the rank entries of an agent's sample frames
// (diagnosis/sample_delta.cc, diagnosis/state.cc): each line of the input is one entry, applied to a
// reader that holds a rank's state, and to a fresh one. Any bytes must give a state or an error,
// never a crash or an exception; and whatever state a reader holds, a writer's keyframe and deltas
// of it must rebuild exactly that state in another reader. The coordinator's
// in-place reading must agree with the tree: an entry's text read by ApplyText leaves a reader where
// Apply of the parsed entry leaves another, and a line read as a sample frame by ScanSampleFrame has
// the parts SampleFrameFromJson finds in its tree (agent/run_protocol.cc).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/run_protocol.h"
#include "common/framing.h"
#include "diagnosis/sample_delta.h"

namespace {

using dsd::diagnosis::RankState;

RankState Primer() {
  RankState s;
  s.rank = 1;
  s.node = "node-1";
  s.pid = 42;
  s.status = dsd::diagnosis::RankStatus::kRunning;
  s.has_trace = true;
  s.proc.valid = true;
  s.proc.state = 'S';
  for (int i = 0; i < 4; ++i) {
    dsd::diagnosis::OpRecord r;
    r.op = "all_reduce";
    r.seq = static_cast<uint64_t>(i);
    r.state = i == 3 ? "started" : "completed";
    r.started_ns = 1000 * (i + 1);
    s.recent.push_back(r);
  }
  s.in_flight = s.recent.back();
  return s;
}

// What `reader` holds, sent through writers into fresh readers: the same state must come out.
void CheckRoundTrip(const dsd::diagnosis::SampleDeltaReader& reader) {
  RankState held;
  if (!reader.StateInto(&held).ok()) return;
  {
    dsd::diagnosis::SampleDeltaWriter w;
    dsd::diagnosis::SampleDeltaReader again;
    // A keyframe of the primer, then a delta to the held state: both paths of the writer.
    for (const RankState* s : {static_cast<const RankState*>(nullptr), static_cast<const RankState*>(&held)}) {
      static const RankState primer = Primer();
      auto entry = dsd::wire::ParseJsonBounded(w.Encode(s ? *s : primer).dump());
      if (!entry.ok() || !again.Apply(*entry).ok()) std::abort();
    }
    auto got = again.State();
    if (!got.ok() || dsd::diagnosis::ToJson(*got) != dsd::diagnosis::ToJson(held)) std::abort();
  }
}

// The same state in both readers (ToJson holds every field and the window).
void CheckSame(const dsd::diagnosis::SampleDeltaReader& a, const dsd::diagnosis::SampleDeltaReader& b) {
  auto x = a.State(), y = b.State();
  if (x.ok() != y.ok()) std::abort();
  if (x.ok() && dsd::diagnosis::ToJson(*x) != dsd::diagnosis::ToJson(*y)) std::abort();
}

// A line read as a sample frame in place must be one, with the parts its tree has.
void CheckFrame(std::string_view line) {
  dsd::agent::SampleFrameText text, tree;
  if (!dsd::agent::ScanSampleFrame(line, &text)) return;
  auto parsed = dsd::wire::ParseFramePayload(line);
  if (!parsed.ok() || !dsd::agent::SampleFrameFromJson(*parsed, &tree)) std::abort();
  if (text.now_ns != tree.now_ns || text.entries.size() != tree.entries.size()) std::abort();
  for (size_t i = 0; i < text.entries.size(); ++i) {
    auto a = dsd::wire::ParseJsonBounded(text.entries[i].text), b = dsd::wire::ParseJsonBounded(tree.entries[i].text);
    if (text.entries[i].rank != tree.entries[i].rank || !a.ok() || !b.ok() || *a != *b) std::abort();
  }
  if (text.log_dir.empty() != tree.log_dir.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  dsd::diagnosis::SampleDeltaReader primed, primed_text;
  {
    dsd::diagnosis::SampleDeltaWriter w(true);
    std::string key;
    w.EncodeTo(Primer(), &key);
    auto parsed = dsd::wire::ParseJsonBounded(key);
    std::string log;
    if (!parsed.ok() || !primed.Apply(*parsed).ok() || !primed_text.ApplyText(key, &log).ok()) std::abort();
  }
  int lines = 0;
  while (!bytes.empty() && lines++ < 32) {
    size_t end = bytes.find('\n');
    std::string_view line = bytes.substr(0, end);
    bytes = end == std::string_view::npos ? std::string_view() : bytes.substr(end + 1);
    CheckFrame(line);
    auto entry = dsd::wire::ParseJsonBounded(line);
    std::string log;
    const dsd::Status text_status = primed_text.ApplyText(line, &log);
    if (!entry.ok()) {
      if (text_status.ok() || primed_text.primed()) std::abort();  // refused, and deltas with it
      primed = primed_text;                                        // in step again for the next line
      continue;
    }
    const dsd::Status tree_status = primed.Apply(*entry);
    if (tree_status.ok() != text_status.ok() || primed.primed() != primed_text.primed()) std::abort();
    CheckSame(primed, primed_text);
    const auto l = entry->is_object() ? entry->find("log") : entry->end();
    if (log != (tree_status.ok() && l != entry->end() && l->is_string() ? l->get<std::string>() : "")) std::abort();
    dsd::diagnosis::SampleDeltaReader fresh;
    (void)fresh.Apply(*entry);
    CheckRoundTrip(primed);
    CheckRoundTrip(fresh);
  }
  return 0;
}
