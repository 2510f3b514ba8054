#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <cstring>
#include <exception>

#include "common/log.h"
#include "probe/gloo_comm.h"
#include "runtime/backends.h"

namespace dsd::runtime {
namespace {

// p2p slots live above every collective prefix gloo uses (0x01-0x08).
constexpr uint64_t kP2pSlotBase = uint64_t{0x7f} << 56;

template <typename F>
void WithElement(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: f(static_cast<float*>(nullptr)); break;
    case DType::kFloat16: f(static_cast<uint16_t*>(nullptr)); break;
    case DType::kInt32: f(static_cast<int32_t*>(nullptr)); break;
    case DType::kInt64: f(static_cast<int64_t*>(nullptr)); break;
    case DType::kUint8: f(static_cast<uint8_t*>(nullptr)); break;
    default: break;  // the runtime never sends the Python tracer's types
  }
}

class GlooBackend final : public Backend {
 public:
  GlooBackend(std::shared_ptr<gloo::rendezvous::Context> ctx, Duration timeout)
      : ctx_(std::move(ctx)), timeout_(std::chrono::duration_cast<std::chrono::milliseconds>(timeout)) {}
  std::string name() const override { return "gloo"; }
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }

  Status AllReduce(void* data, size_t count, DType dtype, ReduceOp op) override {
    if (count == 0) return Status::Ok();
    return Guard("allreduce", [&] {
      gloo::AllreduceOptions opts(ctx_);
      WithElement(dtype, [&](auto* type) {
        using T = std::remove_pointer_t<decltype(type)>;
        opts.setOutput(static_cast<T*>(data), count);
      });
      size_t elem = DTypeSize(dtype);
      opts.setReduceFunction([dtype, op, elem](void* c, const void* a, const void* b, size_t n) {
        if (c != a) std::memcpy(c, a, n * elem);
        ReduceInto(c, b, n, dtype, op);
      });
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    });
  }

  Status Broadcast(void* data, size_t count, DType dtype, int root) override {
    if (count == 0) return Status::Ok();
    return Guard("broadcast", [&] {
      gloo::BroadcastOptions opts(ctx_);
      WithElement(dtype, [&](auto* type) {
        using T = std::remove_pointer_t<decltype(type)>;
        opts.setOutput(static_cast<T*>(data), count);
      });
      opts.setRoot(root);
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    });
  }

  Status AllGather(const void* in, void* out, size_t count, DType dtype) override {
    return Guard("allgather", [&] {
      gloo::AllgatherOptions opts(ctx_);
      WithElement(dtype, [&](auto* type) {
        using T = std::remove_pointer_t<decltype(type)>;
        opts.setInput(const_cast<T*>(static_cast<const T*>(in)), count);
        opts.setOutput(static_cast<T*>(out), count * static_cast<size_t>(ctx_->size));
      });
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
  }

  Status Barrier() override {
    return Guard("barrier", [&] {
      gloo::BarrierOptions opts(ctx_);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

  Status Send(const void* data, size_t count, DType dtype, int peer, uint32_t tag) override {
    return Guard("send", [&] {
      auto buf = ctx_->createUnboundBuffer(const_cast<void*>(data), count * DTypeSize(dtype));
      buf->send(peer, kP2pSlotBase | tag);
      if (!buf->waitSend(timeout_)) throw std::runtime_error("send to rank " + std::to_string(peer) + " aborted");
    });
  }

  Status Recv(void* data, size_t count, DType dtype, int peer, uint32_t tag) override {
    return Guard("recv", [&] {
      auto buf = ctx_->createUnboundBuffer(data, count * DTypeSize(dtype));
      buf->recv(peer, kP2pSlotBase | tag);
      if (!buf->waitRecv(timeout_)) throw std::runtime_error("recv from rank " + std::to_string(peer) + " aborted");
    });
  }

 private:
  template <typename F>
  Status Guard(const char* what, F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return Unavailable(std::string("gloo ") + what + ": " + e.what());
    }
    return Status::Ok();
  }

  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

Result<std::unique_ptr<Backend>> CreateGlooBackend(int rank, int size, gloo::rendezvous::Store& store,
                                                   const std::string& bind_host, Duration timeout) {
  DSD_ASSIGN_OR_RETURN(auto ctx, probe::ConnectGlooContext(rank, size, store, bind_host, timeout));
  return std::unique_ptr<Backend>(new GlooBackend(ctx, timeout));
}

}  // namespace dsd::runtime
