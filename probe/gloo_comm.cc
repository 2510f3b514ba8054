#include "probe/gloo_comm.h"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <exception>
#include <map>

#include "common/log.h"

namespace dsd::probe {
namespace {

// The peers rank `rank` of `size` exchanges with in SyncAllReduce: its fold partner (first 2·rem
// ranks), then one per doubling step. Order and values depend on (rank, size) alone.
struct Partners {
  int fold = -1;             // -1: none
  bool folded_away = false;  // an even rank of the first 2·rem: sits out the steps
  int newrank = 0;           // its rank among the pof2 ranks that take part in the steps
  std::vector<int> steps;    // the partner of each step, by increasing mask
};

Partners PartnersOf(int rank, int size) {
  Partners p;
  int pof2 = 1;
  while (pof2 * 2 <= size) pof2 *= 2;
  const int rem = size - pof2;
  p.newrank = rank - rem;
  if (rank < 2 * rem) {
    p.fold = rank % 2 == 0 ? rank + 1 : rank - 1;
    p.folded_away = rank % 2 == 0;
    if (p.folded_away) return p;
    p.newrank = rank / 2;
  }
  for (int mask = 1; mask < pof2; mask *= 2) {
    const int partner = p.newrank ^ mask;
    p.steps.push_back(partner < rem ? partner * 2 + 1 : partner + rem);
  }
  return p;
}

// dst[i] += src[i]. Written so that -O2 vectorizes it: the buffers cannot overlap, and the main
// loop's fixed 16-float body needs no runtime checks. The plain loop ran one float per instruction,
// ~15 % of a 1 MiB all-reduce on 2 ranks.
void AddFloats(float* __restrict dst, const float* __restrict src, size_t n) {
  constexpr size_t kBlock = 16;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    for (size_t j = 0; j < kBlock; ++j) dst[i + j] += src[i + j];
  }
  for (; i < n; ++i) dst[i] += src[i];
}

// In-place sum of `count` floats over all ranks on Gloo's bound buffers in synchronous mode.
// Small buffers (≤ kGlooRecursiveDoublingMaxBytes): recursive doubling, log2(p) exchanges of the
// whole buffer, the fewest round trips. Larger: recursive halving (reduce-scatter) then recursive
// doubling (allgather), which moves 2·(p−1)/p of the buffer per rank, the bandwidth optimum.
// A rank count that is not a power of two first folds the first 2·rem ranks in pairs (the even
// one hands its data to the odd one and gets the result back at the end), as MPICH does.
//
// Both peers of an exchange send before they receive, so both directions of a link are busy at
// once. A synchronous send is a blocking write: two peers writing more than their socket buffers
// hold, neither reading, would wait on each other. Exchanges therefore go in pieces of
// kExchangePieceBytes, each side at most one piece ahead of what it has read.
//
// Memory traffic, which is what a loopback or fast link leaves to the CPU:
// - Every piece to be summed lands at the start of a one-piece scratch buffer and is added to
//   data at once. A message is read only when its receiver waits: a wait reads messages in the
//   order sent until one for its own buffer has arrived, whatever slot the ones before it name.
//   Each peer reads exactly in the order the other sends, so every wait reads one message, its
//   own, and a peer running ahead cannot overwrite a piece not yet summed. The scratch stays in
//   cache however large the buffer.
// - The last halving step and the first doubling step have the same peer and the same ranges
//   turned around, so they go together piece by piece: a piece summed is sent back at once,
//   while still in cache, instead of after the whole half (for 2 ranks that is every piece).
// Every rank must build its instances in the same order (slots come from the context).
class SyncAllReduce {
 public:
  static constexpr size_t kExchangePieceBytes = 256 << 10;
  static constexpr size_t kPieceFloats = kExchangePieceBytes / sizeof(float);

  // Floats of scratch an instance for `count` floats needs; instances that never run at the same
  // time may share it.
  static size_t ScratchFloats(size_t count) { return std::min(count, kPieceFloats); }

  SyncAllReduce(const std::shared_ptr<gloo::Context>& ctx, float* data, size_t count, float* scratch)
      : data_(data), count_(count), scratch_(scratch) {
    const int reduce_slot = ctx->nextSlot(), gather_slot = ctx->nextSlot();
    const Partners partners = PartnersOf(ctx->rank, ctx->size);
    if (partners.fold >= 0) fold_ = MakePeer(ctx, partners.fold, reduce_slot, gather_slot);
    folded_away_ = partners.folded_away;
    halving_ = count * sizeof(float) > kGlooRecursiveDoublingMaxBytes;
    size_t lo = 0, hi = count;
    for (size_t k = 0; k < partners.steps.size(); ++k) {
      const int mask = 1 << k;
      Step step{MakePeer(ctx, partners.steps[k], reduce_slot, gather_slot), lo, hi, lo, hi};
      if (halving_) {
        const size_t mid = lo + (hi - lo) / 2;
        if ((partners.newrank & mask) == 0) {
          step.keep_hi = step.give_lo = mid;  // keeps the lower half
        } else {
          step.keep_lo = step.give_hi = mid;
        }
        lo = step.keep_lo;
        hi = step.keep_hi;
      }
      steps_.push_back(std::move(step));
    }
  }

  void Run() {
    if (folded_away_) {
      Send(*fold_.send_reduce, 0, count_, /*reduce=*/true);
      Receive(*fold_.recv_data, 0, count_, /*reduce=*/false);
      return;
    }
    if (fold_.send_reduce) Receive(*fold_.recv_scratch, 0, count_, /*reduce=*/true);
    // Recursive doubling swaps whole buffers and sums what it receives. Halving sends the half it
    // gives away and sums the half it keeps; doubling then sends the summed half back and receives
    // the other, in reverse order of steps. The turn-around step (halving's last) is both at once.
    const bool turn_around = halving_ && !steps_.empty();
    const size_t reduce_steps = steps_.size() - (turn_around ? 1 : 0);
    for (size_t k = 0; k < reduce_steps; ++k) {
      auto& s = steps_[k];
      Exchange(*s.peer.send_reduce, s.give_lo, s.give_hi, *s.peer.recv_scratch, s.keep_lo, s.keep_hi,
               /*reduce=*/true);
    }
    if (turn_around) {
      TurnAround(steps_.back());
      for (size_t k = reduce_steps; k-- > 0;) {
        auto& s = steps_[k];
        Exchange(*s.peer.send_gather, s.keep_lo, s.keep_hi, *s.peer.recv_data, s.give_lo, s.give_hi,
                 /*reduce=*/false);
      }
    }
    if (fold_.send_reduce) Send(*fold_.send_gather, 0, count_, /*reduce=*/false);
  }

 private:
  // A peer's buffers. Reduce slot: sent from data to the peer's scratch (to be summed there).
  // Gather slot: final values, from data straight into the peer's data at the same offsets.
  struct Peer {
    std::unique_ptr<gloo::transport::Buffer> send_reduce, recv_scratch, send_gather, recv_data;
  };
  struct Step {
    Peer peer;
    size_t keep_lo, keep_hi;  // elements this rank sums (and later sends back)
    size_t give_lo, give_hi;  // elements it hands to the peer (and later receives)
  };

  Peer MakePeer(const std::shared_ptr<gloo::Context>& ctx, int rank, int reduce_slot, int gather_slot) {
    auto& pair = ctx->getPair(rank);
    const size_t bytes = count_ * sizeof(float);
    Peer p;
    p.send_reduce = pair->createSendBuffer(reduce_slot, data_, bytes);
    p.recv_scratch = pair->createRecvBuffer(reduce_slot, scratch_, ScratchFloats(count_) * sizeof(float));
    p.send_gather = pair->createSendBuffer(gather_slot, data_, bytes);
    p.recv_data = pair->createRecvBuffer(gather_slot, data_, bytes);
    return p;
  }

  static size_t Pieces(size_t lo, size_t hi) { return (hi - lo + kPieceFloats - 1) / kPieceFloats; }
  static size_t PieceFirst(size_t lo, size_t i) { return lo + i * kPieceFloats; }
  static size_t PieceLast(size_t lo, size_t hi, size_t i) { return std::min(hi, PieceFirst(lo, i) + kPieceFloats); }

  // Piece i of elements [lo, hi): with `reduce`, to the start of the peer's scratch (to be
  // summed), otherwise to the same offset in the peer's data.
  static void SendPiece(gloo::transport::Buffer& send, size_t lo, size_t hi, size_t i, bool reduce) {
    const size_t first = PieceFirst(lo, i), last = PieceLast(lo, hi, i);
    send.send(first * sizeof(float), (last - first) * sizeof(float), reduce ? 0 : first * sizeof(float));
    send.waitSend();  // returns at once: a synchronous send has been written when send() returns
  }

  // Waits for piece i of elements [lo, hi); with `reduce` it is in scratch and is added to data
  // now, while it is in cache and before the next piece can land there.
  void ReceivePiece(gloo::transport::Buffer& recv, size_t lo, size_t hi, size_t i, bool reduce) {
    recv.waitRecv();
    if (!reduce) return;
    const size_t first = PieceFirst(lo, i);
    AddFloats(data_ + first, scratch_, PieceLast(lo, hi, i) - first);
  }

  // Sends elements [slo, shi) and receives [rlo, rhi), interleaved piece by piece, on the reduce
  // or the gather slot.
  void Exchange(gloo::transport::Buffer& send, size_t slo, size_t shi, gloo::transport::Buffer& recv, size_t rlo,
                size_t rhi, bool reduce) {
    const size_t sends = Pieces(slo, shi), recvs = Pieces(rlo, rhi);
    for (size_t i = 0; i < std::max(sends, recvs); ++i) {
      if (i < sends) SendPiece(send, slo, shi, i, reduce);
      if (i < recvs) ReceivePiece(recv, rlo, rhi, i, reduce);
    }
  }

  // The last halving step and the first doubling step together: per piece, send the piece given
  // away, sum the piece kept, send it back summed, receive the given piece's final values. Both
  // peers send and read in the same order (their give and keep ranges are each other's), and
  // neither is more than one message ahead of what it has read.
  void TurnAround(Step& s) {
    const size_t gives = Pieces(s.give_lo, s.give_hi), keeps = Pieces(s.keep_lo, s.keep_hi);
    for (size_t i = 0; i < std::max(gives, keeps); ++i) {
      if (i < gives) SendPiece(*s.peer.send_reduce, s.give_lo, s.give_hi, i, /*reduce=*/true);
      if (i < keeps) {
        ReceivePiece(*s.peer.recv_scratch, s.keep_lo, s.keep_hi, i, /*reduce=*/true);
        SendPiece(*s.peer.send_gather, s.keep_lo, s.keep_hi, i, /*reduce=*/false);
      }
      if (i < gives) ReceivePiece(*s.peer.recv_data, s.give_lo, s.give_hi, i, /*reduce=*/false);
    }
  }

  static void Send(gloo::transport::Buffer& send, size_t lo, size_t hi, bool reduce) {
    for (size_t i = 0; i < Pieces(lo, hi); ++i) SendPiece(send, lo, hi, i, reduce);
  }
  void Receive(gloo::transport::Buffer& recv, size_t lo, size_t hi, bool reduce) {
    for (size_t i = 0; i < Pieces(lo, hi); ++i) ReceivePiece(recv, lo, hi, i, reduce);
  }

  float* data_;
  size_t count_;
  float* scratch_;
  Peer fold_;  // the partner of the first 2·rem ranks
  bool folded_away_ = false;
  bool halving_ = false;
  std::vector<Step> steps_;
};

class GlooCommunicator final : public HostBufferCommunicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> ctx, bool busy_poll)
      : ctx_(std::move(ctx)), busy_poll_(busy_poll) {}
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  std::string backend() const override { return "gloo"; }
  std::string mode() const override {
    return busy_poll_ ? "synchronous pairs, busy-polling" : "synchronous pairs, blocking reads";
  }

  Status Prepare(size_t max_count) override {
    algorithms_.clear();  // they hold pointers into the buffers
    scratch_.assign(SyncAllReduce::ScratchFloats(max_count), 0.0f);
    return HostBufferCommunicator::Prepare(max_count);
  }

  Status AllReduceSum(size_t count) override {
    if (count > buffer_.size()) return Internal("all-reduce larger than the prepared buffer");
    try {
      auto it = algorithms_.find(count);
      if (it == algorithms_.end()) {
        // Built before it is stored: a constructor that throws leaves no half entry whose retry
        // would take slots again and fall out of step with the other ranks.
        auto built = std::make_unique<SyncAllReduce>(ctx_, buffer_.data(), count, scratch_.data());
        it = algorithms_.emplace(count, std::move(built)).first;
      }
      it->second->Run();
    } catch (const std::exception& e) {
      return Unavailable(std::string("gloo allreduce: ") + e.what());
    }
    return Status::Ok();
  }

  // A one-float all-reduce: no rank leaves before every rank has arrived.
  Status Barrier() override {
    try {
      if (!barrier_) barrier_ = std::make_unique<SyncAllReduce>(ctx_, &barrier_value_, 1, &barrier_scratch_);
      barrier_->Run();
    } catch (const std::exception& e) {
      return Unavailable(std::string("gloo barrier: ") + e.what());
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  bool busy_poll_;
  std::map<size_t, std::unique_ptr<SyncAllReduce>> algorithms_;  // by count, built on first use
  std::vector<float> scratch_;                                   // shared: one runs at a time
  float barrier_value_ = 0, barrier_scratch_ = 0;
  std::unique_ptr<SyncAllReduce> barrier_;
};

// Gloo sets a pair's SO_SNDBUF to the largest message sent on it so far, and setting it turns off
// the kernel's buffer autotuning: after a first small message the buffer stays a few KiB, and a
// larger synchronous send then blocks in write(2) until the peer reads (tens of ms per operation
// when both peers are writing). One piece-sized message per pair, first, sizes every buffer for
// the pieces that follow. Lower rank sends first, so no two peers write it at once.
void SizeSendBuffers(gloo::Context& ctx) {
  const size_t bytes = SyncAllReduce::kExchangePieceBytes;
  std::vector<char> out(bytes), in(bytes);
  const int slot = ctx.nextSlot();
  // Only the pairs SyncAllReduce uses: at 1,024 ranks that is 11 exchanges, not 1,023.
  const Partners partners = PartnersOf(ctx.rank, ctx.size);
  std::vector<int> peers = partners.steps;
  if (partners.fold >= 0) peers.push_back(partners.fold);
  std::sort(peers.begin(), peers.end());
  for (int peer : peers) {
    auto send = ctx.getPair(peer)->createSendBuffer(slot, out.data(), bytes);
    auto recv = ctx.getPair(peer)->createRecvBuffer(slot, in.data(), bytes);
    if (ctx.rank < peer) {
      send->send();
      send->waitSend();
      recv->waitRecv();
    } else {
      recv->waitRecv();
      send->send();
      send->waitSend();
    }
  }
}

}  // namespace

bool GlooBusyPollFits(int ranks_on_host, int host_cpus) { return host_cpus > 0 && ranks_on_host <= host_cpus; }

std::vector<bool> GlooBusyPollPerRank(const std::vector<RankHost>& ranks) {
  std::map<std::string, int> on_host;
  for (const auto& r : ranks) ++on_host[r.hostname];
  std::vector<bool> busy;
  for (const auto& r : ranks) busy.push_back(!r.hostname.empty() && GlooBusyPollFits(on_host[r.hostname], r.cpus));
  return busy;
}

Result<std::shared_ptr<gloo::rendezvous::Context>> ConnectGlooContext(int rank, int size,
                                                                      gloo::rendezvous::Store& store,
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
                                                             const std::string& bind_host, Duration timeout,
                                                             const GlooProbeOptions& options) {
  DSD_ASSIGN_OR_RETURN(auto ctx, ConnectGlooContext(rank, size, store, bind_host, timeout));
  try {
    // One-way: the device thread stops serving these sockets. Reads keep the context's timeout
    // (SO_RCVTIMEO, or a deadline while spinning), so a dead peer is an error, not a hang.
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) ctx->getPair(peer)->setSync(true, options.busy_poll);
    }
    SizeSendBuffers(*ctx);
  } catch (const std::exception& e) {
    return Unavailable(std::string("gloo synchronous mode: ") + e.what());
  }
  return std::unique_ptr<Communicator>(new GlooCommunicator(ctx, options.busy_poll));
}

}  // namespace dsd::probe
