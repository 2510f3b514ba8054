#include "agent/run_protocol.h"

#include <gtest/gtest.h>

#include "common/framing.h"
#include "common/strings.h"
#include "diagnosis/sample_delta.h"

namespace dsd::agent {
namespace {

using nlohmann::json;

RunRequest ARequest() {
  RunRequest r;
  r.argv = {"python3", "train.py"};
  r.env = {{"NCCL_DEBUG", "WARN"}};
  r.cwd = "/work";
  r.run_dir = "/tmp/logs";
  r.run_id = "abc123";
  r.sample_ms = 100;
  r.trace_python = false;
  r.python = true;
  r.share_group = true;
  r.stop_escalation_ms = 1500;
  r.ranks = {{0, 0, {{"RANK", "0"}}}, {1, 1, {{"RANK", "1"}}}};
  return r;
}

TEST(RunProtocolTest, ARunRequestReadsBackAsWritten) {
  const RunRequest w = ARequest();
  auto r = ReadRunRequest(WriteRunRequest(w));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->argv, w.argv);
  EXPECT_EQ(r->env, w.env);
  EXPECT_EQ(r->cwd, w.cwd);
  EXPECT_EQ(r->run_dir, w.run_dir);
  EXPECT_EQ(r->run_id, w.run_id);
  EXPECT_EQ(r->sample_ms, 100);
  EXPECT_FALSE(r->trace_python);
  EXPECT_TRUE(r->python);
  EXPECT_TRUE(r->share_group);
  EXPECT_EQ(r->stop_escalation_ms, 1500);
  ASSERT_EQ(r->ranks.size(), 2u);
  EXPECT_EQ(r->ranks[1].rank, 1);
  EXPECT_EQ(r->ranks[1].local_rank, 1);
  EXPECT_EQ(r->ranks[1].env.at("RANK"), "1");
}

// The reader is the check: each bad field is refused naming the message and the field.
TEST(RunProtocolTest, BadRunRequestsNameTheField) {
  struct Case {
    const char* name;
    std::function<void(json&)> spoil;
    const char* message;
  };
  const Case cases[] = {
      {"argv empty", [](json& j) { j["argv"] = json::array(); }, "run: field 'argv'"},
      {"argv missing", [](json& j) { j.erase("argv"); }, "field 'argv' is missing"},
      {"run_dir missing", [](json& j) { j.erase("run_dir"); }, "field 'run_dir' is missing"},
      {"run_dir empty", [](json& j) { j["run_dir"] = ""; }, "'run_dir' is empty"},
      {"env not strings",
       [](json& j) {
         j["env"] = {{"A", 1}};
       },
       "field 'env'"},
      {"rank negative", [](json& j) { j["ranks"][0]["rank"] = -1; }, "run.ranks[0]: field 'rank'"},
      {"rank missing", [](json& j) { j["ranks"][1].erase("rank"); }, "run.ranks[1]: field 'rank' is missing"},
      {"sample_ms zero", [](json& j) { j["sample_ms"] = 0; }, "field 'sample_ms'"},
      {"python not bool", [](json& j) { j["python"] = "yes"; }, "field 'python' must be true or false"},
      {"escalation negative", [](json& j) { j["stop_escalation_ms"] = -1; }, "field 'stop_escalation_ms'"},
      {"not a run", [](json& j) { j["type"] = "stop"; }, "not a run request"},
  };
  for (const auto& c : cases) {
    json j = WriteRunRequest(ARequest());
    c.spoil(j);
    auto r = ReadRunRequest(j);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << c.name << ": " << r.status().message();
  }
  EXPECT_FALSE(ReadRunRequest(json::array({1})).ok());
}

TEST(RunProtocolTest, AReattachRequestReadsBackAndBadOnesNameTheField) {
  ReattachRequest r{"run-7", {{0, 12}, {3, 4096}}};
  auto back = ReadReattachRequest(WriteReattachRequest(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->run_id, "run-7");
  EXPECT_EQ(back->have, (std::map<int, uint64_t>{{0, 12}, {3, 4096}}));
  auto no_id = ReadReattachRequest(json{{"type", "reattach"}});
  ASSERT_FALSE(no_id.ok());
  EXPECT_NE(no_id.status().message().find("run_id"), std::string::npos) << no_id.status().message();
  auto empty_id = ReadReattachRequest(json{{"type", "reattach"}, {"run_id", ""}});
  EXPECT_FALSE(empty_id.ok());
  auto bad_have = ReadReattachRequest(
      json{{"type", "reattach"}, {"run_id", "x"}, {"have", json::array({{{"rank", 0}, {"bytes", -1}}})}});
  ASSERT_FALSE(bad_have.ok());
  EXPECT_NE(bad_have.status().message().find("bytes"), std::string::npos) << bad_have.status().message();
  EXPECT_FALSE(ReadReattachRequest(json{{"type", "run"}, {"run_id", "x"}}).ok());
  EXPECT_FALSE(ReadReattachRequest(json("reattach")).ok());
}

TEST(RunProtocolTest, ARunRequestCarriesItsReattachWindow) {
  RunRequest r = ARequest();
  r.reattach_window_ms = 2500;
  auto back = ReadRunRequest(WriteRunRequest(r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->reattach_window_ms, 2500);
  json old = WriteRunRequest(r);
  old.erase("reattach_window_ms");  // a coordinator from before the field
  EXPECT_EQ(ReadRunRequest(old)->reattach_window_ms, kDefaultReattachWindowMs);
  old["reattach_window_ms"] = -1;
  EXPECT_FALSE(ReadRunRequest(old).ok());
}

TEST(RunProtocolTest, ControlMessagesReadBackAndBadOnesAreRefused) {
  for (const RunControl& m :
       {RunControl{StopMessage{9}}, RunControl{StacksRequest{7, {0, 3}}}, RunControl{ResyncMessage{{2}}}}) {
    auto r = ReadRunControl(WriteRunControl(m));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->index(), m.index());
  }
  auto stacks = ReadRunControl(WriteRunControl(StacksRequest{7, {0, 3}}));
  EXPECT_EQ(std::get<StacksRequest>(*stacks).id, 7);
  EXPECT_EQ(std::get<StacksRequest>(*stacks).ranks, (std::vector<int>{0, 3}));
  EXPECT_EQ(std::get<StacksRequest>(*stacks).flight_recorder_incident, 0) << "no dumps unless asked";
  auto with_dumps = ReadRunControl(WriteRunControl(StacksRequest{8, {}, 2}));
  ASSERT_TRUE(with_dumps.ok()) << with_dumps.status().ToString();
  EXPECT_EQ(std::get<StacksRequest>(*with_dumps).flight_recorder_incident, 2);
  EXPECT_TRUE(std::get<StacksRequest>(*with_dumps).ranks.empty()) << "a node with no stack to take still dumps";
  EXPECT_FALSE(ReadRunControl({{"type", "stacks"}, {"flight_recorder_incident", -1}}).ok());
  EXPECT_EQ(std::get<StopMessage>(*ReadRunControl({{"type", "stop"}})).signal, 15) << "SIGTERM by default";
  // Parsed JSON holds non-negative integers as unsigned: the lower bounds must hold for them too.
  EXPECT_FALSE(ReadRunControl(json::parse(R"({"type":"stop","signal":0})")).ok());
  EXPECT_FALSE(ReadRunControl({{"type", "stop"}, {"signal", "TERM"}}).ok());
  EXPECT_FALSE(ReadRunControl({{"type", "stacks"}, {"ranks", {-1}}}).ok());
  EXPECT_FALSE(ReadRunControl({{"type", "resync"}, {"ranks", "all"}}).ok());
  EXPECT_EQ(ReadRunControl({{"type", "run"}}).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(ReadRunControl(json::array()).status().code(), StatusCode::kInvalidArgument);
}

TEST(RunProtocolTest, AgentMessagesReadBackAsWritten) {
  const std::string raw_output("caf\xc3\xa9 \xff\x01\n", 9);  // any bytes: not UTF-8, control characters
  const AgentRunMessage messages[] = {
      StartedMessage{"node-1", {{2, 100}, {3, 101}}, true},
      LogMessage{3, raw_output},
      FileMessage{2, RankFile::kTrace, 4096, std::string("\0\1\2", 3), true, 8192},
      StacksReply{5, {{2, "py-spy", "barrier < main", ""}, {3, "", "", "ptrace not permitted"}}},
      HeartbeatMessage{123},
      DoneMessage{},
      ErrorMessage{"spawn_failed", "no such file"},
      FileMessage{5, RankFile::kFlightRecorder, 0, std::string("\x80\x02}", 3), true, 3, 2},
  };
  for (const auto& m : messages) {
    const json j = WriteAgentRunMessage(m);
    // Every message survives the wire's framing (valid UTF-8 JSON).
    auto frame = wire::EncodeFrame(j);
    ASSERT_TRUE(frame.ok()) << j.dump();
    auto r = ReadAgentRunMessage(j);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->index(), m.index());
  }
  auto started = std::get<StartedMessage>(*ReadAgentRunMessage(WriteAgentRunMessage(messages[0])));
  EXPECT_EQ(started.node, "node-1");
  EXPECT_TRUE(started.shared_run_dir);
  ASSERT_EQ(started.ranks.size(), 2u);
  EXPECT_EQ(started.ranks[1].pid, 101);
  EXPECT_EQ(std::get<LogMessage>(*ReadAgentRunMessage(WriteAgentRunMessage(messages[1]))).bytes, raw_output);
  auto file = std::get<FileMessage>(*ReadAgentRunMessage(WriteAgentRunMessage(messages[2])));
  EXPECT_EQ(file.kind, RankFile::kTrace);
  EXPECT_EQ(file.offset, 4096u);
  EXPECT_EQ(file.bytes, std::string("\0\1\2", 3));
  EXPECT_TRUE(file.end);
  EXPECT_EQ(file.size, 8192u);
  auto dump = std::get<FileMessage>(*ReadAgentRunMessage(WriteAgentRunMessage(messages[7])));
  EXPECT_EQ(dump.kind, RankFile::kFlightRecorder);
  EXPECT_EQ(dump.incident, 2) << "a Flight Recorder dump belongs to its incident's folder";
  EXPECT_EQ(dump.rank, 5);
  auto stacks = std::get<StacksReply>(*ReadAgentRunMessage(WriteAgentRunMessage(messages[3])));
  EXPECT_EQ(stacks.id, 5);
  ASSERT_EQ(stacks.stacks.size(), 2u);
  EXPECT_EQ(stacks.stacks[0].signature, "barrier < main");
  EXPECT_EQ(stacks.stacks[1].error, "ptrace not permitted");
}

TEST(RunProtocolTest, BadAgentMessagesNameTheField) {
  const std::pair<json, const char*> cases[] = {
      {{{"type", "started"}, {"ranks", json::array()}}, "field 'node' is missing"},
      {{{"type", "started"}, {"node", "n"}, {"ranks", {{{"rank", 1}}}}}, "started.ranks[0]: field 'pid' is missing"},
      {{{"type", "log"}, {"rank", 1}, {"log", "not base64!"}}, "field 'log' is not base64"},
      {{{"type", "log"}, {"rank", -1}, {"log", ""}}, "field 'rank'"},
      {{{"type", "file"}, {"rank", 1}, {"kind", "exe"}, {"offset", 0}, {"bytes", ""}}, "field 'kind' must be one of"},
      {{{"type", "file"}, {"rank", 1}, {"kind", "log"}, {"offset", 0}, {"bytes", ""}}, "field 'kind' must be one of"},
      {{{"type", "file"},
        {"rank", 1},
        {"kind", "trace"},
        {"offset", 0},
        {"bytes", ""},
        {"end", true},
        {"size", int64_t{1} << 40}},
       "field 'size' must be an integer"},
      {{{"type", "file"}, {"rank", 1}, {"kind", "exit"}, {"offset", 0}, {"bytes", "MA=="}, {"end", true}},
       "field 'size' is missing"},
      {{{"type", "file"}, {"rank", 1}, {"kind", "exit"}, {"offset", 4}, {"bytes", "MA=="}, {"end", true}, {"size", 2}},
       "below the end of its last piece"},
      {{{"type", "file"}, {"rank", 1}, {"kind", "flight_recorder"}, {"offset", 0}, {"bytes", ""}},
       "field 'incident' is missing"},
      {{{"type", "stacks"}, {"stacks", {{{"rank", "x"}}}}}, "stacks.stacks[0]: field 'rank'"},
      {{{"type", "heartbeat"}, {"now_ns", "soon"}}, "field 'now_ns'"},
  };
  for (const auto& [j, message] : cases) {
    auto r = ReadAgentRunMessage(j);
    ASSERT_FALSE(r.ok()) << j.dump();
    EXPECT_NE(r.status().message().find(message), std::string::npos) << j.dump() << ": " << r.status().message();
  }
  EXPECT_EQ(ReadAgentRunMessage({{"type", "sample"}}).status().code(), StatusCode::kUnimplemented)
      << "samples are read in place, never here";
}

// A trace ring is mostly zeros until it wraps: only its used bytes travel, in pieces, and the size
// restores the rest.
TEST(RunProtocolTest, FileMessagesSkipTrailingZerosAndSplitLargeFiles) {
  std::string ring(4096 + 128 * 4096, '\0');
  ring.replace(0, 8, "DSDTRACE");
  ring[4096 + 200] = 'x';
  auto pieces = FileMessages(3, RankFile::kTrace, ring);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].bytes.size(), 4096u + 201);
  EXPECT_TRUE(pieces[0].end);
  EXPECT_EQ(pieces[0].size, ring.size());
  const std::string big(kFilePieceBytes * 2 + 10, 'b');
  pieces = FileMessages(1, RankFile::kLog, big);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[1].offset, kFilePieceBytes);
  EXPECT_FALSE(pieces[1].end);
  EXPECT_EQ(pieces[2].bytes.size(), 10u);
  EXPECT_EQ(pieces[2].size, big.size());
  pieces = FileMessages(1, RankFile::kExit, "");
  ASSERT_EQ(pieces.size(), 1u) << "an empty file is still one message";
  EXPECT_TRUE(pieces[0].end);
}

TEST(RunProtocolTest, TheSampleFrameWriterWritesWhatTheScanFinds) {
  diagnosis::RankState s;
  s.rank = 3;
  s.status = diagnosis::RankStatus::kRunning;
  diagnosis::SampleDeltaWriter delta;
  SampleFrameWriter w;
  w.Begin(99);
  w.AddRank([&](std::string* out) { delta.EncodeTo(s, out); }, std::string("out\xff\n", 5));
  s.rank = 4;
  w.AddRank([&](std::string* out) { delta.EncodeTo(s, out); }, "");
  diagnosis::LogDirStatus ld;
  ld.node = "n";
  ld.path = "/tmp/x";
  w.SetLogDir(ld);
  const std::string frame = w.Finish();
  SampleFrameText text;
  ASSERT_TRUE(ScanSampleFrame(frame, &text)) << frame;
  EXPECT_EQ(text.now_ns, 99);
  ASSERT_EQ(text.entries.size(), 2u);
  diagnosis::SampleDeltaReader reader;
  std::string wire_log, raw;
  ASSERT_TRUE(reader.ApplyText(text.entries[0].text, &wire_log).ok());
  EXPECT_TRUE(reader.last_in_place());
  ASSERT_TRUE(DecodeLog(wire_log, &raw));
  EXPECT_EQ(raw, std::string("out\xff\n", 5)) << "the rank's bytes, whatever they are";
  EXPECT_EQ(json::parse(text.log_dir)["path"], "/tmp/x");
  // The writer starts afresh for the next frame.
  w.Begin(100);
  EXPECT_EQ(w.Finish(), R"({"type":"sample","now_ns":100,"ranks":[]})");
}

// An entry's output is found whatever its state fields hold (a refused delta still carries output).
TEST(RunProtocolTest, AnEntrysLogIsFoundWhateverItsFields) {
  std::string log;
  ASSERT_TRUE(EntryLog(R"({"rank":1,"step":-5,"recent_drop":99,"log":"aGk="})", &log));
  EXPECT_EQ(log, "aGk=");
  log.clear();
  ASSERT_TRUE(EntryLog(R"({"rank":1,"x":{"y":[1,2]},"log":"QQ==","z":null})", &log));
  EXPECT_EQ(log, "QQ==");
  log.clear();
  ASSERT_TRUE(EntryLog(R"({"rank":1,"step":3})", &log)) << "no output: nothing to add";
  EXPECT_TRUE(log.empty());
  EXPECT_FALSE(EntryLog(R"({"rank":1,"log":5})", &log));
  EXPECT_FALSE(EntryLog("not json", &log));
  // Escaped text (not what agents write) goes through the full parser, with the same result.
  ASSERT_TRUE(EntryLog("{\"rank\":1,\"log\":\"Q\\u0051==\"}", &log));
  EXPECT_EQ(log, "QQ==");
}

TEST(RunProtocolTest, ASampleFrameIsFoundInItsTextAsInItsTree) {
  diagnosis::RankState s;
  s.rank = 3;
  s.status = diagnosis::RankStatus::kRunning;
  diagnosis::OpRecord record;
  record.op = "all_reduce";
  record.state = "completed";
  s.recent = {record};
  std::string e3, e4;
  diagnosis::SampleDeltaWriter().EncodeTo(s, &e3);
  s.rank = 4;
  diagnosis::SampleDeltaWriter().EncodeTo(s, &e4);
  e4.pop_back();
  e4 += R"(,"log":"]}\"{"})";  // output that looks like the frame's own brackets
  const std::string log_dir = R"({"node":"n","path":"/tmp/x","free_bytes":1})";
  const std::string frame =
      R"({"type":"sample","now_ns":123,"ranks":[)" + e3 + "," + e4 + R"(],"log_dir":)" + log_dir + "}";
  SampleFrameText text, tree;
  ASSERT_TRUE(ScanSampleFrame(frame, &text));
  ASSERT_TRUE(SampleFrameFromJson(json::parse(frame), &tree));
  for (const SampleFrameText* f : {&text, &tree}) {
    EXPECT_EQ(f->now_ns, 123);
    ASSERT_EQ(f->entries.size(), 2u);
    EXPECT_EQ(f->entries[0].rank, 3);
    EXPECT_EQ(f->entries[1].rank, 4);
    EXPECT_EQ(json::parse(f->entries[1].text), json::parse(e4));
    EXPECT_EQ(json::parse(f->log_dir), json::parse(log_dir));
  }
  EXPECT_EQ(text.entries[0].text, e3);  // the frame's own bytes
  // Frames of other shapes: left to the tree (which skips what it cannot use).
  for (std::string other : {
           R"({"type":"log","rank":1,"log":"x"})",
           R"({"type":"sample","ranks":[{"step":1}]})",           // an entry without a rank
           R"({"type":"sample","ranks":[5]})",                    // not an object
           R"({"type":"sample","ranks":[{"rank":1,"rank":2}]})",  // a key twice
           R"({"type":"sample","now_ns":1,"now_ns":2,"ranks":[]})",
           R"({"type":"sample","now_ns":"1","ranks":[]})",
           R"({"type":"sample","ranks":{}})",
           R"({"type":"sample","ranks":[]} trailing)",
           R"({"type":"sample","ranks":[{"rank":1,"x":[[[[]]]]}])"
           "\x01"
           "}",
           // Numbers the full parser refuses (out of a double's range), where the scan only skips.
           R"({"type":"sample","ranks":[],"x":1e999})",
           R"({"type":"sample","ranks":[{"rank":0,"x":-1e999}]})",
           R"({"type":"sample","ranks":[],"log_dir":{"free_bytes":1e999}})",
       }) {
    SCOPED_TRACE(other);
    EXPECT_FALSE(ScanSampleFrame(other, &text));
    if (other.find("1e999") != std::string::npos) {
      EXPECT_FALSE(wire::ParseFramePayload(other).ok());
    }
  }
  // Its parts elsewhere, keys the coordinator does not read, no ranks at all: still a sample frame.
  ASSERT_TRUE(
      ScanSampleFrame(R"({"ranks":[{"x":{"y":[1,2.5e3,true,null]},"rank":9}],"extra":{},"type":"sample"})", &text));
  ASSERT_EQ(text.entries.size(), 1u);
  EXPECT_EQ(text.entries[0].rank, 9);
  EXPECT_FALSE(text.now_ns.has_value());
  ASSERT_TRUE(ScanSampleFrame(R"({"type":"sample"})", &text));
  EXPECT_TRUE(text.entries.empty());
  // Nesting as deep as any frame may hold, and one level more.
  const auto nested = [](int levels) {
    return R"({"type":"sample","ranks":[{"rank":1,"x":)" + std::string(levels, '[') + std::string(levels, ']') + "}]}";
  };
  EXPECT_TRUE(ScanSampleFrame(nested(61), &text));
  EXPECT_TRUE(wire::ParseFramePayload(nested(61)).ok());
  EXPECT_FALSE(ScanSampleFrame(nested(62), &text));
  EXPECT_FALSE(wire::ParseFramePayload(nested(62)).ok());
}

}  // namespace
}  // namespace dsd::agent
