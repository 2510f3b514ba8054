#include "coordinator/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <set>

#include "agent/token.h"
#include "collectors/proc_stat.h"
#include "common/file.h"
#include "common/log.h"
#include "common/process.h"
#include "common/strings.h"

namespace dsd::coordinator {
using agent::GenerateToken;
using agent::LoadTokenFile;
using agent::WriteTokenFile;

std::string ShellQuote(const std::string& word) {
  if (!word.empty() &&
      word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_") ==
          std::string::npos) {
    return word;
  }
  std::string out = "'";
  for (char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

bool AgentsAreForked() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  return false;
#else
  return true;
#endif
#else
  return true;
#endif
}

std::vector<std::string> AgentArgs(const net::Endpoint& listen, const std::string& name, const std::string& log_level) {
  std::vector<std::string> args;
  if (!log_level.empty()) args = {"--log-level", log_level};
  for (const char* a : {"agent", "--listen"}) args.emplace_back(a);
  args.push_back(listen.ToString());
  for (const char* a : {"--token-file", "-", "--name"}) args.emplace_back(a);
  args.push_back(name);
  args.emplace_back("--exit-with-coordinator");
  return args;
}

namespace {}  // namespace

std::optional<ReadyInfo> ParseReadyLine(const std::string& line) {
  size_t pos = line.find("DSDOCTOR_AGENT_READY ");
  if (pos == std::string::npos) return std::nullopt;
  ReadyInfo info;
  bool have_port = false;
  for (const auto& word : SplitWhitespace(line.substr(pos))) {
    if (StartsWith(word, "name=")) info.name = word.substr(5);
    if (StartsWith(word, "addr=")) info.addr = word.substr(5);
    if (StartsWith(word, "port=")) {
      info.port = std::atoi(word.c_str() + 5);
      have_port = info.port > 0;
    }
  }
  if (!have_port) return std::nullopt;
  return info;
}

namespace {

// Consumes whole lines from the front of `pending` until one is a ready line (returned) or no
// whole line is left; other lines (an agent's chatter) are dropped.
std::optional<ReadyInfo> TakeReadyLine(std::string& pending) {
  size_t nl;
  while ((nl = pending.find('\n')) != std::string::npos) {
    auto info = ParseReadyLine(pending.substr(0, nl));
    pending.erase(0, nl + 1);
    if (info) return info;
  }
  return std::nullopt;
}

// Reads `fd` line by line until `count` ready lines arrived, EOF, the deadline, or `give_up` (asked
// every 200 ms with the ready lines so far) says the rest will never come.
std::vector<ReadyInfo> AwaitReadyLines(int fd, size_t count, Duration timeout,
                                       const std::function<bool(const std::vector<ReadyInfo>&)>& give_up = {}) {
  std::vector<ReadyInfo> ready;
  std::string pending;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (ready.size() < count) {
    while (auto info = TakeReadyLine(pending)) ready.push_back(*info);
    if (ready.size() >= count) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (give_up && give_up(ready)) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 200))) <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
  }
  return ready;
}

// Every started agent's ready line, each on its own stdout pipe, in one poll loop (no thread per
// node): results[i] is agent i's port, or why it never came. fds[i] < 0 is skipped.
std::vector<Result<int>> AwaitReadyAll(const std::vector<int>& fds, const std::vector<pid_t>& pids, Duration timeout) {
  std::vector<Result<int>> results(fds.size(), Unavailable("not started"));
  std::vector<std::string> pending(fds.size());
  std::vector<size_t> waiting;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i] >= 0) waiting.push_back(i);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<pollfd> polls;
  char buf[4096];
  while (!waiting.empty()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    polls.clear();
    for (size_t i : waiting) polls.push_back({fds[i], POLLIN, 0});
    int pr = ::poll(polls.data(), polls.size(), static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (pr < 0 && errno != EINTR) break;
    if (pr <= 0) continue;
    size_t kept = 0;
    for (size_t k = 0; k < waiting.size(); ++k) {
      size_t i = waiting[k];
      bool done = false;
      if (polls[k].revents) {
        ssize_t n = ::read(fds[i], buf, sizeof buf);
        if (n <= 0) {
          results[i] = Unavailable("agent (pid " + std::to_string(pids[i]) + ") exited before it was ready");
          done = true;
        } else {
          pending[i].append(buf, static_cast<size_t>(n));
          if (auto info = TakeReadyLine(pending[i])) {
            results[i] = info->port;
            done = true;
          }
          if (pending[i].size() > 65536) pending[i].clear();  // no ready line in that much output
        }
      }
      if (!done) waiting[kept++] = i;
    }
    waiting.resize(kept);
  }
  for (size_t i : waiting) results[i] = Timeout("agent (pid " + std::to_string(pids[i]) + ") not ready in time");
  return results;
}

// The same file as /proc/self/exe: a fork of this process runs the same code an exec of it would.
bool IsThisExecutable(const std::string& path) {
  struct stat a {
  }, b{};
  return ::stat(path.c_str(), &a) == 0 && ::stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// An unnamed file in /tmp (O_TMPFILE): it needs no cleanup, even if we are killed.
int AnonymousFile() { return ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600); }

std::string ReadAllFrom(int fd) {
  std::string text;
  char buf[8192];
  off_t off = 0;
  ssize_t n;
  while (text.size() < (1u << 20) && (n = ::pread(fd, buf, sizeof buf, off)) > 0) {
    text.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return text;
}

std::string LastLines(const std::string& text, size_t max_lines) {
  std::vector<std::string> lines;
  for (const auto& line : Split(text, '\n')) {
    std::string_view t = Trim(line);
    if (t.empty() || t.find_first_not_of("-=*") == std::string_view::npos) continue;  // banners, rules
    lines.emplace_back(t);
  }
  if (lines.size() > max_lines) lines.erase(lines.begin(), lines.end() - static_cast<long>(max_lines));
  return Join(lines, " | ");
}

// In the forked child: what an exec would have done to the process, then `main`. Handlers go back
// to the default (ignored signals stay ignored), descriptors past stdin/stdout/stderr are closed
// (the other agents' pipes included, so that each agent sees its own stdin close), the command
// line shown is the agent's, and the coordinator's stdio buffers were flushed before the fork.
[[noreturn]] void RunInProcess(const InProcessMain& main, const std::vector<std::string>& args,
                               std::vector<char*>& argv) {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa {};
    if (::sigaction(sig, nullptr, &sa) != 0) continue;
    bool handled = (sa.sa_flags & SA_SIGINFO) || (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
    if (handled) ::signal(sig, SIG_DFL);
  }
  if (::close_range(3, ~0U, 0) != 0)
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  SetCommandLine(args);  // ps and pgrep -f see the agent
  int rc = 70;
  try {
    rc = main(static_cast<int>(argv.size()) - 1, argv.data());
  } catch (...) {
  }
  std::fflush(nullptr);
  ::_exit(rc);  // not exit(): the coordinator's atexit handlers and static objects are not ours
}

}  // namespace

std::vector<AgentHandle> SpawnLauncher::Start(const std::vector<NodePlan>& nodes, const std::string& token) {
  auto log = log::Get("agent");
  // Asked once, before the first child: no thread starts while the children are forked.
  std::optional<bool> single;
  auto single_threaded = [&single, &log] {
    if (!single) {
      auto self = collectors::ReadProcStat(::getpid(), /*with_wchan=*/false);
      single = self.ok() && self->num_threads == 1;
      if (!*single) log->debug("more than one thread: local agents are exec'd, not forked");
    }
    return *single;
  };
  std::vector<AgentHandle> handles(nodes.size());
  std::vector<int> stdout_fds(nodes.size(), -1);
  std::vector<int> stderr_fds(nodes.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    AgentHandle& h = handles[i];
    h.name = nodes[i].host;
    auto spawn = SpawnFor(nodes[i], i);
    if (!spawn.ok()) {
      h.error = spawn.status().message();
      continue;
    }
    h.endpoint = spawn->endpoint;
    int err_fd = spawn->capture_stderr ? AnonymousFile() : -1;
    stderr_fds[i] = err_fd;
    int in_pipe[2], out_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0) {
      h.error = std::string("pipe: ") + std::strerror(errno);
      continue;
    }
    std::vector<char*> argv;
    for (auto& a : spawn->argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    const bool in_process = spawn->in_process && single_threaded();
    if (in_process) std::fflush(nullptr);  // or the child would write our buffered output again
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);  // the coordinator died before prctl took effect
      // Its own process group: Ctrl-C in the terminal reaches the coordinator only, which stops
      // the ranks through the agents and reports how they ended.
      ::setpgid(0, 0);
      ::umask(UserUmask());  // the agent sets its own for the log dir; its ranks get the user's
      ::dup2(in_pipe[0], 0);
      ::dup2(out_pipe[1], 1);
      if (err_fd >= 0) ::dup2(err_fd, 2);
      if (in_process) RunInProcess(spawn->in_process, spawn->argv, argv);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    h.pid = pid;
    h.stdin_fd = in_pipe[1];
    stdout_fds[i] = out_pipe[0];
    // The child may be gone already (ssh refused at once): its error comes from its stderr and exit,
    // and the write must never end us with SIGPIPE.
    (void)WriteToPipe(h.stdin_fd, token + "\n");
    log->debug("started {} for {} as pid {}{}", spawn->argv[0], h.name, pid, in_process ? " (forked, no exec)" : "");
  }
  // Wait for every ready line at once: ssh handshakes overlap instead of adding up.
  std::vector<pid_t> pids;
  for (const auto& h : handles) pids.push_back(h.pid);
  auto ready = AwaitReadyAll(stdout_fds, pids, ready_timeout_);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (stdout_fds[i] < 0) continue;
    auto& port = ready[i];
    ::close(stdout_fds[i]);  // agents log to stderr; stdout only carried the ready line
    AgentHandle& h = handles[i];
    if (port.ok()) {
      h.endpoint.port = *port;
      log->debug("agent {} ready at {}", h.name, h.endpoint.ToString());
    } else {
      h.error = port.status().message();
      if (stderr_fds[i] >= 0) {
        std::string text = ReadAllFrom(stderr_fds[i]);
        if (!Trim(text).empty()) h.error += ": " + LastLines(text, 5);
      }
    }
    started_.push_back(h);
  }
  // The agents keep writing their logs to these files; we only needed them for failed starts.
  for (int fd : stderr_fds) {
    if (fd >= 0) ::close(fd);
  }
  return handles;
}

void SpawnLauncher::Stop() {
  auto log = log::Get("agent");
  for (auto& h : started_) {
    // "stop" first: an orderly end, so that an agent whose run link we closed stops its ranks
    // instead of taking the closed stdin for our death (agent/agent.cc). Agents exit when it closes.
    if (h.stdin_fd >= 0) (void)WriteToPipe(h.stdin_fd, "stop\n");
    if (h.stdin_fd >= 0) ::close(h.stdin_fd);
    h.stdin_fd = -1;
  }
  for (auto& h : started_) {
    if (h.pid <= 0) continue;
    int status = 0;
    bool reaped = false;
    for (int i = 0; i < 300 && !reaped; ++i) {  // up to 3 s for a clean exit
      reaped = ::waitpid(h.pid, &status, WNOHANG) == h.pid;
      if (!reaped) ::usleep(10000);
    }
    if (!reaped) {
      log->debug("{} (pid {}) did not exit; SIGKILL", h.name, h.pid);
      ::kill(h.pid, SIGKILL);
      ::waitpid(h.pid, &status, 0);
    }
    h.pid = -1;
  }
  started_.clear();
}

Result<std::string> LocalLauncher::NthLoopbackAddress(const std::string& first, int i) {
  in_addr a{};
  if (::inet_pton(AF_INET, first.c_str(), &a) != 1) return InvalidArgument("'" + first + "' is not an IPv4 address");
  uint32_t host = ntohl(a.s_addr) + static_cast<uint32_t>(i);
  if ((host >> 24) != 127 || (host & 0xff) == 255) return InvalidArgument("too many local nodes for 127.0.0.0/8");
  a.s_addr = htonl(host);
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return std::string(buf);
}

Result<SpawnLauncher::Spawn> LocalLauncher::SpawnFor(const NodePlan& node, size_t index) {
  DSD_ASSIGN_OR_RETURN(std::string addr, NthLoopbackAddress(options_.first_address, static_cast<int>(index)));
  Spawn s;
  s.endpoint = {addr, options_.agent_port};
  s.argv = {options_.dsdoctor_binary};
  for (auto& a : AgentArgs(s.endpoint, node.host, options_.log_level)) s.argv.push_back(a);
  if (options_.in_process && AgentsAreForked() && IsThisExecutable(options_.dsdoctor_binary))
    s.in_process = options_.in_process;
  return s;
}

std::vector<std::string> SshLauncher::SshCommand(const std::string& host,
                                                 const std::vector<std::string>& remote_args) const {
  std::vector<std::string> cmd = {
      "ssh", "-o", "BatchMode=yes", "-o",
      "ConnectTimeout=" +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(options_.connect_timeout).count())};
  cmd.insert(cmd.end(), options_.ssh_args.begin(), options_.ssh_args.end());
  cmd.push_back(host);
  cmd.push_back("--");
  // ssh joins the remote words into one string for the remote shell: quote each, exec the agent.
  std::string remote = "exec " + ShellQuote(options_.remote_dsdoctor);
  for (const auto& a : remote_args) remote += " " + ShellQuote(a);
  cmd.push_back(remote);
  return cmd;
}

Result<SpawnLauncher::Spawn> SshLauncher::SpawnFor(const NodePlan& node, size_t) {
  Spawn s;
  s.endpoint = {node.host, options_.agent_port};
  s.argv = SshCommand(node.host, AgentArgs(s.endpoint, node.host, options_.log_level));
  s.capture_stderr = true;
  return s;
}

std::vector<std::string> MpirunLauncher::MpirunCommand(
    const std::vector<std::pair<std::string, std::string>>& name_addr, const std::string& token_file) const {
  std::vector<std::string> cmd = {options_.mpirun};
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.insert(cmd.end(), {"-np", std::to_string(name_addr.size()), "--bind-to", "none", "--map-by", "node"});
  std::string hosts;
  if (options_.simulated) {
    hosts = "localhost:" + std::to_string(name_addr.size());
  } else {
    for (const auto& [name, addr] : name_addr) hosts += (hosts.empty() ? "" : ",") + addr + ":1";
  }
  cmd.insert(cmd.end(), {"--host", hosts});
  cmd.insert(cmd.end(), options_.extra_args.begin(), options_.extra_args.end());
  cmd.push_back(options_.dsdoctor_binary);
  if (!options_.log_level.empty()) cmd.insert(cmd.end(), {"--log-level", options_.log_level});
  std::string nodes;
  for (const auto& [name, addr] : name_addr) nodes += (nodes.empty() ? "" : ",") + name + "=" + addr;
  cmd.insert(cmd.end(), {"agent", "--mpi-nodes", nodes, "--listen", "mpi:" + std::to_string(options_.agent_port),
                         "--token-file", token_file, "--exit-with-parent"});
  return cmd;
}

MpirunLauncher::MpirunLauncher(MpirunLauncherOptions options) : options_(std::move(options)) {
  token_dir_parent_ = options_.token_dir;
  ready_timeout_ = options_.ready_timeout;
}

std::string MpirunLauncher::AddressOf(const NodePlan& node, size_t index) const {
  if (!options_.simulated) return node.host;
  auto a = LocalLauncher::NthLoopbackAddress("127.0.0.2", static_cast<int>(index));
  return a.ok() ? *a : "";
}

PdshLauncher::PdshLauncher(PdshLauncherOptions options) : options_(std::move(options)) {
  token_dir_parent_ = options_.token_dir;
  ready_timeout_ = options_.ready_timeout;
}

FanoutLauncher::Command PdshLauncher::PdshCommand(const std::vector<std::string>& hosts,
                                                  const std::string& token_file) const {
  Command c;
  c.argv = {options_.pdsh, "-S", "-f", "1024", "-R", "ssh", "-w", Join(hosts, ",")};
  c.argv.insert(c.argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  // pdsh joins the remote words into one line for the remote shell: quote each (%h stays bare).
  std::vector<std::string> remote = {options_.remote_dsdoctor};
  if (!options_.log_level.empty()) remote.insert(remote.end(), {"--log-level", options_.log_level});
  remote.insert(remote.end(), {"agent", "--listen", "%h:" + std::to_string(options_.agent_port), "--token-file",
                               token_file, "--name", "%h", "--exit-with-coordinator"});
  c.argv.push_back("exec");
  for (const auto& w : remote) c.argv.push_back(ShellQuote(w));
  std::string ssh = "-o BatchMode=yes -o ConnectTimeout=" +
                    std::to_string(std::chrono::duration_cast<std::chrono::seconds>(options_.connect_timeout).count());
  for (const auto& a : options_.ssh_args) ssh += " " + a;
  c.env = {{"PDSH_SSH_ARGS_APPEND", ssh}};
  return c;
}

std::set<std::string> PdshLauncher::FailedNodes(const std::string& stderr_text) const {
  // "pdsh@launcher: worker-1: ssh exited with exit code 255", "pdsh@launcher: worker-1: connect: …"
  std::set<std::string> failed;
  for (const auto& line : Split(stderr_text, '\n')) {
    if (!StartsWith(line, "pdsh@")) continue;
    size_t a = line.find(": ");
    size_t b = a == std::string::npos ? a : line.find(": ", a + 2);
    if (b != std::string::npos) failed.insert(line.substr(a + 2, b - a - 2));
  }
  return failed;
}

FanoutLauncher::Command PdshLauncher::FanoutCommand(const std::vector<std::pair<std::string, std::string>>& name_addr,
                                                    const std::string& token_file) const {
  std::vector<std::string> hosts;
  for (const auto& [name, addr] : name_addr) hosts.push_back(name);
  return PdshCommand(hosts, token_file);
}

std::vector<AgentHandle> FanoutLauncher::Start(const std::vector<NodePlan>& nodes, const std::string& token) {
  auto log = log::Get("agent");
  std::vector<AgentHandle> handles(nodes.size());
  std::vector<std::pair<std::string, std::string>> name_addr;
  for (size_t i = 0; i < nodes.size(); ++i) {
    handles[i].name = nodes[i].host;
    handles[i].endpoint = {AddressOf(nodes[i], i), 0};
    name_addr.emplace_back(nodes[i].host, handles[i].endpoint.host);
  }
  auto fail_all = [&](const std::string& why) {
    for (auto& h : handles) h.error = why;
    return handles;
  };
  // A tool that hands its stdin to every agent (srun) carries the token there: no file at all.
  std::string token_file;
  if (!token_on_stdin()) {
    std::string dir_template = token_dir_parent_ + "/dsdoctor-" + tool() + "-XXXXXX";
    if (!::mkdtemp(dir_template.data())) return fail_all("mkdtemp " + token_dir_parent_ + ": " + std::strerror(errno));
    token_dir_ = dir_template;
    token_file = token_dir_ + "/token";
    if (Status s = WriteTokenFile(token_file, token); !s.ok()) return fail_all(s.message());
  }
  int err_fd = output_file_.empty()
                   ? AnonymousFile()
                   : ::open(output_file_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  int out_pipe[2];
  if (err_fd < 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0) return fail_all(tool() + " setup: " + std::strerror(errno));
  int in_pipe[2] = {-1, -1};
  if (token_on_stdin() && ::pipe2(in_pipe, O_CLOEXEC) != 0) return fail_all(tool() + " setup: " + std::strerror(errno));
  Command command = FanoutCommand(name_addr, token_file);
  std::vector<char*> argv;
  for (auto& a : command.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // mpirun and pdsh end their remote commands when terminated
    if (::getppid() != parent) ::_exit(1);
    ::setpgid(0, 0);  // see SpawnLauncher::Start
    ::umask(UserUmask());
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(in_pipe[0] >= 0 ? in_pipe[0] : devnull, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_fd, 2);
    for (const auto& [k, v] : command.env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  pid_ = pid;
  if (in_pipe[0] >= 0) {
    ::close(in_pipe[0]);
    stdin_fd_ = in_pipe[1];
    (void)WriteToPipe(stdin_fd_, token + "\n");
  }
  log->debug("{} pid {} starts {} agents", tool(), pid, nodes.size());
  // pdsh goes on for the other hosts when one fails: stop waiting once every node is either ready
  // or named in the tool's stderr as failed.
  auto give_up = [&](const std::vector<ReadyInfo>& so_far) {
    std::set<std::string> failed = FailedNodes(ReadAllFrom(err_fd));
    if (failed.empty()) return false;
    for (const auto& h : handles)
      if (!failed.count(h.name) &&
          std::none_of(so_far.begin(), so_far.end(), [&](const ReadyInfo& r) { return r.name == h.name; }))
        return false;
    return true;
  };
  auto ready = AwaitReadyLines(out_pipe[0], nodes.size(), ready_timeout_, give_up);
  ::close(out_pipe[0]);  // later output of the agents goes nowhere; they log to stderr
  // Every ready agent has read its token: remove the file now rather than at Stop(), which a
  // killed coordinator never reaches.
  RemoveTokenDir();
  std::string tool_stderr = ReadAllFrom(err_fd);
  ::close(err_fd);
  for (auto& h : handles) {
    auto it = std::find_if(ready.begin(), ready.end(), [&](const ReadyInfo& r) { return r.name == h.name; });
    if (it != ready.end()) {
      h.endpoint.port = it->port;
      continue;
    }
    h.error = tool() + " started no agent for " + h.name;
    // pdsh prefixes its lines with the host: prefer that host's lines.
    std::string mine;
    for (const auto& line : Split(tool_stderr, '\n'))
      if (line.find(h.name + ": ") != std::string::npos) mine += line + "\n";
    const std::string& text = mine.empty() ? tool_stderr : mine;
    if (!Trim(text).empty()) h.error += ": " + LastLines(text, 8);
  }
  return handles;
}

void FanoutLauncher::Stop() {
  if (stdin_fd_ >= 0) {  // an orderly end (SpawnLauncher::Stop): the agents stop their ranks
    (void)WriteToPipe(stdin_fd_, "stop\n");
    ::close(stdin_fd_);
    stdin_fd_ = -1;
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);  // mpirun and pdsh forward it and end every remote command
    int status = 0;
    bool reaped = false;
    for (int i = 0; i < 500 && !reaped; ++i) {
      reaped = ::waitpid(pid_, &status, WNOHANG) == pid_;
      if (!reaped) ::usleep(10000);
    }
    if (!reaped) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  RemoveTokenDir();
}

void FanoutLauncher::RemoveTokenDir() {
  if (token_dir_.empty()) return;
  ::unlink((token_dir_ + "/token").c_str());
  ::rmdir(token_dir_.c_str());
  token_dir_.clear();
}

SlurmLauncher::SlurmLauncher(SlurmLauncherOptions options) : options_(std::move(options)) {
  ready_timeout_ = options_.ready_timeout;
}

std::vector<std::string> SlurmLauncher::SrunCommand(
    const std::vector<std::pair<std::string, std::string>>& name_addr) const {
  std::vector<std::string> hosts, nodes;
  for (const auto& [name, addr] : name_addr) {
    hosts.push_back(name);
    nodes.push_back(name + "=" + addr);
  }
  const std::string n = std::to_string(name_addr.size());
  // --kill-on-bad-exit=0: one agent that fails to start must not end the others (it is named);
  // --overlap: the job's own steps (an srun inside the training script) may share the nodes.
  std::vector<std::string> cmd = {options_.srun,
                                  "--nodes=" + n,
                                  "--ntasks=" + n,
                                  "--ntasks-per-node=1",
                                  "--nodelist=" + Join(hosts, ","),
                                  "--kill-on-bad-exit=0",
                                  "--overlap",
                                  "--job-name=dsdoctor-agents"};
  cmd.insert(cmd.end(), options_.extra_args.begin(), options_.extra_args.end());
  cmd.push_back(options_.dsdoctor_binary);
  if (!options_.log_level.empty()) cmd.insert(cmd.end(), {"--log-level", options_.log_level});
  cmd.insert(cmd.end(), {"agent", "--mpi-nodes", Join(nodes, ","), "--listen",
                         "mpi:" + std::to_string(options_.agent_port), "--token-file", "-", "--exit-with-coordinator"});
  return cmd;
}

std::set<std::string> SlurmLauncher::FailedNodes(const std::string& stderr_text) const {
  // "srun: error: node-1: task 1: Exited with exit code 2", "srun: error: Task launch for StepId=… failed on node
  // node-1: …", "srun: error: Unable to create step for job 12: …" (every node: none is named).
  std::set<std::string> failed;
  for (const auto& line : Split(stderr_text, '\n')) {
    if (!StartsWith(line, "srun: error: ")) continue;
    const std::string rest = line.substr(13);
    if (size_t on = rest.find("failed on node "); on != std::string::npos) {
      std::string node = rest.substr(on + 15);
      failed.insert(node.substr(0, node.find(':')));
    } else if (size_t colon = rest.find(": task "); colon != std::string::npos) {
      failed.insert(rest.substr(0, colon));
    }
  }
  return failed;
}

std::vector<AgentHandle> AttachLauncher::Start(const std::vector<NodePlan>& nodes, const std::string&) {
  std::vector<AgentHandle> handles;
  for (size_t i = 0; i < agents_.size(); ++i) {
    AgentHandle h;
    h.name = i < nodes.size() ? nodes[i].host : "node-" + std::to_string(i);
    h.endpoint = agents_[i];
    handles.push_back(h);
  }
  return handles;
}

Result<std::vector<net::Endpoint>> ParseAgentList(const std::string& list) {
  std::vector<net::Endpoint> out;
  if (list.empty()) return out;
  if (list[0] == '@') {  // a file: 16,000 entries exceed the kernel's 128 KiB limit for one argument
    const std::string path = list.substr(1);
    auto text = ReadFile(path, size_t{64} << 20);
    if (!text.ok()) return InvalidArgument("--agents " + list + ": " + text.status().message());
    int line_no = 0;
    for (const auto& line : Split(*text, '\n')) {
      ++line_no;
      const std::string content(Trim(std::string_view(line).substr(0, line.find('#'))));  // '#' starts a comment
      for (const auto& part : Split(content, ',')) {
        for (const auto& word : SplitWhitespace(part)) {
          auto e = net::ParseEndpoint(word);
          if (!e.ok())
            return InvalidArgument(path + ":" + std::to_string(line_no) + ": '" + Printable(word) +
                                   "': " + e.status().message());
          out.push_back(*e);
        }
      }
    }
    if (out.empty()) return InvalidArgument("--agents " + list + ": no host:port entry in the file");
    return out;
  }
  for (const auto& part : Split(list, ',')) {
    auto e = net::ParseEndpoint(std::string(Trim(part)));
    if (!e.ok()) return InvalidArgument("--agents: " + e.status().message());
    out.push_back(*e);
  }
  return out;
}

std::string DefaultLauncher(bool agents_given, bool simulated_nodes, bool slurm_nodes) {
  return agents_given ? "attach" : simulated_nodes ? "local" : slurm_nodes ? "slurm" : "ssh";
}

Result<LaunchSetup> MakeLauncher(const LauncherChoice& c, size_t node_count) {
  LaunchSetup setup;
  const std::string remote = c.remote_dsdoctor.empty() ? c.self_binary : c.remote_dsdoctor;
  if ((c.kind == "ssh" || c.kind == "pdsh") && c.simulated) {
    return InvalidArgument("--launcher " + c.kind + " needs a hostfile, not --local");
  }
  if (c.kind == "attach") {
    if (c.agents.empty()) return InvalidArgument("--launcher attach needs --agents host:port,…");
    if (c.agents.size() != node_count) {
      return InvalidArgument("--agents lists " + std::to_string(c.agents.size()) + " agents for " +
                             std::to_string(node_count) + " nodes");
    }
    std::string file = c.token_file;
    if (file.empty() && std::getenv("DSDOCTOR_TOKEN_FILE")) file = std::getenv("DSDOCTOR_TOKEN_FILE");
    if (file.empty()) return InvalidArgument("--launcher attach needs --token-file (or DSDOCTOR_TOKEN_FILE)");
    DSD_ASSIGN_OR_RETURN(setup.token, LoadTokenFile(file));
    setup.launcher = std::make_unique<AttachLauncher>(c.agents);
    return setup;
  }
  if (c.kind == "local") {
    LocalLauncherOptions o;
    o.dsdoctor_binary = c.self_binary;
    o.agent_port = c.agent_port;
    o.log_level = c.log_level;
    o.in_process = c.agent_main;
    setup.launcher = std::make_unique<LocalLauncher>(o);
  } else if (c.kind == "ssh") {
    SshLauncherOptions o;
    o.remote_dsdoctor = remote;
    o.ssh_args = c.ssh_args;
    o.agent_port = c.agent_port;
    o.log_level = c.log_level;
    setup.launcher = std::make_unique<SshLauncher>(o);
  } else if (c.kind == "pdsh") {
    PdshLauncherOptions o;
    o.remote_dsdoctor = remote;
    o.ssh_args = c.ssh_args;
    o.extra_args = c.pdsh_args;
    o.agent_port = c.agent_port;
    o.log_level = c.log_level;
    setup.launcher = std::make_unique<PdshLauncher>(o);
  } else if (c.kind == "mpirun") {
    MpirunLauncherOptions o;
    o.dsdoctor_binary = remote;
    o.extra_args = c.mpirun_args;
    o.agent_port = c.agent_port;
    o.log_level = c.log_level;
    o.simulated = c.simulated;
    setup.launcher = std::make_unique<MpirunLauncher>(o);
  } else if (c.kind == "slurm") {
    if (c.simulated) return InvalidArgument("--launcher slurm needs the nodes of a Slurm allocation, not --local");
    SlurmLauncherOptions o;
    o.dsdoctor_binary = remote;
    o.extra_args = c.slurm_args;
    o.agent_port = c.agent_port;
    o.log_level = c.log_level;
    setup.launcher = std::make_unique<SlurmLauncher>(o);
  } else {
    return InvalidArgument("unknown --launcher '" + c.kind + "' (local, ssh, pdsh, mpirun, slurm or attach)");
  }
  setup.launcher->set_output_file(c.output_file);
  auto token = agent::GenerateToken();
  if (!token.ok()) return Internal(token.status().message());
  setup.token = *token;
  return setup;
}

}  // namespace dsd::coordinator
