#include "agent/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "common/log.h"
#include "common/strings.h"

namespace dsd::agent {

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

namespace {

// Reads the agent's stdout until its ready line, or the deadline. Returns the port.
Result<int> AwaitReady(int fd, pid_t pid, Duration timeout) {
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[512];
  while (true) {
    size_t pos = got.find("DSDOCTOR_AGENT_READY");
    if (pos != std::string::npos && got.find('\n', pos) != std::string::npos) {
      size_t p = got.find(" port=", pos);
      if (p == std::string::npos) return Corruption("malformed ready line: " + got);
      return std::atoi(got.c_str() + p + 6);
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Timeout("agent pid " + std::to_string(pid) + " not ready in time");
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return Unavailable("agent pid " + std::to_string(pid) + " exited before it was ready");
    got.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

std::vector<AgentHandle> LocalLauncher::Start(const std::vector<NodePlan>& nodes, const std::string& token) {
  auto log = log::Get("agent");
  std::vector<AgentHandle> handles;
  for (size_t i = 0; i < nodes.size(); ++i) {
    AgentHandle h;
    h.name = nodes[i].host;
    auto addr = NthLoopbackAddress(options_.first_address, static_cast<int>(i));
    if (!addr.ok()) {
      h.error = addr.status().message();
      handles.push_back(h);
      continue;
    }
    h.endpoint = {*addr, options_.agent_port};
    std::vector<std::string> args = {options_.dsdoctor_binary, "agent", "--listen", h.endpoint.ToString(),
                                     "--token-file", "-", "--name", h.name, "--exit-with-coordinator"};
    if (!options_.log_level.empty()) {
      args.insert(args.begin() + 1, options_.log_level);
      args.insert(args.begin() + 1, "--log-level");
    }
    int in_pipe[2], out_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0) {
      h.error = std::string("pipe: ") + std::strerror(errno);
      handles.push_back(h);
      continue;
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);  // the coordinator died before prctl took effect
      ::dup2(in_pipe[0], 0);
      ::dup2(out_pipe[1], 1);
      ::execv(argv[0], argv.data());
      std::fprintf(stderr, "exec %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    h.pid = pid;
    h.stdin_fd = in_pipe[1];
    std::string line = token + "\n";
    ssize_t ignored = ::write(h.stdin_fd, line.data(), line.size());
    (void)ignored;
    auto port = AwaitReady(out_pipe[0], pid, options_.ready_timeout);
    ::close(out_pipe[0]);  // the agent logs to stderr; stdout only carried the ready line
    if (!port.ok()) {
      h.error = port.status().message();
    } else {
      h.endpoint.port = *port;
      log->debug("local agent {} pid {} at {}", h.name, pid, h.endpoint.ToString());
    }
    started_.push_back(h);
    handles.push_back(h);
  }
  return handles;
}

void LocalLauncher::Stop() {
  auto log = log::Get("agent");
  for (auto& h : started_) {
    if (h.stdin_fd >= 0) ::close(h.stdin_fd);  // agents exit when their stdin closes
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
      log->debug("agent {} pid {} did not exit; SIGKILL", h.name, h.pid);
      ::kill(h.pid, SIGKILL);
      ::waitpid(h.pid, &status, 0);
    }
    h.pid = -1;
  }
  started_.clear();
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

}  // namespace dsd::agent
