#include "agent/request.h"

#include <gtest/gtest.h>

namespace dsd::agent {
namespace {

using nlohmann::json;

struct Case {
  const char* name;
  json request;
  StatusCode code;  // kOk: accepted
  const char* message = "";
};

// One entry per rule: what the coordinator sends is accepted, each kind of bad field is named.
TEST(RequestTest, ShapesAreCheckedBeforeAnythingActs) {
  const json store = {{"host", "node-0"}, {"port", 29500}};
  const Case cases[] = {
      {"inventory", {{"type", "inventory"}, {"job_env", {{"NCCL_SOCKET_IFNAME", "eth0"}}}}, StatusCode::kOk},
      {"inventory env not strings",
       {{"type", "inventory"}, {"job_env", {{"A", 1}}}},
       StatusCode::kInvalidArgument,
       "field 'job_env'"},
      {"listen", {{"type", "listen"}, {"port", 29500}, {"id", 3}}, StatusCode::kOk},
      {"listen port as text", {{"type", "listen"}, {"port", "29500"}}, StatusCode::kInvalidArgument, "'port'"},
      {"listen huge port",
       {{"type", "listen"}, {"port", 18446744073709551615ull}},
       StatusCode::kInvalidArgument,
       "'port'"},
      {"ping",
       {{"type", "ping"},
        {"timeout_ms", 500},
        {"start", 1},
        {"skip", json::array({0})},
        {"targets", json::array({json::array({"a", 1}), json::array({"b", 2})})}},
       StatusCode::kOk},
      {"ping targets not a list",
       {{"type", "ping"}, {"targets", "a:1"}},
       StatusCode::kInvalidArgument,
       "ping.targets: not a list"},
      {"ping timeout negative",
       {{"type", "ping"}, {"timeout_ms", -1}, {"targets", json::array()}},
       StatusCode::kInvalidArgument,
       "ping.timeout_ms"},
      {"kv_set", {{"type", "kv_set"}, {"key", "k"}, {"value", "00ff"}}, StatusCode::kOk},
      {"kv_set without value", {{"type", "kv_set"}, {"key", "k"}}, StatusCode::kInvalidArgument, "'value' is missing"},
      {"kv_get", {{"type", "kv_get"}, {"keys", {"a", "b"}}, {"timeout_ms", 1000}}, StatusCode::kOk},
      {"kv_get keys of numbers", {{"type", "kv_get"}, {"keys", {1, 2}}}, StatusCode::kInvalidArgument, "'keys'"},
      {"allreduce gloo",
       {{"type", "allreduce"}, {"sizes", {8, 1 << 20}}, {"rank", 0}, {"size", 2}, {"store", store}},
       StatusCode::kOk},
      {"allreduce mpi", {{"type", "allreduce"}, {"backend", "mpi"}, {"sizes", {8}}}, StatusCode::kOk},
      {"allreduce nccl",
       {{"type", "allreduce"},
        {"backend", "nccl"},
        {"sizes", {8}},
        {"first_rank", 0},
        {"gpus", 8},
        {"size", 16},
        {"store", store}},
       StatusCode::kOk},
      {"allreduce unknown backend",
       {{"type", "allreduce"}, {"backend", "rccl"}, {"sizes", {8}}},
       StatusCode::kUnimplemented,
       "rccl"},
      {"allreduce store port out of range",
       {{"type", "allreduce"}, {"sizes", {8}}, {"rank", 0}, {"size", 2}, {"store", {{"host", "a"}, {"port", 70000}}}},
       StatusCode::kInvalidArgument,
       "allreduce.store: field 'port'"},
      {"allreduce too many sizes",
       {{"type", "allreduce"}, {"backend", "mpi"}, {"sizes", json(std::vector<int>(65, 8))}},
       StatusCode::kInvalidArgument,
       "'sizes'"},
      {"allreduce float iterations",
       {{"type", "allreduce"}, {"backend", "mpi"}, {"sizes", {8}}, {"max_iters", 2.5}},
       StatusCode::kInvalidArgument,
       "'max_iters'"},
      {"p2p_send", {{"type", "p2p_send"}, {"target", store}, {"seconds", 0.5}}, StatusCode::kOk},
      {"p2p_send no target", {{"type", "p2p_send"}, {"seconds", 0.5}}, StatusCode::kInvalidArgument, "'target'"},
      {"p2p_send forever",
       {{"type", "p2p_send"}, {"target", store}, {"seconds", 1e9}},
       StatusCode::kInvalidArgument,
       "'seconds'"},
      {"run",
       {{"type", "run"},
        {"argv", {"python3", "train.py"}},
        {"env", {{"A", "1"}}},
        {"run_dir", "/tmp/l"},
        {"ranks", {{{"rank", 0}, {"local_rank", 0}, {"env", {{"RANK", "0"}}}}}}},
       StatusCode::kOk},
      {"run empty argv",
       {{"type", "run"}, {"argv", json::array()}, {"run_dir", "/l"}, {"ranks", json::array()}},
       StatusCode::kInvalidArgument,
       "'argv'"},
      {"run rank negative",
       {{"type", "run"}, {"argv", {"x"}}, {"run_dir", "/l"}, {"ranks", {{{"rank", -1}}}}},
       StatusCode::kInvalidArgument,
       "run.ranks[0]: field 'rank'"},
      {"sink", {{"type", "sink"}}, StatusCode::kOk},
      {"shutdown", {{"type", "shutdown"}}, StatusCode::kOk},
      {"unknown", {{"type", "format_disk"}}, StatusCode::kUnimplemented, "unknown request type 'format_disk'"},
      {"no type", {{"port", 1}}, StatusCode::kInvalidArgument, "no string 'type'"},
      {"not an object", json::array({1, 2}), StatusCode::kInvalidArgument, "not a JSON object"},
      {"id not a number", {{"type", "shutdown"}, {"id", "x"}}, StatusCode::kInvalidArgument, "'id'"},
  };
  for (const auto& c : cases) {
    Status st = ValidateRequest(c.request);
    EXPECT_EQ(st.code(), c.code) << c.name << ": " << st.ToString();
    EXPECT_NE(st.message().find(c.message), std::string::npos) << c.name << ": " << st.message();
  }
}

// Parsed JSON holds non-negative integers as unsigned: the lower bounds must hold for them too.
TEST(RequestTest, ParsedUnsignedNumbersKeepTheirLowerBounds) {
  EXPECT_FALSE(ValidateRequest(json::parse(R"({"type":"allreduce","backend":"mpi","sizes":[0]})")).ok());
  EXPECT_FALSE(ValidateRequest(json::parse(R"({"type":"ping","timeout_ms":0,"targets":[]})")).ok());
  EXPECT_TRUE(ValidateRequest(json::parse(R"({"type":"allreduce","backend":"mpi","sizes":[1]})")).ok());
}

}  // namespace
}  // namespace dsd::agent
