#include "collectors/rank_exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "common/strings.h"
#include "common/subprocess.h"
#include "tracers/launcher_env.h"

namespace dsd::collectors {

namespace {

constexpr size_t kMaxLine = 128;                        // every message but the grant's environment
constexpr size_t kMaxEnvBytes = size_t{16} << 20;       // the grant's environment
constexpr auto kHelloWithin = std::chrono::seconds(5);  // an accepted connection says hello by then
constexpr auto kGrantSendTimeout = std::chrono::seconds(2);

Result<sockaddr_un> AbstractAddress(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof a.sun_path)
    return InvalidArgument("rank-exec socket name '" + name + "' is empty or longer than " +
                           std::to_string(sizeof a.sun_path - 1) + " bytes");
  std::memcpy(a.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: the abstract namespace
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

// The peer's credentials; nullopt when they cannot be read.
std::optional<ucred> PeerOf(int fd) {
  ucred c{};
  socklen_t n = sizeof c;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &n) != 0) return std::nullopt;
  return c;
}

// Whether `fd` can take bytes before `deadline`.
bool WaitWritable(int fd, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    return n > 0 && (p.revents & POLLOUT);
  }
}

// SendAll on a non-blocking socket, all of it before `deadline`.
bool SendAllBy(int fd, std::string_view bytes, std::chrono::steady_clock::time_point deadline) {
  while (!bytes.empty()) {
    if (!WaitWritable(fd, deadline)) return false;
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void SetTimeout(int fd, int option, Duration d) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  timeval tv{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
  ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
}

// Strict decimal of [0, 2^31).
std::optional<int> Number(std::string_view s) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > INT32_MAX) return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace

Result<net::Fd> ConnectRankExec(const std::string& name) {
  socklen_t len = 0;
  DSD_ASSIGN_OR_RETURN(sockaddr_un addr, AbstractAddress(name, &len));
  net::Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError("socket", errno);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return ErrnoError("no agent listens on @" + name, errno);
  return fd;
}

bool MpiLauncherVariable(std::string_view name) {
  for (const char* prefix : {"OMPI_", "PMIX_", "PMI_"})
    if (StartsWith(name, prefix)) return true;
  return false;
}

std::string RankExecSocketName(const std::string& run_id, size_t node_index) {
  return "dsdoctor-rank-exec/" + run_id + "/" + std::to_string(node_index);
}

Result<std::vector<RankExecNode>> ParseRankExecNodes(std::string_view spec) {
  std::vector<RankExecNode> nodes;
  for (const auto& entry : Split(std::string(spec), ',')) {
    const size_t colon = entry.find(':');
    auto slots = colon == std::string::npos ? std::nullopt : Number(entry.substr(0, colon));
    if (!slots || *slots <= 0 || colon + 1 >= entry.size())
      return InvalidArgument("--nodes: '" + entry + "' is not SLOTS:SOCKET (e.g. 2:dsdoctor-rank-exec/RUN/0)");
    nodes.push_back({*slots, entry.substr(colon + 1)});
  }
  if (nodes.empty()) return InvalidArgument("--nodes: no node listed");
  return nodes;
}

std::string FormatRankExecNodes(const std::vector<RankExecNode>& nodes) {
  std::string out;
  for (const auto& n : nodes) out += (out.empty() ? "" : ",") + std::to_string(n.slots) + ":" + n.socket;
  return out;
}

std::string RankExecSocketOf(const std::vector<RankExecNode>& nodes, int rank) {
  int first = 0;
  for (const auto& n : nodes) {
    if (rank >= first && rank < first + n.slots) return n.socket;
    first += n.slots;
  }
  return "";
}

// ---- the agent's side ----

struct RankExecListener::Conn {
  net::Fd fd;
  std::string in;  // bytes of a line not yet ended
  int rank = -1;   // from its hello
  bool granted = false, started = false, exited = false;
  pid_t shim_pid = 0;  // SO_PEERCRED
  std::chrono::steady_clock::time_point accepted;
};

RankExecListener::RankExecListener(net::Fd fd, std::string name, size_t expected)
    : fd_(std::move(fd)), name_(std::move(name)), max_conns_(expected + 64) {}

RankExecListener::~RankExecListener() = default;

Result<std::unique_ptr<RankExecListener>> RankExecListener::Listen(const std::string& name, size_t expected_ranks) {
  socklen_t len = 0;
  DSD_ASSIGN_OR_RETURN(sockaddr_un addr, AbstractAddress(name, &len));
  net::Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoError("rank-exec socket", errno);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return ErrnoError("rank-exec socket @" + name + " (another run's, or taken by another process)", errno);
  if (::listen(fd.get(), 128) != 0) return ErrnoError("listen @" + name, errno);
  return std::unique_ptr<RankExecListener>(new RankExecListener(std::move(fd), name, expected_ranks));
}

void RankExecListener::Close() { fd_.Reset(); }

void RankExecListener::Accept() {
  // At most a batch per tick: a flood of connections costs the agent's tick a bounded time.
  for (int batch = 0; fd_.valid() && batch < 64; ++batch) {
    net::Fd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!c.valid()) {
      if (errno == EINTR) continue;
      return;  // EAGAIN: none waits
    }
    // Only our own user's processes: the name is not protected by file permissions.
    auto peer = PeerOf(c.get());
    if (!peer || peer->uid != ::geteuid()) {
      if (refused_++ % 1000 == 0)
        log::Get("run")->warn("rank-exec: refused a connection from uid {} ({} so far)",
                              peer ? static_cast<int>(peer->uid) : -1, refused_);
      continue;
    }
    if (conns_.size() >= max_conns_) continue;  // work before a hello is bounded
    auto conn = std::make_unique<Conn>();
    conn->fd = std::move(c);
    conn->shim_pid = peer->pid;
    conn->accepted = std::chrono::steady_clock::now();
    conns_.push_back(std::move(conn));
  }
}

bool RankExecListener::Read(Conn& c, const GrantFn& grant, std::vector<Event>* events) {
  auto lost = [&] {
    if (c.granted && !c.exited) {
      Event e;
      e.kind = Event::Kind::kLost;
      e.rank = c.rank;
      e.started = c.started;
      events->push_back(e);
    }
    return false;
  };
  char buf[512];
  bool eof = false;  // what came before the close is read first: "exit" is the shim's last word
  while (c.in.size() <= 4 * kMaxLine) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      eof = true;
      break;
    }
    c.in.append(buf, static_cast<size_t>(n));
  }
  size_t nl;
  while ((nl = c.in.find('\n')) != std::string::npos) {
    const std::string line = c.in.substr(0, nl);
    c.in.erase(0, nl + 1);
    auto words = Split(line, ' ');
    if (!c.granted) {
      std::optional<int> version = words.size() == 3 && words[0] == "hello" ? Number(words[1]) : std::nullopt;
      std::optional<int> rank = version ? Number(words[2]) : std::nullopt;
      if (!rank) return false;  // not a shim
      auto refuse = [&](const std::string& why) {
        (void)net::SendAll(c.fd.get(), "no " + why + "\n");
        log::Get("run")->warn("rank-exec: rank {} refused: {}", *rank, why);
        return false;
      };
      if (*version != kRankExecVersion)
        return refuse("rank-exec protocol " + std::to_string(*version) + " (this agent speaks " +
                      std::to_string(kRankExecVersion) + ")");
      auto g = grant(*rank);
      if (!g.ok()) return refuse(g.status().message());
      std::string payload;
      for (const auto& [k, v] : g->env) {
        payload += k + "=" + v;
        payload += '\0';
      }
      const std::string head = "ok " + std::to_string(payload.size()) + "\n";
      // The pipe's write end rides on the header's bytes.
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      iovec iov{const_cast<char*>(head.data()), head.size()};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      const int out_fd = g->output.get();
      std::memcpy(CMSG_DATA(cm), &out_fd, sizeof out_fd);
      // One deadline for the whole answer: a peer that reads slowly costs this tick 2 s at most.
      const auto deadline = std::chrono::steady_clock::now() + kGrantSendTimeout;
      ssize_t sent = -1;
      while (WaitWritable(c.fd.get(), deadline)) {
        sent = ::sendmsg(c.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) break;
      }
      const bool ok = sent >= 0 &&
                      SendAllBy(c.fd.get(), std::string_view(head).substr(static_cast<size_t>(sent)), deadline) &&
                      SendAllBy(c.fd.get(), payload, deadline);
      c.rank = *rank;
      c.granted = true;  // its output pipe is handed out: the rank is this shim's now
      if (!ok) return lost();
      continue;
    }
    if (words.size() == 2 && words[0] == "started" && !c.started) {
      auto pid = Number(words[1]);
      if (!pid || *pid <= 0) return lost();
      c.started = true;
      Event e;
      e.kind = Event::Kind::kStarted;
      e.rank = c.rank;
      e.pid = static_cast<pid_t>(*pid);
      e.shim_pid = c.shim_pid;
      events->push_back(e);
    } else if ((words.size() == 3 || words.size() == 4) && words[0] == "exit") {
      auto code = Number(words[1]), sig = Number(words[2]);
      if (!code || !sig) return lost();
      int64_t at = 0;  // when the shim reaped the program; its node's clock
      if (words.size() == 4) {
        char* end = nullptr;
        at = std::strtoll(words[3].c_str(), &end, 10);
        if (*end != '\0' || at < 0) at = 0;
      }
      c.exited = true;
      Event e;
      e.kind = Event::Kind::kExited;
      e.rank = c.rank;
      e.exit_code = *code;
      e.signal = *sig;
      e.exit_ns = at;
      events->push_back(e);
      return false;  // nothing follows an exit
    } else {
      return lost();
    }
  }
  if (eof || c.in.size() > kMaxLine) return lost();
  if (!c.granted && std::chrono::steady_clock::now() - c.accepted > kHelloWithin) return false;
  return true;
}

std::vector<RankExecListener::Event> RankExecListener::Poll(const GrantFn& grant) {
  Accept();
  std::vector<Event> events;
  for (size_t i = 0; i < conns_.size();) {
    if (Read(*conns_[i], grant, &events)) {
      ++i;
    } else {
      conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return events;
}

// ---- the shim's side ----

namespace {

// The program's process group (its pid), for the handler that forwards what mpirun sends us, and
// a signal that came before the program ran, sent to it once it does.
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_pending = 0;

void Forward(int sig) {
  const int saved = errno;
  if (g_child > 0)
    ::kill(-static_cast<pid_t>(g_child), sig);
  else
    g_pending = sig;
  errno = saved;
}

// Signals mpirun (and a user) send the rank: the program gets them as if it were the rank.
constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGALRM};

struct Handoff {
  net::Fd sock;
  net::Fd output;
  std::map<std::string, std::string> env;
  pid_t agent_pid = 0;
};

Result<Handoff> Connect(const std::string& name, int rank, Duration timeout) {
  Handoff h;
  // The agent listens before mpirun starts: a short retry covers a slow node, not a missing agent.
  const auto deadline = std::chrono::steady_clock::now() + std::min<Duration>(timeout, std::chrono::seconds(2));
  while (true) {
    auto sock = ConnectRankExec(name);
    if (sock.ok()) {
      h.sock = std::move(*sock);
      break;
    }
    if (sock.status().code() == StatusCode::kInvalidArgument || std::chrono::steady_clock::now() >= deadline)
      return sock.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto peer = PeerOf(h.sock.get());
  if (!peer || peer->uid != ::geteuid())
    return PermissionDenied("@" + name + " is held by uid " + std::to_string(peer ? static_cast<int>(peer->uid) : -1) +
                            ", not by this user's agent");
  h.agent_pid = peer->pid;
  SetTimeout(h.sock.get(), SO_RCVTIMEO, timeout);
  if (Status st =
          net::SendAll(h.sock.get(), "hello " + std::to_string(kRankExecVersion) + " " + std::to_string(rank) + "\n");
      !st.ok())
    return Status(st.code(), "@" + name + ": " + st.message());
  // The header, with the pipe's write end on its bytes.
  std::string in;
  while (in.find('\n') == std::string::npos) {
    char buf[256];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(h.sock.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable("the agent on @" + name + " closed without an answer");
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
      if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int))) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(cm), sizeof fd);
        h.output = net::Fd(fd);
      }
    in.append(buf, static_cast<size_t>(n));
    if (in.size() > kMaxLine && in.find('\n') == std::string::npos) return Corruption("the agent's answer is too long");
  }
  const size_t nl = in.find('\n');
  const std::string head = in.substr(0, nl);
  in.erase(0, nl + 1);
  if (StartsWith(head, "no "))
    return Unavailable("the agent refused rank " + std::to_string(rank) + ": " + head.substr(3));
  auto size = StartsWith(head, "ok ") ? Number(head.substr(3)) : std::nullopt;
  if (!size || static_cast<size_t>(*size) > kMaxEnvBytes || !h.output.valid())
    return Corruption("the agent's answer '" + head + "' is not a grant");
  while (in.size() < static_cast<size_t>(*size)) {
    char buf[65536];
    ssize_t n = ::recv(h.sock.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Unavailable("the agent on @" + name + " closed during its answer");
    in.append(buf, static_cast<size_t>(n));
  }
  for (const auto& kv : Split(in.substr(0, static_cast<size_t>(*size)), '\0')) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) h.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return h;
}

// What mpirun (or srun) tells each of its processes: the rank's identity in its world and its
// daemon's address. The grant never overrides them; it only adds those the launcher did not set.
bool LauncherVariable(const std::string& name) {
  if (MpiLauncherVariable(name)) return true;
  for (const char* prefix : {"OPAL_", "PRTE_", "HYDRA_", "MPI_", "SLURM_"})
    if (StartsWith(name, prefix)) return true;
  return false;
}

RankExecExit Wait(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return {127, 0};
  if (WIFSIGNALED(status)) return {0, WTERMSIG(status)};
  return {WEXITSTATUS(status), 0};
}

}  // namespace

RankExecExit RunRankExec(const RankExecOptions& options, std::FILE* err) {
  int rank = options.rank >= 0
                 ? options.rank
                 : tracers::LauncherInt({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"});
  Result<Handoff> handoff =
      Unavailable("no rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID)");
  if (rank >= 0) {
    const std::string name = RankExecSocketOf(options.nodes, rank);
    handoff = name.empty() ? Unavailable("rank " + std::to_string(rank) + " is beyond the ranks of --nodes")
                           : Connect(name, rank, options.connect_timeout);
  }
  struct sigaction sa {};
  sa.sa_handler = Forward;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : kForwarded) ::sigaction(sig, &sa, nullptr);
  ::signal(SIGCHLD, SIG_DFL);  // an inherited SIG_IGN would reap the program before we learn its exit
  SubprocessOptions so;
  // Its own group: what mpirun signals reaches it once, through us, and reaches its children too.
  so.new_process_group = true;
  so.parent_death_signal = SIGKILL;  // a shim killed by mpirun takes its program along
  so.inherit_stdin = true;           // mpirun forwards its stdin to rank 0
  if (handoff.ok()) {
    for (auto& [k, v] : handoff->env) {
      const char* ours = std::getenv(k.c_str());
      if (ours && LauncherVariable(k)) continue;
      // The tracer goes first; a library the user preloads stays preloaded.
      if (k == "LD_PRELOAD" && ours && *ours && v.find(ours) == std::string::npos) v += ":" + std::string(ours);
      so.env[k] = v;
    }
    so.output_fd = handoff->output.get();
    so.ptracer = handoff->agent_pid;  // the agent takes the program's stack
  } else {
    std::fprintf(err, "dsdoctor rank-exec: rank %d: %s; the program runs unwatched\n", rank,
                 handoff.status().message().c_str());
  }
  auto child = Subprocess::Start(options.argv, so);
  if (!child.ok()) {
    std::fprintf(err, "dsdoctor rank-exec: rank %d: %s\n", rank, child.status().message().c_str());
    if (handoff.ok()) (void)net::SendAll(handoff->sock.get(), "exit 127 0\n");
    return {127, 0};
  }
  g_child = child->pid();
  if (const int pending = g_pending) ::kill(-child->pid(), pending);
  if (handoff.ok()) {
    handoff->output.Reset();  // the program holds the pipe now: its end is the agent's EOF
    if (!net::SendAll(handoff->sock.get(), "started " + std::to_string(child->pid()) + "\n").ok())
      std::fprintf(err, "dsdoctor rank-exec: rank %d: the agent went away; the program runs on\n", rank);
  }
  const RankExecExit exit = Wait(child->pid());
  g_child = 0;
  const auto reaped =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (handoff.ok())
    (void)net::SendAll(handoff->sock.get(), "exit " + std::to_string(exit.exit_code) + " " +
                                                std::to_string(exit.signal) + " " + std::to_string(reaped) + "\n");
  return exit;
}

void ExitLikeChild(const RankExecExit& exit) {
  if (exit.signal > 0) {
    std::fflush(nullptr);
    const rlimit no_core{0, 0};  // the program's core file is the one to keep, not ours beside it
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(exit.signal, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, exit.signal);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(exit.signal);
    std::_Exit(128 + exit.signal);  // a signal that does not end a process (SIGCHLD, a stop)
  }
  std::exit(exit.exit_code);
}

}  // namespace dsd::collectors
