#include "runtime/engine.h"

#include <dirent.h>
#include <signal.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "runtime/checkpoint.h"

namespace dsd::runtime {
namespace {

// Test hook: DSDOCTOR_TEST_CRASH_POINT names a point inside save_checkpoint where the rank kills
// itself with SIGKILL, the way a node loss or an OOM kill would end it.
bool CrashPointIs(const char* point) {
  const char* v = std::getenv("DSDOCTOR_TEST_CRASH_POINT");
  return v && std::strcmp(v, point) == 0;
}

void CrashHere(const char* point) {
  log::Get("runtime")->warn("DSDOCTOR_TEST_CRASH_POINT={}: killing this rank", point);
  log::Get("runtime")->flush();
  ::raise(SIGKILL);
}

// Sets the trace phase for the scope of an engine call, then hands the rank back to user code.
class PhaseScope {
 public:
  PhaseScope(TraceWriter* t, Phase p) : t_(t) { t_->SetPhase(p); }
  ~PhaseScope() { t_->SetPhase(Phase::kUser); }

 private:
  TraceWriter* t_;
};

const std::string* EnvVar(const char* name) {
  static thread_local std::string value;
  const char* v = std::getenv(name);
  if (!v || !*v) return nullptr;
  value = v;
  return &value;
}

}  // namespace

Result<std::unique_ptr<Engine>> Initialize(const Config& config, std::unique_ptr<Model> model, World& world) {
  if (!model) return InvalidArgument("initialize: no model");
  auto e = std::unique_ptr<Engine>(new Engine());
  e->config_ = config;
  DSD_ASSIGN_OR_RETURN(e->plan_, ResolveBatch(config, world.size()));
  DiagnosticsConfig diag = config.dsdoctor;
  {
    std::string timeout_copy, policy_copy;
    const std::string* t = EnvVar("DSDOCTOR_TIMEOUT");
    if (t) timeout_copy = *t;
    const std::string* p = EnvVar("DSDOCTOR_WATCHDOG_POLICY");
    if (p) policy_copy = *p;
    DSD_RETURN_IF_ERROR(ApplyDiagnosticsEnv(t ? &timeout_copy : nullptr, p ? &policy_copy : nullptr, &diag));
  }
  WatchdogOptions wd = world.watchdog().options();
  wd.timeout = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(diag.watchdog_timeout_s));
  wd.policy = diag.watchdog_policy;
  world.watchdog().Configure(wd);

  e->model_ = std::move(model);
  e->group_ = world.shared_group();
  e->trace_ = &world.trace();
  e->local_rank_ = world.env().local_rank;
  PhaseScope phase(e->trace_, Phase::kInit);
  e->n_ = e->model_->num_parameters();
  e->fp16_ = config.fp16.enabled;
  if (e->fp16_) {
    e->master_.assign(e->model_->parameters(), e->model_->parameters() + e->n_);
    e->half_.resize(e->n_);
    e->scaler_ = std::make_unique<LossScaler>(config.fp16);
  }
  size_t world_size = static_cast<size_t>(world.size());
  if (config.zero_stage == 1) {
    e->shard_size_ = (e->n_ + world_size - 1) / world_size;
    e->shard_lo_ = std::min(e->n_, e->shard_size_ * static_cast<size_t>(world.rank()));
    e->shard_hi_ = std::min(e->n_, e->shard_lo_ + e->shard_size_);
    e->flat_.resize(e->shard_size_ * world_size);
  } else {
    e->shard_lo_ = 0;
    e->shard_hi_ = e->n_;
  }
  e->optimizer_ = MakeOptimizer(config.optimizer, e->shard_hi_ - e->shard_lo_);

  float* start = e->fp16_ ? e->master_.data() : e->model_->parameters();
  DSD_RETURN_IF_ERROR(Broadcast(*e->group_, start, e->n_, DType::kFloat32, 0, "initialize"));
  if (e->fp16_) DSD_RETURN_IF_ERROR(e->SyncModelFromMaster());
  log::Get("runtime")->info(
      "rank {}: engine ready: {} parameters, train_batch_size {} = micro {} x accumulation {} x world {}, {} lr {}, "
      "fp16 {}, ZeRO stage {}, watchdog {:.1f} s ({})",
      world.rank(), e->n_, e->plan_.train_batch_size, e->plan_.micro_batch, e->plan_.gradient_accumulation_steps,
      world.size(), OptimizerTypeName(config.optimizer.type), config.optimizer.lr, e->fp16_ ? "on" : "off",
      config.zero_stage, diag.watchdog_timeout_s, WatchdogPolicyName(diag.watchdog_policy));
  return e;
}

Status Engine::SyncModelFromMaster() {
  float* p = model_->parameters();
  for (size_t i = 0; i < n_; ++i) p[i] = HalfToFloat(FloatToHalf(master_[i]));
  return Status::Ok();
}

Result<float> Engine::Forward(const Batch& batch) {
  PhaseScope phase(trace_, Phase::kForward);
  DSD_ASSIGN_OR_RETURN(float loss, model_->Forward(batch));
  last_loss_ = loss;
  pending_backward_ = true;
  return loss;
}

Status Engine::Backward(float loss) {
  PhaseScope phase(trace_, Phase::kBackward);
  if (!pending_backward_) return InvalidArgument("backward() without a forward() before it");
  pending_backward_ = false;
  (void)loss;  // gradients come from the cached forward; the value is the API's, as in DeepSpeed
  float scale = loss_scale() / static_cast<float>(plan_.gradient_accumulation_steps);
  return model_->Backward(scale);
}

Status Engine::Step() {
  PhaseScope phase(trace_, Phase::kStep);
  if (pending_backward_) return InvalidArgument("step() after a forward() without backward()");
  bool boundary = is_gradient_accumulation_boundary();
  ++micro_steps_;
  if (!boundary) return Status::Ok();
  return ApplyGradients();
}

Status Engine::ApplyGradients() {
  float* g = model_->gradients();
  const float world = static_cast<float>(group_->size());
  last_overflow_ = false;
  if (fp16_) {
    for (size_t i = 0; i < n_; ++i) half_[i] = FloatToHalf(g[i]);
    DSD_RETURN_IF_ERROR(AllReduce(*group_, half_.data(), n_, DType::kFloat16, ReduceOp::kSum, "engine.step"));
    const float inv = 1.0f / (scaler_->scale() * world);
    for (size_t i = 0; i < n_; ++i) {
      g[i] = HalfToFloat(half_[i]) * inv;
      if (!std::isfinite(g[i])) last_overflow_ = true;
    }
  } else {
    DSD_RETURN_IF_ERROR(AllReduce(*group_, g, n_, DType::kFloat32, ReduceOp::kSum, "engine.step"));
    for (size_t i = 0; i < n_; ++i) g[i] /= world;
  }
  ++global_steps_;
  if (last_overflow_) {
    // Every rank sees the same summed gradients, so every rank skips together.
    ++skipped_steps_;
    float old = scaler_->scale();
    scaler_->Update(true);
    log::Get("runtime")->info("rank {}: fp16 gradient overflow at step {}; skipping it, loss scale {} -> {}",
                              group_->rank(), global_steps_, old, scaler_->scale());
  } else {
    if (config_.gradient_clipping > 0) {
      double norm2 = 0;
      for (size_t i = 0; i < n_; ++i) norm2 += static_cast<double>(g[i]) * g[i];
      double norm = std::sqrt(norm2);
      if (norm > config_.gradient_clipping) {
        float c = static_cast<float>(config_.gradient_clipping / (norm + 1e-6));
        for (size_t i = 0; i < n_; ++i) g[i] *= c;
      }
    }
    float* target = fp16_ ? master_.data() : model_->parameters();
    optimizer_->Step(target + shard_lo_, g + shard_lo_);
    if (config_.zero_stage == 1) {
      std::vector<float> mine(shard_size_, 0.0f);
      std::copy(target + shard_lo_, target + shard_hi_, mine.begin());
      DSD_RETURN_IF_ERROR(
          AllGather(*group_, mine.data(), flat_.data(), shard_size_, DType::kFloat32, "engine.step.allgather"));
      std::copy(flat_.begin(), flat_.begin() + static_cast<long>(n_), target);
    }
    if (fp16_) {
      scaler_->Update(false);
      DSD_RETURN_IF_ERROR(SyncModelFromMaster());
    }
  }
  std::fill(g, g + n_, 0.0f);
  trace_->SetStep(global_steps_);
  if (global_steps_ % static_cast<uint64_t>(config_.steps_per_print) == 0) {
    log::Get("runtime")->info("rank {}: step {} loss {:.6f}{}", group_->rank(), global_steps_, last_loss_,
                              fp16_ ? " loss scale " + std::to_string(scaler_->scale()) : std::string());
  }
  return Status::Ok();
}

nlohmann::json Engine::Meta(const std::string& tag) const {
  nlohmann::json m = {
      {"format", "dsdoctor-checkpoint"},
      {"tag", tag},
      {"rank", group_->rank()},
      {"world_size", group_->size()},
      {"zero_stage", config_.zero_stage},
      {"num_params", n_},
      {"shard", {shard_lo_, shard_hi_}},
      {"optimizer", {{"type", OptimizerTypeName(config_.optimizer.type)}, {"steps", optimizer_->steps()}}},
      {"fp16", fp16_},
      {"global_steps", global_steps_},
      {"micro_steps", micro_steps_},
      {"skipped_steps", skipped_steps_},
      {"train_batch_size", plan_.train_batch_size},
  };
  if (scaler_) m["loss_scaler"] = scaler_->ToJson();
  return m;
}

Status Engine::SaveCheckpoint(const std::string& dir, const std::string& tag, const nlohmann::json& client_state) {
  PhaseScope phase(trace_, Phase::kSaveCheckpoint);
  auto log = log::Get("runtime");
  DSD_RETURN_IF_ERROR(ValidateTag(tag));
  // Every rank must be here: a rank that skips save_checkpoint leaves the others waiting in this
  // barrier while it enters its next collective - the classic "only rank 0 saves" hang.
  DSD_RETURN_IF_ERROR(Barrier(*group_, "save_checkpoint"));
  Shard shard;
  shard.meta = Meta(tag);
  shard.meta["client_state"] = client_state.is_null() ? nlohmann::json::object() : client_state;
  const float* params = master_parameters();
  shard.arrays.emplace_back("params", std::vector<float>(params, params + n_));
  for (auto& [name, state] : optimizer_->State()) shard.arrays.emplace_back("optimizer." + name, *state);
  std::string path = ShardPath(dir, tag, group_->rank(), group_->size());
  std::function<void()> hook;
  if (CrashPointIs("save_checkpoint.partial_shard")) hook = [] { CrashHere("save_checkpoint.partial_shard"); };
  Status written = WriteShard(path, shard, hook);
  if (!written.ok()) log->error("rank {}: writing checkpoint shard {}: {}", group_->rank(), path, written.message());
  int32_t failed = written.ok() ? 0 : 1;
  DSD_RETURN_IF_ERROR(AllReduce(*group_, &failed, 1, DType::kInt32, ReduceOp::kSum, "save_checkpoint.commit"));
  if (failed > 0) {
    if (!written.ok()) return written;
    return IoError("checkpoint " + dir + "/" + tag + " not committed: " + std::to_string(failed) +
                   " rank(s) could not write their shard; " + LatestPath(dir) + " still names the previous one");
  }
  if (CrashPointIs("save_checkpoint.before_latest")) CrashHere("save_checkpoint.before_latest");
  // One writer per node: with node-local storage every node gets its `latest`; on shared storage
  // the identical renames are harmless.
  if (local_rank_ == 0) DSD_RETURN_IF_ERROR(WriteLatest(dir, tag));
  DSD_RETURN_IF_ERROR(Barrier(*group_, "save_checkpoint.done"));
  log->info("rank {}: saved checkpoint {}/{} (step {})", group_->rank(), dir, tag, global_steps_);
  return Status::Ok();
}

Result<nlohmann::json> Engine::LoadCheckpoint(const std::string& dir, const std::string& tag_in) {
  PhaseScope phase(trace_, Phase::kLoadCheckpoint);
  auto log = log::Get("runtime");
  Status result = Status::Ok();
  nlohmann::json client_state = nlohmann::json::object();
  std::string tag = tag_in;
  if (tag.empty()) {
    auto latest = ReadLatest(dir);
    if (latest.ok()) tag = *latest;
    else result = latest.status();
  } else {
    result = ValidateTag(tag);
  }
  Shard shard;
  if (result.ok()) {
    std::string path = ShardPath(dir, tag, group_->rank(), group_->size());
    auto read = ReadShard(path);
    if (!read.ok() && read.status().code() == StatusCode::kNotFound && config_.zero_stage == 0) {
      // Stage 0 shards are complete copies: resuming on another world size reads rank 0's.
      if (DIR* d = ::opendir((dir + "/" + tag).c_str())) {
        while (dirent* ent = ::readdir(d)) {
          std::string name = ent->d_name;
          if (name.rfind("rank-0-of-", 0) == 0 && name.size() > 5 && name.substr(name.size() - 5) == ".ckpt") {
            read = ReadShard(dir + "/" + tag + "/" + name);
            break;
          }
        }
        ::closedir(d);
      }
    }
    if (read.ok()) shard = std::move(*read);
    else result = read.status();
  }
  if (result.ok()) {
    const auto& m = shard.meta;
    auto mismatch = [&](const std::string& what) {
      return InvalidArgument("checkpoint " + dir + "/" + tag + ": " + what);
    };
    try {
      if (m.at("num_params").get<size_t>() != n_) {
        result = mismatch("holds " + m.at("num_params").dump() + " parameters, the model has " + std::to_string(n_));
      } else if (m.at("zero_stage").get<int>() != config_.zero_stage) {
        result = mismatch("was written with ZeRO stage " + m.at("zero_stage").dump() + ", the config says " +
                          std::to_string(config_.zero_stage));
      } else if (config_.zero_stage == 1 && m.at("world_size").get<int>() != group_->size()) {
        result = mismatch("ZeRO stage 1 shards the optimizer state over " + m.at("world_size").dump() +
                          " ranks; resume with that world size (now " + std::to_string(group_->size()) + ")");
      } else if (m.at("optimizer").at("type").get<std::string>() != OptimizerTypeName(config_.optimizer.type)) {
        result = mismatch("optimizer " + m.at("optimizer").at("type").dump() + ", the config says " +
                          OptimizerTypeName(config_.optimizer.type));
      } else if (m.at("fp16").get<bool>() != fp16_) {
        result = mismatch(std::string("fp16 was ") + (fp16_ ? "off" : "on") + " when it was written");
      }
      const std::vector<float>* params = shard.Find("params");
      if (result.ok() && (!params || params->size() != n_)) result = mismatch("no params array of the model's size");
      std::vector<std::pair<std::vector<float>*, const std::vector<float>*>> copies;
      for (auto& [name, state] : optimizer_->State()) {
        const std::vector<float>* saved = shard.Find("optimizer." + name);
        if (!saved || saved->size() != state->size()) {
          if (result.ok()) result = mismatch("optimizer state " + name + " missing or of another size");
        } else {
          copies.emplace_back(state, saved);
        }
      }
      if (result.ok()) {
        float* target = fp16_ ? master_.data() : model_->parameters();
        std::copy(params->begin(), params->end(), target);
        for (auto& [dst, src] : copies) *dst = *src;
        optimizer_->set_steps(m.at("optimizer").at("steps").get<int64_t>());
        global_steps_ = m.at("global_steps").get<uint64_t>();
        micro_steps_ = m.at("micro_steps").get<uint64_t>();
        skipped_steps_ = m.at("skipped_steps").get<uint64_t>();
        if (scaler_) result = scaler_->FromJson(m.at("loss_scaler"));
        if (result.ok() && fp16_) result = SyncModelFromMaster();
        client_state = m.value("client_state", nlohmann::json::object());
        std::fill(model_->gradients(), model_->gradients() + n_, 0.0f);
        trace_->SetStep(global_steps_);
      }
    } catch (const std::exception& ex) {
      result = Corruption("checkpoint " + dir + "/" + tag + ": meta: " + ex.what());
    }
  }
  if (!result.ok()) log->error("rank {}: load_checkpoint: {}", group_->rank(), result.message());
  // Agree on the outcome, so one rank's bad shard fails every rank here instead of hanging later.
  int32_t failed = result.ok() ? 0 : 1;
  DSD_RETURN_IF_ERROR(AllReduce(*group_, &failed, 1, DType::kInt32, ReduceOp::kSum, "load_checkpoint"));
  if (!result.ok()) return result;
  if (failed > 0) {
    return Unavailable("load_checkpoint: " + std::to_string(failed) + " other rank(s) could not load " + dir + "/" + tag);
  }
  log->info("rank {}: loaded checkpoint {}/{} (step {})", group_->rank(), dir, tag, global_steps_);
  return client_state;
}

}  // namespace dsd::runtime
