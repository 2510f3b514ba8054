#include "probe/gloo_comm.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <exception>

#include "common/log.h"

namespace dsd::probe {
namespace {

void SumFloats(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<float*>(c);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

class GlooCommunicator final : public HostBufferCommunicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> ctx, Duration timeout)
      : ctx_(std::move(ctx)), timeout_(std::chrono::duration_cast<std::chrono::milliseconds>(timeout)) {}
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  std::string backend() const override { return "gloo"; }

  Status AllReduceSum(size_t count) override {
    try {
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(buffer_.data(), count);
      opts.setReduceFunction(SumFloats);
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    } catch (const std::exception& e) {
      return Unavailable(std::string("gloo allreduce: ") + e.what());
    }
    return Status::Ok();
  }

  Status Barrier() override {
    try {
      gloo::BarrierOptions opts(ctx_);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    } catch (const std::exception& e) {
      return Unavailable(std::string("gloo barrier: ") + e.what());
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

Result<std::shared_ptr<gloo::rendezvous::Context>> ConnectGlooContext(int rank, int size, gloo::rendezvous::Store& store,
                                                                      const std::string& bind_host, Duration timeout) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = bind_host;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    ctx->connectFullMesh(store, dev);
    log::Get("probe")->debug("gloo rank {}/{} connected from {}", rank, size, bind_host);
    return ctx;
  } catch (const std::exception& e) {
    return Unavailable(std::string("gloo rendezvous: ") + e.what());
  }
}

Result<std::unique_ptr<Communicator>> CreateGlooCommunicator(int rank, int size, gloo::rendezvous::Store& store,
                                                             const std::string& bind_host, Duration timeout) {
  DSD_ASSIGN_OR_RETURN(auto ctx, ConnectGlooContext(rank, size, store, bind_host, timeout));
  return std::unique_ptr<Communicator>(new GlooCommunicator(ctx, timeout));
}

}  // namespace dsd::probe
