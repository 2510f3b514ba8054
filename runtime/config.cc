#include "runtime/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>

#include "common/file.h"
#include "common/framing.h"
#include "common/strings.h"

namespace dsd::runtime {

using nlohmann::json;

const char* OptimizerTypeName(OptimizerType t) {
  switch (t) {
    case OptimizerType::kAdam:
      return "Adam";
    case OptimizerType::kAdamW:
      return "AdamW";
    case OptimizerType::kSgd:
      return "SGD";
  }
  return "";
}

const char* WatchdogPolicyName(WatchdogPolicy p) { return p == WatchdogPolicy::kAbort ? "abort" : "warn"; }

namespace {

// Reads one section with a fixed set of keys; every getter names source and path in its errors.
class Section {
 public:
  Section(const json& j, std::string source, std::string path)
      : j_(j), source_(std::move(source)), path_(std::move(path)) {}

  Status CheckKeys(const std::vector<std::string>& allowed) const {
    if (!j_.is_object()) return Error("", "expected an object, got " + Show(j_));
    std::set<std::string> ok(allowed.begin(), allowed.end());
    for (const auto& [k, v] : j_.items()) {
      if (!ok.count(k)) {
        return InvalidArgument(source_ + ": " + Path(k) + ": unsupported key (supported" +
                               (path_.empty() ? "" : " in " + path_) + ": " + Join(allowed, ", ") + ")");
      }
    }
    return Status::Ok();
  }
  bool Has(const std::string& k) const { return j_.contains(k) && !j_.at(k).is_null(); }
  const json& At(const std::string& k) const { return j_.at(k); }

  Status Int(const std::string& k, int min, int* out) const {
    if (!Has(k)) return Status::Ok();
    const json& v = j_.at(k);
    if (!v.is_number_integer() || v.get<long long>() < min || v.get<long long>() > (1LL << 30)) {
      return Error(k, "expected an integer >= " + std::to_string(min) + ", got " + Show(v));
    }
    *out = v.get<int>();
    return Status::Ok();
  }
  Status Float(const std::string& k, double min, double max, float* out) const {
    double d = 0;
    DSD_RETURN_IF_ERROR(Double(k, min, max, &d));
    if (Has(k)) *out = static_cast<float>(d);
    return Status::Ok();
  }
  Status Double(const std::string& k, double min, double max, double* out) const {
    if (!Has(k)) return Status::Ok();
    const json& v = j_.at(k);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < min || v.get<double>() > max) {
      return Error(k, "expected a number in [" + Num(min) + ", " + Num(max) + "], got " + Show(v));
    }
    *out = v.get<double>();
    return Status::Ok();
  }
  Status Bool(const std::string& k, bool* out) const {
    if (!Has(k)) return Status::Ok();
    if (!j_.at(k).is_boolean()) return Error(k, "expected true or false, got " + Show(j_.at(k)));
    *out = j_.at(k).get<bool>();
    return Status::Ok();
  }
  Status Error(const std::string& k, const std::string& what) const {
    return InvalidArgument(source_ + ": " + (k.empty() ? (path_.empty() ? std::string("top level") : path_) : Path(k)) +
                           ": " + what);
  }
  std::string Path(const std::string& k) const { return path_.empty() ? k : path_ + "." + k; }
  Section Sub(const std::string& k) const { return Section(j_.at(k), source_, Path(k)); }

 private:
  static std::string Show(const json& v) {
    std::string s = v.dump();
    return s.size() > 60 ? s.substr(0, 57) + "..." : s;
  }
  static std::string Num(double d) {
    std::string s = json(d).dump();
    return s;
  }
  const json& j_;
  std::string source_, path_;
};

Status ParseOptimizer(const Section& s, OptimizerConfig* o) {
  DSD_RETURN_IF_ERROR(s.CheckKeys({"type", "params"}));
  if (!s.Has("type") || !s.At("type").is_string()) return s.Error("type", "expected \"Adam\", \"AdamW\" or \"SGD\"");
  std::string type = s.At("type").get<std::string>();
  std::string lower = type;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "adam")
    o->type = OptimizerType::kAdam;
  else if (lower == "adamw")
    o->type = OptimizerType::kAdamW;
  else if (lower == "sgd")
    o->type = OptimizerType::kSgd;
  else
    return s.Error("type", "unsupported optimizer \"" + type + "\" (supported: Adam, AdamW, SGD)");
  if (!s.Has("params")) return Status::Ok();
  Section p = s.Sub("params");
  if (o->type == OptimizerType::kSgd) {
    DSD_RETURN_IF_ERROR(p.CheckKeys({"lr", "momentum", "weight_decay"}));
    DSD_RETURN_IF_ERROR(p.Float("momentum", 0, 1, &o->momentum));
  } else {
    DSD_RETURN_IF_ERROR(p.CheckKeys({"lr", "betas", "eps", "weight_decay"}));
    if (p.Has("betas")) {
      const json& b = p.At("betas");
      if (!b.is_array() || b.size() != 2 || !b[0].is_number() || !b[1].is_number() || b[0].get<double>() < 0 ||
          b[0].get<double>() >= 1 || b[1].get<double>() < 0 || b[1].get<double>() >= 1) {
        return p.Error("betas", "expected [beta1, beta2] with each in [0, 1), got " + b.dump());
      }
      o->beta1 = b[0].get<float>();
      o->beta2 = b[1].get<float>();
    }
    DSD_RETURN_IF_ERROR(p.Float("eps", 0, 1, &o->eps));
  }
  DSD_RETURN_IF_ERROR(p.Float("lr", 0, 10, &o->lr));
  if (p.Has("lr") && o->lr <= 0) return p.Error("lr", "expected a number > 0, got " + p.At("lr").dump());
  return p.Float("weight_decay", 0, 10, &o->weight_decay);
}

Status ParseFp16(const Section& s, Fp16Config* f) {
  DSD_RETURN_IF_ERROR(s.CheckKeys(
      {"enabled", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis", "min_loss_scale"}));
  DSD_RETURN_IF_ERROR(s.Bool("enabled", &f->enabled));
  DSD_RETURN_IF_ERROR(s.Float("loss_scale", 0, 65504.0 * 65536.0, &f->loss_scale));
  DSD_RETURN_IF_ERROR(s.Int("initial_scale_power", 0, &f->initial_scale_power));
  if (f->initial_scale_power > 40)
    return s.Error("initial_scale_power",
                   "expected an integer in [0, 40], got " + std::to_string(f->initial_scale_power));
  DSD_RETURN_IF_ERROR(s.Int("loss_scale_window", 1, &f->loss_scale_window));
  DSD_RETURN_IF_ERROR(s.Int("hysteresis", 1, &f->hysteresis));
  DSD_RETURN_IF_ERROR(s.Float("min_loss_scale", 1e-10, 1e10, &f->min_loss_scale));
  return Status::Ok();
}

Status ParseZero(const Section& top, Config* c) {
  const json& z = top.At("zero_optimization");
  if (z.is_boolean()) {  // the legacy form: true means stage 1
    c->zero_stage = z.get<bool>() ? 1 : 0;
    return Status::Ok();
  }
  Section s = top.Sub("zero_optimization");
  DSD_RETURN_IF_ERROR(s.CheckKeys({"stage"}));
  DSD_RETURN_IF_ERROR(s.Int("stage", 0, &c->zero_stage));
  if (c->zero_stage > 1) {
    return s.Error("stage", "stage " + std::to_string(c->zero_stage) +
                                " is not implemented by the bundled runtime (supported: 0, 1)");
  }
  return Status::Ok();
}

Status ParseDiagnostics(const Section& s, DiagnosticsConfig* d) {
  DSD_RETURN_IF_ERROR(s.CheckKeys({"watchdog_timeout_s", "watchdog_policy", "comm_timeout_s", "trace_capacity"}));
  DSD_RETURN_IF_ERROR(s.Double("watchdog_timeout_s", 0, 86400 * 7, &d->watchdog_timeout_s));
  DSD_RETURN_IF_ERROR(s.Double("comm_timeout_s", 0.1, 86400 * 7, &d->comm_timeout_s));
  DSD_RETURN_IF_ERROR(s.Int("trace_capacity", 16, &d->trace_capacity));
  if (s.Has("watchdog_policy")) {
    const json& p = s.At("watchdog_policy");
    if (p == "warn")
      d->watchdog_policy = WatchdogPolicy::kWarn;
    else if (p == "abort")
      d->watchdog_policy = WatchdogPolicy::kAbort;
    else
      return s.Error("watchdog_policy", "expected \"warn\" or \"abort\", got " + p.dump());
  }
  return Status::Ok();
}

// Line and column of a byte offset, for syntax errors.
std::string LineCol(const std::string& text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

}  // namespace

Result<Config> ConfigFromJson(const json& j, const std::string& source) {
  Config c;
  c.source = source;
  Section top(j, source, "");
  DSD_RETURN_IF_ERROR(
      top.CheckKeys({"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "optimizer",
                     "fp16", "zero_optimization", "gradient_clipping", "steps_per_print", "dsdoctor"}));
  DSD_RETURN_IF_ERROR(top.Int("train_batch_size", 1, &c.train_batch_size));
  DSD_RETURN_IF_ERROR(top.Int("train_micro_batch_size_per_gpu", 1, &c.train_micro_batch_size_per_gpu));
  DSD_RETURN_IF_ERROR(top.Int("gradient_accumulation_steps", 1, &c.gradient_accumulation_steps));
  if (c.train_batch_size == 0 && c.train_micro_batch_size_per_gpu == 0) {
    return InvalidArgument(source + ": train_batch_size or train_micro_batch_size_per_gpu must be set");
  }
  if (top.Has("optimizer")) DSD_RETURN_IF_ERROR(ParseOptimizer(top.Sub("optimizer"), &c.optimizer));
  if (top.Has("fp16")) DSD_RETURN_IF_ERROR(ParseFp16(top.Sub("fp16"), &c.fp16));
  if (top.Has("zero_optimization")) DSD_RETURN_IF_ERROR(ParseZero(top, &c));
  DSD_RETURN_IF_ERROR(top.Float("gradient_clipping", 0, 1e6, &c.gradient_clipping));
  DSD_RETURN_IF_ERROR(top.Int("steps_per_print", 1, &c.steps_per_print));
  if (top.Has("dsdoctor")) DSD_RETURN_IF_ERROR(ParseDiagnostics(top.Sub("dsdoctor"), &c.dsdoctor));
  return c;
}

Result<Config> ParseConfig(const std::string& text, const std::string& source) {
  // Nesting is bounded before the (recursive) parser and destructor see it: 100,000 '[' would
  // overflow the stack.
  if (auto bounded = wire::ParseJsonBounded(text);
      !bounded.ok() && bounded.status().message().find("nested deeper") != std::string::npos)
    return InvalidArgument(source + ": invalid JSON: " + bounded.status().message());
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    auto pos = what.find("]: ");
    if (pos != std::string::npos) what = what.substr(pos + 3);
    return InvalidArgument(source + ":" + LineCol(text, e.byte == 0 ? 0 : e.byte - 1) + ": invalid JSON: " + what);
  } catch (const json::exception& e) {  // out_of_range: a number such as 1e999 that no double holds
    std::string what = e.what();
    auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return InvalidArgument(source + ": invalid JSON: " + what);
  }
  return ConfigFromJson(j, source);
}

Result<Config> LoadConfig(const std::string& path) {
  DSD_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 4u << 20));
  return ParseConfig(text, path);
}

Result<BatchPlan> ResolveBatch(const Config& c, int world_size) {
  int tbs = c.train_batch_size, mb = c.train_micro_batch_size_per_gpu, gas = c.gradient_accumulation_steps;
  auto say = [&](const std::string& what) {
    return InvalidArgument(c.source + ": " + what + " (world size " + std::to_string(world_size) + ")");
  };
  if (tbs && mb && gas) {
    if (tbs != mb * gas * world_size) {
      return say("train_batch_size " + std::to_string(tbs) + " != train_micro_batch_size_per_gpu " +
                 std::to_string(mb) + " * gradient_accumulation_steps " + std::to_string(gas) + " * world size");
    }
  } else if (tbs && mb) {
    if (tbs % (mb * world_size) != 0) {
      return say("train_batch_size " + std::to_string(tbs) + " is not divisible by train_micro_batch_size_per_gpu " +
                 std::to_string(mb) + " * world size");
    }
    gas = tbs / (mb * world_size);
  } else if (tbs) {
    if (!gas) gas = 1;
    if (tbs % (gas * world_size) != 0) {
      return say("train_batch_size " + std::to_string(tbs) + " is not divisible by gradient_accumulation_steps " +
                 std::to_string(gas) + " * world size");
    }
    mb = tbs / (gas * world_size);
  } else {
    if (!gas) gas = 1;
    tbs = mb * gas * world_size;
  }
  return BatchPlan{tbs, mb, gas};
}

Status ApplyDiagnosticsEnv(const std::string* timeout, const std::string* policy, DiagnosticsConfig* d) {
  if (timeout) {
    double v = 0;
    auto [p, ec] = std::from_chars(timeout->data(), timeout->data() + timeout->size(), v);
    if (ec != std::errc() || p != timeout->data() + timeout->size() || !std::isfinite(v) || v < 0) {
      return InvalidArgument("DSDOCTOR_TIMEOUT=" + *timeout + ": expected seconds >= 0 (0 disables the watchdog)");
    }
    d->watchdog_timeout_s = v;
  }
  if (policy) {
    if (*policy == "warn")
      d->watchdog_policy = WatchdogPolicy::kWarn;
    else if (*policy == "abort")
      d->watchdog_policy = WatchdogPolicy::kAbort;
    else
      return InvalidArgument("DSDOCTOR_WATCHDOG_POLICY=" + *policy + ": expected warn or abort");
  }
  return Status::Ok();
}

}  // namespace dsd::runtime
