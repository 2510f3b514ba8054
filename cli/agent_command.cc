#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "agent/agent.h"
#include "agent/token.h"
#include "cli/commands.h"
#include "common/log.h"
#include "common/strings.h"

namespace dsd::cli {

namespace {

// One line from fd 0, read byte by byte so nothing after it is consumed: the rest of stdin is the
// coordinator-liveness channel.
Result<std::string> ReadTokenLineFromStdin() {
  std::string line;
  char c;
  while (line.size() < 4096) {
    ssize_t n = ::read(0, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') break;
    line += c;
  }
  std::string token(Trim(line));
  if (token.empty()) return InvalidArgument("--token-file -: no token on stdin");
  return token;
}

}  // namespace

int RunAgent(const AgentCommandOptions& o) {
  auto log = log::Get("cli");
  auto endpoint = net::ParseEndpoint(o.listen);
  if (!endpoint.ok()) {
    log->error("--listen {}", endpoint.status().message());
    return kExitUsage;
  }
  auto token = o.token_file == "-" ? ReadTokenLineFromStdin() : agent::LoadTokenFile(o.token_file);
  if (!token.ok()) {
    log->error("{}", token.status().message());
    return kExitUsage;
  }
  probe::RealInventorySource inventory;
  agent::AgentOptions opts;
  opts.listen_addr = endpoint->host;
  opts.port = endpoint->port;
  opts.token = *token;
  opts.name = o.name;
  opts.exit_on_stdin_eof = o.exit_with_coordinator;
  agent::Agent agent(opts, &inventory);
  if (Status s = agent.Bind(); !s.ok()) {
    log->error("agent: {}", s.message());
    return kExitProblems;
  }
  std::cout << agent::ReadyLine(o.name.empty() ? "-" : o.name, endpoint->host, agent.port()) << std::endl;
  Status s = agent.Run();
  if (!s.ok()) {
    log->error("agent: {}", s.message());
    return kExitInternal;
  }
  return kExitOk;
}

}  // namespace dsd::cli
