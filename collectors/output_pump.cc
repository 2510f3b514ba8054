#include "collectors/output_pump.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace dsd::collectors {

struct OutputPump::Channel {
  std::mutex mu;
  std::string path;
  net::Fd pipe;  // the read end, non-blocking; closed at EOF
  net::Fd log;
  std::string held;
  std::string mark;  // the gap's line, while not all of it is written
  uint64_t written = 0, lost = 0, lost_unmarked = 0;
  std::string error;
};

namespace {

constexpr size_t kPipeBytes = 1u << 20;
constexpr size_t kReadPerTurn = 4u << 20;  // per channel and turn of the loop: fair to the others

// Writes all of [data, data + n) or returns how much it wrote before an error (errno set).
size_t WriteAll(int fd, const char* data, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::write(fd, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = ENOSPC;
      break;
    }
    done += static_cast<size_t>(w);
  }
  return done;
}

}  // namespace

size_t OutputPump::PipeBytesFor(size_t ranks) {
  // 16 MiB in all (a quarter of the default per-user quota of 64 MiB), 64 KiB to 1 MiB a pipe.
  return std::clamp<size_t>((16u << 20) / std::max<size_t>(ranks, 1), 64u << 10, kPipeBytes);
}

OutputPump::OutputPump(Limits limits) : limits_(limits) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    wake_read_ = net::Fd(fds[0]);
    wake_write_ = net::Fd(fds[1]);
  }
  thread_ = std::thread([this] { Loop(); });
}

OutputPump::~OutputPump() {
  stop_ = true;
  if (wake_write_.valid()) (void)!::write(wake_write_.get(), "x", 1);
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : channels_) {
    std::lock_guard<std::mutex> cl(c->mu);
    if (c->pipe.valid()) Pump(*c);
    WriteHeld(*c);
  }
}

Result<net::Fd> OutputPump::Add(const std::string& log_path, size_t* index, size_t pipe_bytes) {
  auto c = std::make_unique<Channel>();
  c->path = log_path;
  c->log = net::Fd(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644));
  if (!c->log.valid()) return ErrnoError("log file " + log_path, errno);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe for " + log_path, errno);
  net::Fd write_end(fds[1]);
  c->pipe = net::Fd(fds[0]);
  ::fcntl(c->pipe.get(), F_SETFL, O_NONBLOCK);
  // Best effort: the kernel caps it, and the user's pipe quota (pipe-user-pages-soft) is shared with
  // the job's own pipes, so a node of many ranks asks for less a pipe (PipeBytesFor).
  (void)::fcntl(c->pipe.get(), F_SETPIPE_SZ, static_cast<int>(std::min(pipe_bytes, kPipeBytes)));
  {
    std::lock_guard<std::mutex> lock(mu_);
    *index = channels_.size();
    channels_.push_back(std::move(c));
  }
  if (wake_write_.valid()) (void)!::write(wake_write_.get(), "x", 1);
  return write_end;
}

OutputPump::Channel* OutputPump::At(size_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index < channels_.size() ? channels_[index].get() : nullptr;  // channels are never removed
}

void OutputPump::Flush(size_t index) {
  Channel* c = At(index);
  if (!c) return;
  std::lock_guard<std::mutex> lock(c->mu);
  if (c->pipe.valid()) Pump(*c);
  WriteHeld(*c);
}

OutputPump::Stats OutputPump::stats(size_t index) const {
  Channel* c = At(index);
  if (!c) return {};
  std::lock_guard<std::mutex> lock(c->mu);
  return {c->written, c->held.size(), c->lost, c->error};
}

void OutputPump::Loop() {
  std::vector<pollfd> fds;
  std::vector<Channel*> polled;
  while (!stop_) {
    fds.clear();
    polled.clear();
    if (wake_read_.valid()) fds.push_back({wake_read_.get(), POLLIN, 0});
    bool holding = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& c : channels_) {
        std::lock_guard<std::mutex> cl(c->mu);
        holding |= !c->held.empty() || c->lost_unmarked > 0;
        if (!c->pipe.valid()) continue;
        fds.push_back({c->pipe.get(), POLLIN, 0});
        polled.push_back(c.get());
      }
    }
    // While bytes wait for the disk, look again every 200 ms whether it has room.
    int ready = ::poll(fds.data(), fds.size(), holding ? 200 : 1000);
    if (stop_) break;
    if (ready < 0 && errno != EINTR) {
      log::Get("run")->warn("output pump: poll: {}", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    const size_t first = wake_read_.valid() ? 1 : 0;
    if (first && ready > 0 && fds[0].revents) {
      char drain[256];
      while (::read(wake_read_.get(), drain, sizeof drain) > 0) {
      }
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      Channel& c = *polled[i];
      std::lock_guard<std::mutex> cl(c.mu);
      if (ready > 0 && fds[first + i].revents && c.pipe.valid()) Pump(c);
    }
    if (holding) {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& c : channels_) {
        std::lock_guard<std::mutex> cl(c->mu);
        WriteHeld(*c);
      }
    }
  }
}

void OutputPump::Pump(Channel& c) {
  char buf[65536];
  size_t turn = 0;
  while (turn < kReadPerTurn) {
    ssize_t n = ::read(c.pipe.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: all read for now
    if (n == 0) {       // every writer closed it: the rank and its children are done
      c.pipe.Reset();
      if (c.held.empty() && c.lost_unmarked == 0) c.log.Reset();  // a node of many ranks needs it back
      return;
    }
    Deliver(c, buf, static_cast<size_t>(n));
    turn += static_cast<size_t>(n);
  }
}

void OutputPump::Deliver(Channel& c, const char* data, size_t n) {
  if (!WriteHeld(c)) return Hold(c, data, n);  // order: what waits goes first
  size_t done = WriteAll(c.log.get(), data, n);
  c.written += done;
  if (done < n) {
    c.error = std::strerror(errno);
    Hold(c, data + done, n - done);
  }
}

void OutputPump::Hold(Channel& c, const char* data, size_t n) {
  const size_t total = total_held_.load();
  const size_t room = std::min(limits_.per_rank - std::min(limits_.per_rank, c.held.size()),
                               limits_.total - std::min(limits_.total, total));
  const size_t keep = c.lost_unmarked > 0 ? 0 : std::min(n, room);  // after a gap, nothing until it is marked
  c.held.append(data, keep);
  total_held_ += keep;
  c.lost += n - keep;
  c.lost_unmarked += n - keep;
}

bool OutputPump::WriteHeld(Channel& c) {
  if (!c.log.valid()) return true;  // closed after the pipe's end with nothing left
  if (!c.held.empty()) {
    size_t done = WriteAll(c.log.get(), c.held.data(), c.held.size());
    c.written += done;
    c.held.erase(0, done);
    total_held_ -= done;
    if (!c.held.empty()) {
      c.error = std::strerror(errno);
      return false;
    }
  }
  if (c.lost_unmarked > 0) {
    if (c.mark.empty())
      c.mark = "\n[dsdoctor: " + std::to_string(c.lost_unmarked) +
               " bytes of this rank's output were lost here: " + c.error + "]\n";
    c.mark.erase(0, WriteAll(c.log.get(), c.mark.data(), c.mark.size()));  // the rest later, never twice
    if (!c.mark.empty()) return false;
    c.lost_unmarked = 0;
  }
  if (!c.pipe.valid()) c.log.Reset();  // the pipe ended and all is written
  return true;
}

}  // namespace dsd::collectors
