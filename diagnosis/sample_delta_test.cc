#include "diagnosis/sample_delta.h"

#include <gtest/gtest.h>

#include <random>

#include "common/framing.h"

namespace dsd::diagnosis {
namespace {

using nlohmann::json;

OpRecord Record(int64_t started_ns, uint64_t seq, const std::string& state = "completed") {
  OpRecord r;
  r.op = "all_reduce";
  r.seq = seq;
  r.dtype = "float32";
  r.reduce = "sum";
  r.count = 1024;
  r.bytes = 4096;
  r.callsite = "engine.step";
  r.state = state;
  r.started_ns = started_ns;
  r.ended_ns = state == "completed" ? started_ns + 500 : 0;
  return r;
}

RankState Running(int rank) {
  RankState s;
  s.rank = rank;
  s.node = "node-1";
  s.pid = 4242;
  s.status = RankStatus::kRunning;
  s.has_trace = true;
  s.phase = "train";
  s.proc.valid = true;
  s.proc.state = 'R';
  s.proc.wchan = "0";
  return s;
}

// A reader of parsed entries (Apply) and one of their text (ApplyText, as the coordinator reads
// them), fed the same entries.
struct Readers {
  SampleDeltaReader tree, text;
};

// Writer → JSON text → readers, as on the wire; both must hold exactly the writer's state. The
// writer's text is read in place unless its strings hold bytes above 0x7f (`in_place` false).
void Deliver(SampleDeltaWriter& w, Readers& r, const RankState& s, size_t* bytes = nullptr, bool in_place = true) {
  std::string text;
  w.EncodeTo(s, &text);
  if (bytes) *bytes = text.size();
  const json entry = json::parse(text);
  ASSERT_TRUE(r.tree.Apply(entry).ok()) << r.tree.Apply(entry).ToString();
  std::string log;
  ASSERT_TRUE(r.text.ApplyText(text, &log).ok()) << text;
  if (in_place) {
    EXPECT_TRUE(r.text.last_in_place()) << text;
  }
  for (const SampleDeltaReader* reader : {&r.tree, &r.text}) {
    auto got = reader->State();
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(ToJson(*got), ToJson(s));
  }
}

TEST(SampleDeltaTest, DeltasRebuildEveryStateAndCarryOnlyWhatChanged) {
  SampleDeltaWriter w;
  Readers r;
  RankState s = Running(3);
  int64_t t = 1000;
  for (int i = 0; i < 64; ++i) s.recent.push_back(Record(t += 1000, i));
  size_t full_bytes = 0, bytes = 0;
  Deliver(w, r, s, &full_bytes);
  // A quiet tick: nothing changed but the sample time.
  s.sample_ns = 77;
  Deliver(w, r, s, &bytes);
  EXPECT_LT(bytes, 40u) << "only rank and sample_ns";
  // A step: the oldest record falls out of the window, a new one starts (in flight).
  s.recent.erase(s.recent.begin());
  s.recent.push_back(Record(t += 1000, 64, "started"));
  s.in_flight = s.recent.back();
  s.step = 1;
  Deliver(w, r, s, &bytes);
  EXPECT_LT(bytes * 8, full_bytes) << "one record and a few fields, not the window";
  // It completes in place, and the in-flight call is gone.
  s.recent.back().state = "completed";
  s.recent.back().ended_ns = t + 10;
  s.last = s.recent.back();
  s.in_flight.reset();
  Deliver(w, r, s);
  // Three at once, two of them pushing out the oldest.
  for (int i = 0; i < 3; ++i) s.recent.push_back(Record(t += 1000, 65 + i));
  s.recent.erase(s.recent.begin(), s.recent.begin() + 2);
  Deliver(w, r, s);
  // Its process exits: proc goes away, exit fields appear.
  s.status = RankStatus::kExited;
  s.proc.valid = false;
  s.exit_code = 1;
  s.exit_ns = t;
  Deliver(w, r, s);
  // The trace is replaced by one with nothing in common (a restarted rank).
  s.recent = {Record(1, 0), Record(2, 1)};
  Deliver(w, r, s);
  s.recent.clear();
  Deliver(w, r, s);
}

// Every field of the state changes now and then, records come, change and leave, the process
// exits and starts again: the reader holds exactly the writer's state after every entry.
TEST(SampleDeltaTest, RandomHistoriesStayInStep) {
  std::mt19937 rng(7);
  SampleDeltaWriter w;
  Readers r;
  RankState s = Running(0);
  int64_t t = 0;
  uint64_t seq = 0;
  auto maybe = [&](int one_in) { return rng() % one_in == 0; };
  for (int tick = 0; tick < 500; ++tick) {
    int added = static_cast<int>(rng() % 4);
    for (int i = 0; i < added; ++i) s.recent.push_back(Record(t += 100, seq++, rng() % 3 ? "completed" : "started"));
    if (!s.recent.empty() && rng() % 2) s.recent[rng() % s.recent.size()].state = "failed";
    if (!s.recent.empty() && maybe(5)) s.recent.back().async = !s.recent.back().async;
    while (s.recent.size() > 64) s.recent.erase(s.recent.begin());
    s.in_flight = rng() % 2 && !s.recent.empty() ? std::optional(s.recent.back()) : std::nullopt;
    s.last = maybe(3) || s.recent.empty() ? std::nullopt : std::optional(s.recent.back());
    s.proc.valid = rng() % 5 != 0;
    s.proc.state = "RSD"[rng() % 3];
    s.proc.wchan = maybe(2) ? "futex_wait_queue" : "0";
    s.proc.cpu_fraction = (rng() % 100) / 100.0;
    s.proc.flat_for_s = (rng() % 1000) / 10.0;
    s.proc.tree_cpu_s += (rng() % 10) / 100.0;
    s.last_error = rng() % 7 ? "" : "timeout " + std::to_string(tick);
    s.stack = maybe(9) ? "frame " + std::to_string(tick) : "";
    if (maybe(20)) {  // it exits, or starts again
      s.status = s.status == RankStatus::kExited ? RankStatus::kRunning : RankStatus::kExited;
      s.exit_code = static_cast<int>(rng() % 3);
      s.signal = maybe(2) ? 9 : 0;
      s.exit_ns = t;
      s.pid += 1;
    }
    if (maybe(4)) s.step += 1, s.phase = maybe(2) ? "forward" : "optimizer", s.phase_ns = t;
    if (maybe(3)) s.heartbeat_ns = t;
    s.watchdog_fired = maybe(10);
    s.finished = maybe(15);
    s.has_trace = !maybe(30);
    s.node = maybe(40) ? "node-2" : "node-1";
    s.local_rank = maybe(40) ? 1 : 0;
    s.last_output_ns = maybe(3) ? t : s.last_output_ns;
    s.unobserved = maybe(12);
    s.sample_ns = maybe(25) ? 0 : tick;
    Deliver(w, r, s);
    if (HasFailure()) return;
  }
}

// The writer compares fields on the structs with its own table: its keyframe must name exactly
// the fields ToJson writes, with the same values (a field added to ToJson and not to the table
// fails here).
TEST(SampleDeltaTest, AKeyframeHoldsExactlyToJsonsFields) {
  for (bool exited : {false, true}) {
    RankState s = Running(5);
    s.status = exited ? RankStatus::kExited : RankStatus::kRunning;
    s.exit_code = 3, s.signal = 6, s.exit_ns = 99;
    s.in_flight = Record(10, 1, "started");
    s.last = Record(10, 1, "started");
    s.step = 4, s.phase = "backward", s.phase_ns = 7, s.heartbeat_ns = 8;
    s.watchdog_fired = true, s.finished = true, s.last_error = "boom", s.stack = "f\ng";
    s.last_output_ns = 11, s.sample_ns = 12, s.unobserved = true;
    s.proc.cpu_fraction = 0.5, s.proc.flat_for_s = 1.5, s.proc.tree_cpu_s = 2.5;
    json key = SampleDeltaWriter().Encode(s);
    key.erase("full");
    key.erase("recent_tail");
    json expected = ToJson(s, /*with_recent=*/false);
    expected["in_flight"] = ToCompactJson(*s.in_flight);  // records travel as arrays
    expected["last"] = ToCompactJson(*s.last);
    EXPECT_EQ(key, expected) << (exited ? "exited" : "running");
  }
}

// Entries are written as text (common/json_text.h), not dumped from a tree: whatever a rank's
// strings hold (quotes, control characters, non-ASCII, bytes that are not UTF-8) must arrive as
// JSON would carry them, and doubles exactly.
TEST(SampleDeltaTest, TextEntriesCarryAnyStringAndExactDoubles) {
  {
    SampleDeltaWriter w;
    Readers r;
    RankState s = Running(2);
    s.node = "n\u00f6de \"1\"";
    s.phase = "a\tb\\c";
    s.stack = "f (x.py:1)\n< g (y.py:2)\x01";
    s.proc.wchan = "do_epoll_wait";
    s.proc.cpu_fraction = 1.0 / 3, s.proc.flat_for_s = 1e-9, s.proc.tree_cpu_s = 123456.789;
    OpRecord odd = Record(10, 1, "started");
    odd.callsite = "say \"hi\" \u20ac";
    s.recent.push_back(odd);
    s.in_flight = odd;
    Deliver(w, r, s, nullptr, /*in_place=*/false);  // bytes above 0x7f: parsed, not read in place
    s.recent.push_back(Record(20, 2));
    s.recent.back().callsite = "back\\slash\x7f";
    s.last_error = "line one\nline two";
    Deliver(w, r, s, nullptr, /*in_place=*/false);  // bytes above 0x7f: parsed, not read in place
    // Bytes that are not UTF-8 become U+FFFD, as in every other frame (wire::EncodeFrame).
    s.recent.back().callsite = "cut \xe2\x82";
    s.stack = "\xff";
    ASSERT_TRUE(r.tree.Apply(json::parse(w.Encode(s).dump())).ok());
    auto got = r.tree.State();
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->recent.back().callsite, "cut \xef\xbf\xbd");
    EXPECT_EQ(got->stack, "\xef\xbf\xbd");
    EXPECT_EQ(got->proc.cpu_fraction, 1.0 / 3);
    EXPECT_EQ(got->node, s.node);
  }
}

TEST(SampleDeltaTest, RecordsAreArraysAndTheirErrorsNameTheElement) {
  RankState s = Running(1);
  for (int i = 0; i < 64; ++i) s.recent.push_back(Record(1000 + i, i));
  json arrays = SampleDeltaWriter().Encode(s);
  ASSERT_TRUE(arrays["recent_tail"][0].is_array());
  SampleDeltaReader r;
  ASSERT_TRUE(r.Apply(arrays).ok());
  EXPECT_EQ(ToJson(*r.State()), ToJson(s));
  json bad = arrays;
  bad["recent_tail"][3][1] = "five";  // seq as a string
  Status st = SampleDeltaReader().Apply(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("element 'seq' has the wrong type"), std::string::npos) << st.ToString();
  bad = arrays;
  bad["recent_tail"][0].erase(12);
  st = SampleDeltaReader().Apply(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("12 elements, not 13"), std::string::npos) << st.ToString();
  // Records as objects were the shape of protocol 2's agents: refused in a window.
  bad = arrays;
  bad["recent_tail"][0] = ToJson(Record(1000, 0));
  st = SampleDeltaReader().Apply(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("must be an array"), std::string::npos) << st.ToString();
}

// The coordinator keeps one state per rank and has the reader assign over it.
TEST(SampleDeltaTest, StateIntoAssignsTheHeldStateOverAnother) {
  SampleDeltaWriter w;
  SampleDeltaReader r;
  RankState out;
  EXPECT_FALSE(r.StateInto(&out).ok());
  EXPECT_EQ(r.rank(), -1);
  RankState s = Running(6);
  for (int i = 0; i < 10; ++i) s.recent.push_back(Record(100 + i, i));
  ASSERT_TRUE(r.Apply(w.Encode(s)).ok());
  out.recent = {Record(1, 1), Record(2, 2), Record(3, 3), Record(4, 4),   Record(5, 5),   Record(6, 6),
                Record(7, 7), Record(8, 8), Record(9, 9), Record(10, 10), Record(11, 11), Record(12, 12)};
  out.stack = "old";
  ASSERT_TRUE(r.StateInto(&out).ok());
  EXPECT_EQ(ToJson(out), ToJson(s));
  EXPECT_EQ(r.rank(), 6);
}

TEST(SampleDeltaTest, ARefusedEntryStopsDeltasUntilTheNextKeyframe) {
  SampleDeltaReader r;
  EXPECT_FALSE(r.Apply(json{{"rank", 1}, {"step", 3}}).ok()) << "a delta before any full state";
  SampleDeltaWriter w;
  RankState s = Running(1);
  s.recent = {Record(10, 0), Record(20, 1)};
  ASSERT_TRUE(r.Apply(w.Encode(s)).ok());
  Status st =
      r.Apply(json{{"rank", 1}, {"step", 9}, {"recent_drop", 1}, {"recent_keep", 5}, {"recent_tail", json::array()}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("drops 1 and keeps 5 of the 2 recent records held"), std::string::npos) << st.ToString();
  // The writer's base and the reader's differ from here: even a well-formed delta is refused...
  s.step = 4;
  EXPECT_FALSE(r.Apply(w.Encode(s)).ok());
  EXPECT_FALSE(r.primed());
  // Meanwhile the last state that applied is what the reader holds.
  ASSERT_TRUE(r.State().ok());
  EXPECT_EQ(r.State()->step, 0u);
  EXPECT_EQ(r.rank(), 1);
  // ...until the writer's periodic keyframe restates the rank.
  json entry = json::object();
  for (int i = 0; i < kKeyframeEvery && !entry.value("full", false); ++i) entry = w.Encode(s);
  ASSERT_TRUE(entry.value("full", false)) << "a keyframe within kKeyframeEvery samples";
  ASSERT_TRUE(r.Apply(entry).ok());
  EXPECT_EQ(ToJson(*r.State()), ToJson(s));
}

TEST(SampleDeltaTest, MalformedEntriesAreRefused) {
  SampleDeltaWriter w;
  RankState s = Running(1);
  s.recent = {Record(10, 0)};
  for (json bad :
       {json{{"rank", 1}, {"recent_drop", -1}, {"recent_tail", json::array()}},
        json{{"rank", 1}, {"status", "sleeping"}}, json{{"rank", 1}, {"recent_tail", {{{"op", 5}}}}},
        json{{"rank", 1}, {"full", "yes"}}, json::array(), json{{"rank", 1}, {"unset", "proc"}},
        // Numbers that do not fit their field: refused, never cast (a float out of range is UB).
        json{{"rank", 1}, {"exit_code", 1e30}}, json{{"rank", 1}, {"step", -1}}, json{{"rank", 1}, {"pid", 1.5}},
        json{{"rank", 1}, {"signal", int64_t{1} << 40}},
        json{{"rank", 1}, {"in_flight", {"barrier", 1e300, 0, "", "", 0, 0, -1, "x", "started", 1, 0, 0}}}}) {
    SampleDeltaReader r;
    ASSERT_TRUE(r.Apply(SampleDeltaWriter().Encode(s)).ok());
    EXPECT_FALSE(r.Apply(bad).ok()) << bad.dump();
  }
  // A window far larger than any agent keeps: refused, not held.
  SampleDeltaReader r;
  json huge = SampleDeltaWriter().Encode(s);
  huge["recent_tail"] = json::array();
  for (size_t i = 0; i <= kMaxHeldRecentRecords; ++i) huge["recent_tail"].push_back(ToJson(Record(i, i)));
  EXPECT_FALSE(r.Apply(huge).ok());
}

TEST(SampleDeltaTest, AResetWriterSendsAKeyframe) {
  SampleDeltaWriter w;
  RankState s = Running(2);
  EXPECT_TRUE(w.Encode(s).value("full", false));
  EXPECT_FALSE(w.Encode(s).value("full", false));
  w.Reset();
  json again = w.Encode(s);
  EXPECT_TRUE(again.value("full", false));
  // A keyframe replaces whatever a reader held, even a reader that has seen another history.
  SampleDeltaReader r;
  RankState other = Running(2);
  other.recent = {Record(5, 5)};
  other.last_error = "old";
  ASSERT_TRUE(r.Apply(SampleDeltaWriter().Encode(other)).ok());
  ASSERT_TRUE(r.Apply(again).ok());
  EXPECT_EQ(ToJson(*r.State()), ToJson(s));
}

// A whole state with its "recent" window was what agents before deltas sent (protocol 2): it is no
// keyframe now, so a reader that has nothing yet refuses it.
TEST(SampleDeltaTest, AWholeStateIsNotAKeyframe) {
  RankState s = Running(4);
  s.recent = {Record(10, 0), Record(20, 1, "started")};
  SampleDeltaReader r;
  EXPECT_FALSE(r.Apply(ToJson(s)).ok());
  EXPECT_FALSE(r.State().ok());
}

// What ApplyText reads in place it must read as Apply reads the parsed entry; what it does not
// take goes to Apply. Either way the two readers end in the same place: the same result, the same
// state, the same output. `in_place` says which path the entry must take.
struct TextCase {
  std::string text;
  bool in_place;
};

TEST(SampleDeltaTest, EntryTextReadsAsItsParsedTree) {
  RankState primer = Running(1);
  primer.recent = {Record(10, 0), Record(20, 1, "started")};
  primer.in_flight = primer.recent.back();
  const std::string rec = R"(["all_reduce",2,0,"float32","sum",1024,4096,-1,"engine.step","started",30,0,0])";
  const TextCase cases[] = {
      // As writers write them.
      {R"({"rank":1,"sample_ns":5})", true},
      {R"({"rank":1,"full":true,"node":"n","pid":7,"status":"exited","exit_code":3,"recent_tail":[)" + rec + "]}",
       true},
      {R"({"rank":1,"step":4,"recent_drop":1,"recent_keep":1,"recent_tail":[)" + rec + "],\"in_flight\":" + rec +
           R"(,"log":"a \"b\"\n\\ \u00e9\u0001"})",
       true},
      {R"({"rank":1,"unset":["in_flight","proc","exit_code"],"last":)" + rec + "}", true},
      {R"({"rank":1,"proc":{"cpu_fraction":0.25,"flat_for_s":1e-3,"state":"S","tree_cpu_s":12,"wchan":"futex"}})",
       true},
      // Spaces, any order but "full" first, integers as doubles where doubles go.
      {" {\n\"sample_ns\" : 6 ,\t\"rank\":1 , \"proc\":{\"state\":\"\",\"cpu_fraction\":-0}} ", true},
      {R"({"full":true,"rank":1,"phase":"x"})", true},
      {R"({"rank":1,"proc":{"cpu_fraction":18446744073709551615,"tree_cpu_s":-9223372036854775808}})", true},
      // Valid, but left to the tree: it reads them, and so the result is theirs.
      {R"({"rank":1,"phase":"x","full":true})", false},  // "full" after a field
      {R"({"rank":1,"step":1,"step":2})", false},        // a key twice: the tree keeps the last
      {R"({"rank":1,"rank":2})", false},
      {R"({"rank":1,"step":null})", false},                           // null: the field is left as it was
      {R"({"rank":1,"future_field":[1,{"a":2}]})", false},            // unknown fields are ignored there
      {R"({"rank":1,"node":"caf\u00e9 \ud83d\ude00"})", false},       // a surrogate pair
      {"{\"rank\":1,\"node\":\"caf\xc3\xa9\"}", false},               // UTF-8 in a string
      {R"({"rank":1,"in_flight":{"op":"barrier","seq":3}})", false},  // a record as an object
      {R"({"rank":1,"recent":[)" + rec + "]}", false},                // not a field of deltas: ignored there
      {R"({"rank":1,"proc":{"state":"R","extra":1}})", false},
      {R"({"rank":1,"proc":{"cpu_fraction":1e999}})", false},  // out of double's range
      {R"({"rank":1,"log":5})", false},
      {R"({"rank":1,"unset":["pro\u0063"]})", false},
      {R"({"rank":1})", true},
      // Refused by both.
      {R"({"rank":1,"step":-1})", false},
      {R"({"rank":1,"step":1.0})", false},
      {R"({"rank":1,"pid":2147483648})", false},
      {R"({"rank":1,"status":"sleeping"})", false},
      {R"({"rank":1,"full":"yes"})", false},
      {R"({"rank":1,"recent_drop":3,"recent_tail":[]})", false},
      {R"({"rank":1,"recent_keep":-1,"recent_tail":[]})", false},
      {R"({"rank":1,"last":["",1,0,"","",0,0,-1,"","",0,0,0]})", false},  // an empty op
      {R"({"rank":1,"last":["x",1,0,"","",0,0,-1,"","",0,0]})", false},   // 12 elements
      {R"({"rank":1,"unset":"proc"})", false},
      {R"({"rank":1,"sample_ns":5} x)", false},
      {R"({"rank":1,"sample_ns":5)", false},
      {R"({"rank":1,"node":"a)"
       "\x01"
       R"("})",
       false},
      {R"({"rank":01})", false},
      {"[1,2]", false},
      {"", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    Readers r;
    SampleDeltaWriter w;
    const json key = w.Encode(primer);
    ASSERT_TRUE(r.tree.Apply(key).ok());
    std::string ignored;
    ASSERT_TRUE(r.text.ApplyText(key.dump(), &ignored).ok());
    Status tree_status = InvalidArgument("not JSON");
    std::string tree_log;
    bool json_text = false;
    try {
      const json parsed = json::parse(c.text);
      json_text = true;
      tree_status = r.tree.Apply(parsed);
      if (tree_status.ok() && parsed.contains("log") && parsed["log"].is_string()) tree_log = parsed["log"];
    } catch (const json::exception&) {
    }
    std::string text_log = "before:";
    const Status text_status = r.text.ApplyText(c.text, &text_log);
    EXPECT_EQ(r.text.last_in_place(), c.in_place);
    EXPECT_EQ(text_status.ok(), tree_status.ok()) << text_status.ToString() << " / " << tree_status.ToString();
    EXPECT_EQ(text_log, "before:" + tree_log);
    // Text that is not JSON is refused like any entry that cannot be applied: the writer's base
    // and ours may differ from here on.
    EXPECT_EQ(r.text.primed(), json_text && r.tree.primed());
    auto a = r.tree.State(), b = r.text.State();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(ToJson(*b), ToJson(*a));
  }
}

}  // namespace
}  // namespace dsd::diagnosis
