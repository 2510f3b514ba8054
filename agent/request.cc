#include "agent/request.h"

#include <cstdint>
#include <limits>
#include <string>

#include "agent/ping.h"

namespace dsd::agent {

namespace {

using nlohmann::json;

constexpr size_t kMaxName = 4096;        // host names, keys, paths
constexpr size_t kMaxValue = 16u << 20;  // a value can be as big as a frame
constexpr int64_t kMaxPort = 65535;
constexpr int64_t kMaxTimeoutMs = 24LL * 3600 * 1000;

// Checks the fields of one JSON object; the first problem found is kept.
class Fields {
 public:
  Fields(const json& j, std::string what) : j_(j), what_(std::move(what)) {
    if (!j_.is_object()) Fail("is not a JSON object");
  }

  Fields& Int(const char* key, int64_t lo, int64_t hi, bool required = false) {
    const json* v = Get(key, required);
    if (v && !IntIn(*v, lo, hi))
      Fail(std::string("field '") + key + "' must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    return *this;
  }
  Fields& Number(const char* key, double lo, double hi, bool required = false) {
    const json* v = Get(key, required);
    if (v && (!v->is_number() || !(v->get<double>() >= lo && v->get<double>() <= hi)))
      Fail(std::string("field '") + key + "' must be a number in " + Short(lo) + ".." + Short(hi));
    return *this;
  }
  Fields& Bool(const char* key) {
    const json* v = Get(key, false);
    if (v && !v->is_boolean()) Fail(std::string("field '") + key + "' must be true or false");
    return *this;
  }
  Fields& String(const char* key, size_t max_len, bool required = false) {
    const json* v = Get(key, required);
    if (v && !StringOk(*v, max_len))
      Fail(std::string("field '") + key + "' must be a string of at most " + std::to_string(max_len) + " bytes");
    return *this;
  }
  Fields& StringList(const char* key, size_t max_items, size_t max_len, bool required = false, bool non_empty = false) {
    const json* v = Get(key, required);
    if (!v) return *this;
    bool ok = v->is_array() && v->size() <= max_items && (!non_empty || !v->empty());
    for (size_t i = 0; ok && i < v->size(); ++i) ok = StringOk((*v)[i], max_len);
    if (!ok)
      Fail(std::string("field '") + key + "' must be a list of at most " + std::to_string(max_items) + " strings" +
           (non_empty ? ", not empty" : ""));
    return *this;
  }
  Fields& IntList(const char* key, size_t max_items, int64_t lo, int64_t hi, bool required = false) {
    const json* v = Get(key, required);
    if (!v) return *this;
    bool ok = v->is_array() && v->size() <= max_items;
    for (size_t i = 0; ok && i < v->size(); ++i) ok = IntIn((*v)[i], lo, hi);
    if (!ok)
      Fail(std::string("field '") + key + "' must be a list of at most " + std::to_string(max_items) + " integers in " +
           std::to_string(lo) + ".." + std::to_string(hi));
    return *this;
  }
  // {"NAME": "value", …}
  Fields& StringMap(const char* key, size_t max_items) {
    const json* v = Get(key, false);
    if (!v) return *this;
    bool ok = v->is_object() && v->size() <= max_items;
    if (ok)
      for (const auto& [k, val] : v->items())
        if (k.size() > kMaxName || !StringOk(val, kMaxValue)) {
          ok = false;
          break;
        }
    if (!ok)
      Fail(std::string("field '") + key + "' must be an object of at most " + std::to_string(max_items) +
           " string values");
    return *this;
  }
  // {"host": "node-1", "port": 29500}
  Fields& Endpoint(const char* key, bool required = false) {
    const json* v = Get(key, required);
    if (!v) return *this;
    Fields inner(*v, what_ + "." + key);
    inner.String("host", kMaxName, true).Int("port", 0, kMaxPort, true);
    if (!inner.status().ok()) status_ = inner.status();
    return *this;
  }
  // A list of objects, each checked by `each`.
  template <typename Each>
  Fields& Objects(const char* key, size_t max_items, bool required, Each each) {
    const json* v = Get(key, required);
    if (!v) return *this;
    if (!v->is_array() || v->size() > max_items) {
      Fail(std::string("field '") + key + "' must be a list of at most " + std::to_string(max_items) + " objects");
      return *this;
    }
    for (size_t i = 0; i < v->size() && status_.ok(); ++i) {
      Fields inner((*v)[i], what_ + "." + key + "[" + std::to_string(i) + "]");
      each(inner);
      if (!inner.status().ok()) status_ = inner.status();
    }
    return *this;
  }

  const Status& status() const { return status_; }

 private:
  const json* Get(const char* key, bool required) {
    if (!status_.ok() || !j_.is_object()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (required) Fail(std::string("field '") + key + "' is missing");
      return nullptr;
    }
    return &*it;
  }
  static bool IntIn(const json& v, int64_t lo, int64_t hi) {
    if (v.is_number_unsigned()) {  // what the parser makes of every non-negative integer
      const uint64_t u = v.get<uint64_t>();
      return hi >= 0 && u <= static_cast<uint64_t>(hi) && (lo <= 0 || u >= static_cast<uint64_t>(lo));
    }
    if (v.is_number_integer()) return v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
    return false;
  }
  static bool StringOk(const json& v, size_t max_len) {
    return v.is_string() && v.get_ref<const std::string&>().size() <= max_len;
  }
  static std::string Short(double d) {
    std::string s = std::to_string(d);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  void Fail(const std::string& why) {
    if (status_.ok()) status_ = InvalidArgument(what_ + ": " + why);
  }

  const json& j_;
  std::string what_;
  Status status_ = Status::Ok();
};

// The message's "type", or why it has none; `what` is "request" or "message".
Result<std::string> TypeOf(const json& j, const char* what) {
  if (!j.is_object()) return InvalidArgument(std::string(what) + " is not a JSON object");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return InvalidArgument(std::string(what) + " has no string 'type'");
  return t->get<std::string>();
}

}  // namespace

Status ValidateRequest(const json& request) {
  DSD_ASSIGN_OR_RETURN(const std::string type, TypeOf(request, "request"));
  Fields f(request, type);
  f.Int("id", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  if (type == "inventory") {
    f.StringMap("job_env", 100000);
  } else if (type == "listen") {
    f.Int("port", 0, kMaxPort, true);
  } else if (type == "ping") {
    // The compact target table has its own reader (agent/ping.h).
    if (auto parsed = ParsePingRequest(request); !parsed.ok()) return parsed.status();
  } else if (type == "kv_set") {
    f.String("key", kMaxName, true).String("value", kMaxValue, true);
  } else if (type == "kv_get") {
    f.StringList("keys", 100000, kMaxName, true).Int("timeout_ms", 0, kMaxTimeoutMs);
  } else if (type == "allreduce") {
    f.String("backend", 16)
        .IntList("sizes", 64, 1, int64_t{1} << 40, true)
        .Int("max_iters", 1, 1000)
        .Int("warmup", 0, 100)
        .Int("timeout_ms", 1, kMaxTimeoutMs)
        .String("run", kMaxName)
        .Endpoint("store");
    const std::string backend = request.value("backend", std::string("gloo"));
    if (backend != "gloo" && backend != "mpi" && backend != "nccl")
      return Unimplemented("allreduce: unknown backend '" + backend + "' (gloo, mpi, nccl)");
    if (backend == "gloo")
      f.Int("rank", 0, 65535, true).Int("size", 1, 65536, true).Endpoint("store", true).Bool("busy_poll");
    if (backend == "nccl")
      f.Int("first_rank", 0, 65535, true).Int("gpus", 1, 64, true).Int("size", 1, 65536, true).Endpoint("store", true);
  } else if (type == "p2p_send") {
    f.Endpoint("target", true).Number("seconds", 0, 3600).Int("max_bytes", 1, int64_t{1} << 40);
  } else if (type == "run") {
    f.StringList("argv", 100000, kMaxValue, true, /*non_empty=*/true)
        .StringMap("env", 1000000)
        .String("log_dir", kMaxName, true)
        .String("cwd", kMaxName)
        .Int("sample_ms", 1, 60000)
        .Bool("trace_python")
        .Bool("share_group")
        .Bool("sample_deltas")
        .Bool("compact_records")
        .Objects("ranks", 65536, true, [](Fields& r) {
          r.Int("rank", 0, (1 << 20) - 1, true).Int("local_rank", 0, 65535).StringMap("env", 100000);
        });
  } else if (type == "sink" || type == "shutdown") {
    // no fields
  } else {
    return Unimplemented("unknown request type '" + type + "'");
  }
  return f.status();
}

Status ValidateRunStreamMessage(const json& message) {
  DSD_ASSIGN_OR_RETURN(const std::string type, TypeOf(message, "message"));
  Fields f(message, type);
  if (type == "stop") {
    f.Int("signal", 1, 64);
  } else if (type == "stacks") {
    f.Int("id", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())
        .IntList("ranks", 1 << 20, 0, (1 << 20) - 1);
  } else if (type == "resync") {
    f.IntList("ranks", 1 << 20, 0, (1 << 20) - 1);
  } else {
    return Unimplemented("unknown run stream message '" + type + "'");
  }
  return f.status();
}

}  // namespace dsd::agent
