// Carries each rank's stdout+stderr from a pipe to its log file (rank-<r>.log) on a thread of its
// own, so that the log's file system can never fail the rank: a rank whose output went straight
// into the file got ENOSPC from `print` on a full disk and died (rc 1), where the same program
// under torchrun finished. When a write fails, the bytes wait in memory (at most 1 MiB a rank and
// 64 MiB in all) and are written when space returns; beyond that they are dropped and counted,
// and a line in the log marks the gap once writing resumes ("[dsdoctor: N bytes of this rank's
// output were lost here: No space left on device]"). The pipe holds up to 1 MiB (less a pipe on a
// node of many ranks: PipeBytesFor), and the thread drains it as bytes arrive, so a rank waits on
// it no longer than on a terminal. A channel's log is closed once its pipe ended and all is written.
//
// Thread-safe: Add, Flush and Stats may be called from any thread; the pump's own thread reads
// the pipes. Destroying it drains what the pipes hold, writes what it can, and stops the thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/net.h"
#include "common/status.h"

namespace dsd::collectors {

class OutputPump {
 public:
  struct Limits {
    size_t per_rank = 1u << 20;  // bytes held in memory for one log while its writes fail
    size_t total = 64u << 20;    // and for all of them
  };
  explicit OutputPump(Limits limits);
  OutputPump() : OutputPump(Limits{}) {}
  ~OutputPump();
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // A channel into `log_path` (created, or truncated): returns the write end of its pipe, for the
  // child's stdout and stderr (close it once the child is started), and the channel's index.
  Result<net::Fd> Add(const std::string& log_path, size_t* index, size_t pipe_bytes = 1u << 20);
  // The pipe size for each of `ranks` ranks of a node (their pipes share the user's pipe quota).
  static size_t PipeBytesFor(size_t ranks);
  // Reads what the channel's pipe holds now and writes what it can: called when the rank's exit
  // is seen, so that its last output is in the log before the exit is reported.
  void Flush(size_t index);

  struct Stats {
    uint64_t written = 0;  // bytes in the log
    uint64_t held = 0;     // bytes waiting in memory for the log's file system
    uint64_t lost = 0;     // bytes dropped (over the limits while writes failed)
    std::string error;     // the newest failed write's error ("No space left on device")
  };
  Stats stats(size_t index) const;

 private:
  struct Channel;
  void Loop();
  void Pump(Channel& c);                                 // c.mu held
  void Deliver(Channel& c, const char* data, size_t n);  // c.mu held
  bool WriteHeld(Channel& c);                            // c.mu held; true when nothing waits
  void Hold(Channel& c, const char* data, size_t n);     // c.mu held
  Channel* At(size_t index) const;

  const Limits limits_;
  mutable std::mutex mu_;  // guards channels_ (the vector; each channel has its own lock)
  std::vector<std::unique_ptr<Channel>> channels_;
  std::atomic<size_t> total_held_{0};
  std::atomic<bool> stop_{false};
  net::Fd wake_read_, wake_write_;  // a byte here makes the thread look at the channels again
  std::thread thread_;
};

}  // namespace dsd::collectors
