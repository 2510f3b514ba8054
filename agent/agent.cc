#include "agent/agent.h"

#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "agent/agent_store.h"
#include "agent/ping.h"
#include "agent/request.h"
#include "agent/token.h"
#include "common/log.h"
#include "probe/gloo_comm.h"
#include "probe/mpi_comm.h"
#include "probe/nccl_comm.h"
#include "probe/report.h"

namespace dsd::agent {

using nlohmann::json;

std::string ReadyLine(const std::string& name, const std::string& addr, int port) {
  return "DSDOCTOR_AGENT_READY name=" + name + " addr=" + addr + " port=" + std::to_string(port) +
         " pid=" + std::to_string(::getpid());
}

Agent::Agent(AgentOptions options, probe::InventorySource* inventory)
    : options_(std::move(options)), key_(net::LinkKey::FromToken(options_.token)), inventory_(inventory) {
  if (options_.name.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    options_.name = host;
  }
}

Agent::~Agent() { Stop(); }

Status Agent::Bind() {
  DSD_ASSIGN_OR_RETURN(listener_, net::Listen(options_.listen_addr, options_.port, &port_));
  // Every peer's connect probe ends in a reset before a byte is sent; only the coordinator's TLS
  // links (the client speaks first) need to be accepted.
  // 1 s: a silent client is then handed over and held to the handshake deadline as before.
  if (Status s = net::DeferAccept(listener_.get(), std::chrono::seconds(1)); !s.ok())
    log::Get("agent")->debug("{}; connect probes will be accepted and closed", s.message());
  return Status::Ok();
}

void Agent::Stop() {
  stop_ = true;
  kv_.Cancel();
}

namespace {

// A signal that does nothing instead of its default action. A handler, not SIG_IGN: exec resets
// it, so children get the disposition we had. Left alone when it is ignored already (nohup).
void IgnoreQuietly(int sig) {
  struct sigaction old {};
  if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) return;
  struct sigaction sa {};
  sa.sa_handler = [](int) {};
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(sig, &sa, nullptr);
}

}  // namespace

Status Agent::Run() {
  auto log = log::Get("agent");
  if (!listener_.valid()) DSD_RETURN_IF_ERROR(Bind());
  if (key_.empty()) return Internal("cannot derive the link key from the token (OpenSSL HKDF)");
  log->debug("agent {} listening on {}", options_.name, net::Endpoint{options_.listen_addr, port_}.ToString());
  net::AcceptorOptions acceptor_options;
  acceptor_options.key = key_;
  acceptor_options.what = "agent " + options_.name;
  acceptor_options.handshake_timeout = options_.auth_timeout;
  net::HandshakeAcceptor acceptor(listener_.get(), acceptor_options, [this](net::Link link, const std::string& peer) {
    ++active_connections_;
    std::thread([this, l = std::move(link), peer]() mutable {
      Serve(std::move(l), peer);
      --active_connections_;
    }).detach();
  });
  std::vector<pollfd> stdin_fd{{options_.exit_on_stdin_eof ? 0 : -1, POLLIN, 0}};
  // An agent that learns of the coordinator's death from its stdin may outlive it while it serves a
  // run: the death signal a launcher gave it is dropped at once (stdin closing says the same, and a
  // run must not be ended by it), and a hangup, or a write to a stderr whose ssh session is gone, no
  // longer kills it: no-op handlers, which exec resets, so the job's processes keep the
  // dispositions they had (IgnoreQuietly). All on this, the main thread, before any run starts.
  if (options_.exit_on_stdin_eof) {
    ::prctl(PR_SET_PDEATHSIG, 0);
    IgnoreQuietly(SIGHUP);
    IgnoreQuietly(SIGPIPE);
  }
  std::string stdin_text;  // what the coordinator wrote after the token: "stop" ends the job in order
  while (!stop_) {
    acceptor.Poll(std::chrono::milliseconds(200), &stdin_fd);
    if (stdin_fd[0].fd == 0 && (stdin_fd[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      char buf[256];
      ssize_t n = ::read(0, buf, sizeof buf);
      if (n > 0) {
        stdin_text.append(buf, static_cast<size_t>(n));
        if (stdin_text.find("stop\n") != std::string::npos) coordinator_stopping_ = true;
        if (stdin_text.size() > 4096) stdin_text.erase(0, stdin_text.size() - 16);
      }
      if (n <= 0) {
        coordinator_gone_ = true;
        stdin_fd[0].fd = -1;
        if (runs_active_ == 0) {
          log->debug("coordinator gone (stdin closed); agent {} exits", options_.name);
          break;
        }
        if (coordinator_stopping_)
          log->debug("the coordinator ended the job; agent {} exits after its ranks", options_.name);
        else
          log->warn(
              "coordinator gone (stdin closed): the job's ranks on {} run on to their end, and this agent exits "
              "after them",
              options_.name);
      }
    }
    if (coordinator_gone_ && runs_active_ == 0) break;
  }
  Stop();
  // Nothing may outlive the object: connection threads are woken by shutting their sockets (a run
  // stream then stops its ranks, SIGKILL after 3 s), listener threads see the stop flag.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (net::Link* l : live_links_) l->Shutdown();
  }
  std::vector<std::thread> listeners;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listeners.swap(listener_threads_);
    // Wakes their poll at once (Linux): otherwise exiting waited out its 200 ms timeout.
    for (const auto& [port, fd] : extra_listeners_) ::shutdown(fd->get(), SHUT_RDWR);
  }
  for (auto& t : listeners) t.join();
  for (int i = 0; i < 6000 && active_connections_ > 0; ++i) ::usleep(10000);
  if (active_connections_ > 0)
    log->error("agent {}: {} connections still busy after 60 s; exiting anyway", options_.name,
               active_connections_.load());
  return Status::Ok();
}

void Agent::Serve(net::Link conn, std::string peer) {
  auto log = log::Get("agent");
  wire::FrameDecoder decoder;
  if (Status st = AcceptHello(conn, decoder, options_.auth_timeout, options_.name); !st.ok()) {
    log->warn("authenticated connection from {} sent no hello: {}", peer, st.message());
    return;
  }
  log->debug("authenticated connection from {}", peer);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    live_links_.insert(&conn);
  }
  struct Unregister {
    Agent* agent;
    net::Link* link;
    ~Unregister() {
      std::lock_guard<std::mutex> lock(agent->mu_);
      agent->live_links_.erase(link);
    }
  } unregister{this, &conn};
  while (!stop_) {
    auto req = net::RecvFrame(conn, decoder, std::chrono::milliseconds(500));
    if (!req.ok()) {
      if (req.status().code() == StatusCode::kTimeout) continue;
      if (req.status().code() == StatusCode::kCorruption && !decoder.broken()) {
        (void)net::SendFrame(conn, {{"type", "error"}, {"code", "bad_request"}, {"message", req.status().message()}});
        continue;
      }
      log->debug("connection from {} ends: {}", peer, req.status().message());
      return;
    }
    // Every request's shape is checked before anything acts on it (agent/request.h).
    if (Status st = ValidateRequest(*req); !st.ok()) {
      json reply = {{"type", "error"},
                    {"code", st.code() == StatusCode::kUnimplemented ? "unknown_type" : "bad_request"},
                    {"message", st.message()}};
      if (auto id = req->find("id"); id != req->end() && id->is_number_integer()) reply["id"] = *id;
      if (!net::SendFrame(conn, reply).ok()) return;
      continue;
    }
    if (req->value("type", "") == "run") {
      if (auto run = ReadRunRequest(*req); run.ok()) ServeRun(conn, decoder, *run);  // checked above
      return;
    }
    if (req->value("type", "") == "reattach") {
      if (auto reattach = ReadReattachRequest(*req); reattach.ok()) ServeReattach(conn, decoder, *reattach);
      return;
    }
    bool close_after = false;
    json reply = req->value("type", "") == "sink" ? Sink(conn, decoder) : Handle(*req, &close_after);
    if (reply.value("type", "") == "sunk") close_after = true;
    if (req->contains("id")) reply["id"] = (*req)["id"];
    if (!net::SendFrame(conn, reply).ok()) return;
    if (close_after) return;
  }
}

json Agent::Handle(const json& request, bool* close_after) {
  auto log = log::Get("agent");
  std::string type = request.value("type", "");
  log->debug("request {}", type);
  try {
    if (type == "inventory") {
      probe::EnvMap job_env;
      if (request.contains("job_env")) job_env = request["job_env"].get<probe::EnvMap>();
      auto inv = probe::CollectInventory(*inventory_, job_env);
      auto rows = probe::EvaluateNode(inv);
      json j = probe::ReportJson(inv, rows);
      return {{"type", "inventory"}, {"name", options_.name}, {"report", j}};
    }
    if (type == "listen") return HandleListen(request);
    if (type == "kv_set") return HandleKvSet(request);
    if (type == "kv_get") return HandleKvGet(request);
    if (type == "allreduce") return HandleAllReduce(request);
    if (type == "p2p_send") return HandleP2pSend(request);
    if (type == "ping") return HandlePing(request);
    if (type == "shutdown") {
      *close_after = true;
      Stop();
      return {{"type", "bye"}};
    }
  } catch (const json::exception& e) {
    return {
        {"type", "error"}, {"code", "bad_request"}, {"message", std::string("malformed ") + type + ": " + e.what()}};
  }
  return {{"type", "error"}, {"code", "unknown_type"}, {"message", "unknown request type '" + type + "'"}};
}

// A bad argument of an authenticated request is the coordinator's to hear about, never a crash.
// Each field's own range was checked by ValidateRequest (agent/request.h) before Handle; what is
// left here are the checks across fields.
static json BadArgument(const std::string& message) {
  return {{"type", "error"}, {"code", "bad_request"}, {"message", message}};
}

json Agent::HandleListen(const json& request) {
  int port = request.at("port").get<int>();
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return {{"type", "error"}, {"code", "stopping"}, {"message", "the agent is stopping"}};
  if (port == port_ || extra_listeners_.count(port)) return {{"type", "listening"}, {"port", port}};
  int bound = 0;
  auto fd = net::Listen(options_.listen_addr, port, &bound);
  if (!fd.ok()) return {{"type", "error"}, {"code", "listen_failed"}, {"message", fd.status().message()}};
  auto shared = std::make_shared<net::Fd>(std::move(fd).value());
  extra_listeners_[bound] = shared;
  // Accept and close: the port only has to be reachable, as a rendezvous store's would be.
  listener_threads_.emplace_back([this, shared] {
    while (!stop_) {
      pollfd p{shared->get(), POLLIN, 0};
      if (::poll(&p, 1, 200) > 0) {
        int c = ::accept4(shared->get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) ::close(c);
      }
    }
  });
  log::Get("agent")->debug("rendezvous listener on port {}", bound);
  return {{"type", "listening"}, {"port", bound}};
}

json Agent::HandleKvSet(const json& request) {
  kv_.Set(request.at("key").get<std::string>(), request.at("value").get<std::string>());
  return {{"type", "kv_ok"}};
}

json Agent::HandleKvGet(const json& request) {
  auto keys = request.at("keys").get<std::vector<std::string>>();
  auto timeout = std::chrono::milliseconds(request.value("timeout_ms", 30000));
  std::map<std::string, std::string> values;
  if (stop_ || !kv_.WaitGet(keys, timeout, &values)) {
    return {{"type", "error"},
            {"code", "timeout"},
            {"message", "keys not set within " + std::to_string(timeout.count()) + " ms"}};
  }
  return {{"type", "kv_values"}, {"values", values}};
}

namespace {

json SweepRowsJson(const std::vector<probe::RankSizeResult>& results) {
  json rows = json::array();
  for (const auto& r : results) rows.push_back({{"bytes", r.bytes}, {"time_us", r.time_us}, {"wrong", r.wrong}});
  return rows;
}

// The rendezvous store named by an allreduce request ("store": the master agent, "run": key prefix).
Result<std::unique_ptr<AgentStore>> RequestStore(const json& request, const std::string& token, Duration timeout) {
  net::Endpoint master{request.at("store").at("host").get<std::string>(), request.at("store").at("port").get<int>()};
  return AgentStore::Connect(master, token, request.value("run", std::string("run")), timeout);
}

}  // namespace

json Agent::HandleAllReduce(const json& request) {
  std::string backend = request.value("backend", "gloo");
  probe::SweepOptions sweep;
  sweep.max_iters = request.value("max_iters", sweep.max_iters);
  sweep.warmup = request.value("warmup", sweep.warmup);
  auto sizes = request.at("sizes").get<std::vector<size_t>>();
  auto reply = [&](probe::Communicator& comm) -> json {
    auto results = probe::RunAllReduceSweep(comm, sizes, sweep, RealClock::Instance());
    if (!results.ok()) return {{"type", "error"}, {"code", "collective"}, {"message", results.status().message()}};
    return {{"type", "allreduce_result"},
            {"backend", comm.backend()},
            {"mode", comm.mode()},
            {"rank", comm.rank()},
            {"results", SweepRowsJson(*results)}};
  };
  if (backend == "mpi") {
    if (!options_.mpi) return {{"type", "error"}, {"code", "unsupported"}, {"message", "agent not started by mpirun"}};
    auto comm = probe::CreateMpiCommunicator();
    if (!comm.ok()) return {{"type", "error"}, {"code", "mpi"}, {"message", comm.status().message()}};
    return reply(**comm);
  }
  if (backend == "nccl") return HandleNcclAllReduce(request, sizes, sweep);
  if (backend != "gloo") return {{"type", "error"}, {"code", "unsupported"}, {"message", "unknown backend " + backend}};
  int rank = request.at("rank").get<int>();
  int size = request.at("size").get<int>();
  if (rank >= size) return BadArgument("allreduce: rank " + std::to_string(rank) + " of size " + std::to_string(size));
  auto timeout = std::chrono::milliseconds(request.value("timeout_ms", 60000));
  auto store = RequestStore(request, options_.token, timeout);
  if (!store.ok()) return {{"type", "error"}, {"code", "store"}, {"message", store.status().message()}};
  std::string bind = options_.listen_addr == "0.0.0.0" || options_.listen_addr == "::" ? "" : options_.listen_addr;
  if (bind.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    bind = host;
  }
  probe::GlooProbeOptions gloo;
  gloo.busy_poll = request.value("busy_poll", false);
  auto comm = probe::CreateGlooCommunicator(rank, size, **store, bind, timeout, gloo);
  if (!comm.ok()) return {{"type", "error"}, {"code", "rendezvous"}, {"message", comm.status().message()}};
  return reply(**comm);
}

// One rank per local GPU, each on its own thread with its own NCCL communicator and device; ranks
// first_rank … first_rank+gpus-1 of `size`. Rank 0's NCCL id travels through the master's store.
json Agent::HandleNcclAllReduce(const json& request, const std::vector<size_t>& sizes,
                                const probe::SweepOptions& sweep) {
  int first_rank = request.at("first_rank").get<int>();
  int gpus = request.at("gpus").get<int>();
  int size = request.at("size").get<int>();
  if (first_rank > size - gpus)
    return BadArgument("allreduce: " + std::to_string(gpus) + " GPUs from rank " + std::to_string(first_rank) + " of " +
                       std::to_string(size));
  auto timeout = std::chrono::milliseconds(request.value("timeout_ms", 60000));
  std::vector<json> rows(static_cast<size_t>(gpus));
  std::vector<std::string> errors(static_cast<size_t>(gpus));
  std::vector<std::thread> threads;
  for (int d = 0; d < gpus; ++d) {
    threads.emplace_back([&, d] {
      auto store = RequestStore(request, options_.token, timeout);
      if (!store.ok()) {
        errors[d] = store.status().message();
        return;
      }
      auto comm = probe::CreateNcclCommunicator(first_rank + d, size, d, **store);
      if (!comm.ok()) {
        errors[d] = comm.status().message();
        return;
      }
      auto results = probe::RunAllReduceSweep(**comm, sizes, sweep, RealClock::Instance());
      if (!results.ok()) {
        errors[d] = results.status().message();
        return;
      }
      rows[d] = {{"rank", first_rank + d}, {"device", d}, {"results", SweepRowsJson(*results)}};
    });
  }
  for (auto& t : threads) t.join();
  for (int d = 0; d < gpus; ++d) {
    if (!errors[d].empty()) {
      return {{"type", "error"}, {"code", "nccl"}, {"message", "GPU " + std::to_string(d) + ": " + errors[d]}};
    }
  }
  return {{"type", "allreduce_result"}, {"backend", "nccl"}, {"ranks", rows}};
}

// The filler after a "sink" request travels outside TLS (docs/security.md): the probe measures the
// network the job's NCCL sockets use, not AES.
json Agent::Sink(net::Link& link, wire::FrameDecoder& decoder) {
  uint64_t bytes = decoder.TakeBuffered().size() + link.TakeRawInput().size();
  auto start = std::chrono::steady_clock::now();
  std::vector<char> buf(1 << 20);
  while (true) {
    ssize_t n = ::recv(link.fd(), buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes += static_cast<uint64_t>(n);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {{"type", "sunk"}, {"bytes", bytes}, {"seconds", seconds}};
}

json Agent::HandleP2pSend(const json& request) {
  const json& target = request.at("target");
  net::Endpoint to{target.at("host").get<std::string>(), target.at("port").get<int>()};
  auto limit = std::chrono::duration<double>(request.value("seconds", 0.5));
  uint64_t max_bytes = request.value("max_bytes", uint64_t{256} << 20);
  auto c = net::Connect(to.host, to.port, std::chrono::seconds(5), options_.listen_addr);
  if (c.outcome != net::ConnectOutcome::kOk) {
    return {{"type", "error"}, {"code", "connect"}, {"message", "p2p connect to " + to.ToString() + ": " + c.error}};
  }
  auto link = net::Link::Connect(std::move(c.fd), key_, std::chrono::seconds(5));
  if (!link.ok()) {
    return {
        {"type", "error"}, {"code", "p2p"}, {"message", "p2p with " + to.ToString() + ": " + link.status().message()}};
  }
  wire::FrameDecoder decoder;
  if (!net::SendFrame(*link, {{"type", "hello"}, {"role", "peer"}}).ok() ||
      !net::RecvFrame(*link, decoder, std::chrono::seconds(5)).ok() ||
      !net::SendFrame(*link, {{"type", "sink"}}).ok()) {
    return {{"type", "error"}, {"code", "p2p"}, {"message", "p2p handshake with " + to.ToString() + " failed"}};
  }
  std::vector<char> chunk(1 << 20, 'x');
  uint64_t sent = 0;
  auto start = std::chrono::steady_clock::now();
  while (sent < max_bytes && std::chrono::steady_clock::now() - start < limit) {
    Status s = net::SendRaw(*link, std::string_view(chunk.data(), std::min<uint64_t>(chunk.size(), max_bytes - sent)));
    if (!s.ok()) return {{"type", "error"}, {"code", "p2p"}, {"message", "p2p send: " + s.message()}};
    sent += std::min<uint64_t>(chunk.size(), max_bytes - sent);
  }
  ::shutdown(link->fd(), SHUT_WR);
  // The receiver's count after our last byte: buffers in flight are included in the time.
  auto ack = net::RecvFrame(*link, decoder, std::chrono::seconds(60));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!ack.ok() || ack->value("type", "") != "sunk") {
    return {{"type", "error"}, {"code", "p2p"}, {"message", "p2p: no acknowledgement from " + to.ToString()}};
  }
  uint64_t received = ack->value("bytes", uint64_t{0});
  return {{"type", "p2p_result"},
          {"bytes", received},
          {"seconds", seconds},
          {"gbit_s", seconds > 0 ? static_cast<double>(received) * 8 / seconds / 1e9 : 0.0}};
}

json Agent::HandlePing(const json& request) {
  auto parsed = ParsePingRequest(request);
  if (!parsed.ok()) return BadArgument(parsed.status().message());
  PingReply reply = RunPing(*parsed, options_.listen_addr, &stop_);
  reply.listening.push_back(port_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [p, _] : extra_listeners_) reply.listening.push_back(p);
  }
  return PingReplyJson(reply, options_.name, parsed->ok_latency);
}

}  // namespace dsd::agent
