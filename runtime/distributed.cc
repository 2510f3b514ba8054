#include "runtime/distributed.h"

#include <arpa/inet.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <set>

#include "common/log.h"
#include "common/run_files.h"
#include "common/strings.h"
#include "probe/mpi_comm.h"
#include "runtime/backends.h"

extern char** environ;

namespace dsd::runtime {
namespace {

const std::string* Find(const std::map<std::string, std::string>& env, const std::string& k) {
  auto it = env.find(k);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

std::string Hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

Result<Duration> SecondsVar(const std::map<std::string, std::string>& env, const std::string& name, Duration fallback) {
  const std::string* v = Find(env, name);
  if (!v) return fallback;
  double s = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), s);
  if (ec != std::errc() || p != v->data() + v->size() || !std::isfinite(s) || s <= 0) {
    return InvalidArgument(name + "=" + *v + ": expected seconds > 0");
  }
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

// Every rank publishes what it believes (world size, host, pid); rank 0 waits for all of them and
// posts the verdict, which every rank waits for. A rank that never comes is named.
Status Rendezvous(TcpStore& store, const RankEnv& env, int world_size, Duration timeout) {
  nlohmann::json me = {{"world_size", world_size}, {"host", Hostname()}, {"pid", ::getpid()}};
  DSD_RETURN_IF_ERROR(store.Set("rdzv/rank/" + std::to_string(env.rank), me.dump()));
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  if (env.rank == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < world_size; ++r) keys.push_back("rdzv/rank/" + std::to_string(r));
    std::vector<std::string> missing;
    auto got = store.WaitGet(keys, timeout, &missing);
    std::string verdict = "ok";
    if (!got.ok() && !missing.empty()) {
      std::vector<std::string> ranks;
      for (const auto& k : missing) ranks.push_back(k.substr(k.rfind('/') + 1));
      verdict = "rendezvous at " + where + ": " + std::to_string(world_size - static_cast<int>(missing.size())) +
                " of " + std::to_string(world_size) + " ranks joined within " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                " s; missing rank(s) " + Join(ranks, ", ") +
                " (were fewer processes launched than WORLD_SIZE, or did they fail before init_distributed?)";
    } else if (!got.ok()) {
      return got.status();
    } else {
      std::vector<std::string> disagree;
      for (const auto& [k, v] : *got) {
        auto j = nlohmann::json::parse(v, nullptr, false);
        int ws = j.is_object() ? j.value("world_size", -1) : -1;
        if (ws != world_size) {
          disagree.push_back("rank " + k.substr(k.rfind('/') + 1) + " on " +
                             (j.is_object() ? j.value("host", "?") : "?") + " says " + std::to_string(ws));
        }
      }
      if (!disagree.empty()) {
        verdict = "rendezvous at " + where + ": ranks disagree on the world size: rank 0 says " +
                  std::to_string(world_size) + ", " + Join(disagree, "; ");
      }
    }
    DSD_RETURN_IF_ERROR(store.Set("rdzv/verdict", verdict));
    if (verdict != "ok") {
      // The store lives in this process and ends with it: the ranks that joined read the verdict
      // first (each says so), or 2 s pass. Otherwise a loaded machine left them "no verdict".
      std::vector<std::string> acks, unacked;
      std::set<std::string> absent(missing.begin(), missing.end());
      for (int r = 1; r < world_size; ++r)
        if (!absent.count("rdzv/rank/" + std::to_string(r))) acks.push_back("rdzv/ack/" + std::to_string(r));
      if (!acks.empty()) (void)store.WaitGet(acks, std::chrono::seconds(2), &unacked);
      return InvalidArgument(verdict);
    }
    return Status::Ok();
  }
  std::vector<std::string> missing;
  auto verdict = store.WaitGet({"rdzv/verdict"}, timeout + std::chrono::seconds(10), &missing);
  if (!verdict.ok()) {
    return Timeout("rendezvous at " + where + ": rank 0 gave no verdict within " +
                   std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) + " s");
  }
  const std::string& v = verdict->at("rdzv/verdict");
  if (v != "ok") {
    (void)store.Set("rdzv/ack/" + std::to_string(env.rank), "1");  // rank 0 may close the store now
    return InvalidArgument(v);
  }
  return Status::Ok();
}

}  // namespace

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

Result<std::string> ChooseBindAddress(const std::string& ifname, const std::string& master) {
  if (!ifname.empty()) {
    ifaddrs* ifs = nullptr;
    if (::getifaddrs(&ifs) != 0) return ErrnoError("getifaddrs", errno);
    std::string found;
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && ifname == i->ifa_name) {
        char buf[INET_ADDRSTRLEN];
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
        found = buf;
        break;
      }
    }
    ::freeifaddrs(ifs);
    if (found.empty()) return NotFound("GLOO_SOCKET_IFNAME=" + ifname + ": no such interface with an IPv4 address");
    return found;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(master.c_str(), "9", &hints, &res); rc != 0) {
    return NotFound("MASTER_ADDR=" + master + ": " + gai_strerror(rc));
  }
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  std::string addr;
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {  // UDP: no packet is sent
    sockaddr_in local{};
    socklen_t len = sizeof local;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char buf[INET_ADDRSTRLEN];
      ::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf);
      addr = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  if (addr.empty()) return Unavailable("no route to MASTER_ADDR=" + master);
  return addr;
}

World::~World() {
  Finish();
  group_.reset();
  if (mpi_) probe::FinalizeMpi();
}

void World::Finish() {
  if (finished_) return;
  finished_ = true;
  if (watchdog_) watchdog_->Stop();
  if (trace_) {
    trace_->SetPhase(Phase::kFinished);
    trace_->SetFlags(kTraceFlagFinished);
  }
}

Result<std::unique_ptr<World>> InitDistributed(const DistributedOptions& options) {
  // A peer that died closes its sockets: a write to one must fail the collective with EPIPE (a
  // traced failure with a message), not kill this rank with SIGPIPE. Only the default action is
  // replaced; a program's own handler stays.
  struct sigaction old_action {};
  if (::sigaction(SIGPIPE, nullptr, &old_action) == 0 && old_action.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  auto log = log::Get("runtime");
  std::map<std::string, std::string> env = options.env.empty() ? ProcessEnvironment() : options.env;
  std::string backend = options.backend;
  if (backend.empty() && Find(env, "DSDOCTOR_BACKEND")) backend = *Find(env, "DSDOCTOR_BACKEND");
  bool under_mpirun = Find(env, "OMPI_COMM_WORLD_RANK") && !Find(env, "RANK");
  if (backend.empty()) backend = under_mpirun ? "mpi" : "gloo";
  if (backend != "gloo" && backend != "mpi" && backend != "nccl") {
    return InvalidArgument("backend \"" + backend + "\" is not one of gloo, mpi, nccl (DSDOCTOR_BACKEND)");
  }

  auto w = std::unique_ptr<World>(new World());
  if (backend == "mpi") {
    if (!Find(env, "OMPI_COMM_WORLD_RANK") && !Find(env, "PMIX_RANK")) {
      return InvalidArgument("backend mpi needs a launch by mpirun (OMPI_COMM_WORLD_RANK is not set)");
    }
    std::map<std::string, std::string> mpi_env = env;
    mpi_env.erase("RANK");
    mpi_env.erase("WORLD_SIZE");
    DSD_ASSIGN_OR_RETURN(w->env_, ParseRankEnv(mpi_env));
  } else if (!Find(env, "RANK") && !Find(env, "WORLD_SIZE") && !Find(env, "OMPI_COMM_WORLD_RANK")) {
    // A plain single process: a world of one on loopback, like torch's single-process defaults.
    w->env_ = RankEnv{0, 1, 0, 1, "127.0.0.1", 0, "single process"};
  } else {
    DSD_ASSIGN_OR_RETURN(w->env_, ParseRankEnv(env));
    if (w->env_.master_port == 0) return InvalidArgument("backend " + backend + " needs MASTER_ADDR and MASTER_PORT");
  }
  int world_size = options.world_size > 0 ? options.world_size : w->env_.world_size;
  if (w->env_.rank >= world_size) {
    return InvalidArgument("rank " + std::to_string(w->env_.rank) + " is not below the requested world size " +
                           std::to_string(world_size));
  }

  // The trace first, so a rank stuck in the rendezvous already shows it.
  std::string trace_path;
  if (const std::string* f = Find(env, "DSDOCTOR_TRACE_FILE"))
    trace_path = *f;
  else if (const std::string* d = Find(env, "DSDOCTOR_TRACE_DIR"))
    trace_path = RunDir(*d).RankTrace(w->env_.rank);
  TraceIdentity id{w->env_.rank, world_size, w->env_.local_rank, Hostname(), backend};
  auto trace = TraceWriter::Create(trace_path, id, options.trace_capacity);
  if (!trace.ok() && !trace_path.empty()) {
    // A full log dir must not end the job: trace to memory, which only the watchdog reads.
    log::Get("runtime")->warn("rank {}: {}; tracing to memory only (dsdoctor sees this rank untraced)", w->env_.rank,
                              trace.status().message());
    trace = TraceWriter::Create("", id, options.trace_capacity);
  }
  if (!trace.ok()) return trace.status();
  w->trace_ = std::move(trace).value();
  w->trace_->SetPhase(Phase::kInit);

  DiagnosticsConfig diag;
  DSD_RETURN_IF_ERROR(ApplyDiagnosticsEnv(Find(env, "DSDOCTOR_TIMEOUT"), Find(env, "DSDOCTOR_WATCHDOG_POLICY"), &diag));
  w->watchdog_ = std::make_unique<Watchdog>(w->trace_, w->env_.rank);
  w->watchdog_->Configure({std::chrono::duration_cast<Duration>(std::chrono::duration<double>(diag.watchdog_timeout_s)),
                           diag.watchdog_policy});
  w->watchdog_->Start();

  DSD_ASSIGN_OR_RETURN(Duration rdzv_timeout,
                       SecondsVar(env, "DSDOCTOR_RENDEZVOUS_TIMEOUT",
                                  options.rendezvous_timeout > Duration::zero() ? options.rendezvous_timeout
                                                                                : std::chrono::seconds(300)));
  std::unique_ptr<Backend> b;
  if (backend == "mpi") {
    DSD_RETURN_IF_ERROR(probe::InitMpi());
    w->mpi_ = true;
    DSD_ASSIGN_OR_RETURN(b, CreateMpiBackend());
    if (b->size() != world_size) {
      return InvalidArgument("world size " + std::to_string(world_size) + " requested, but mpirun started " +
                             std::to_string(b->size()) + " processes");
    }
  } else {
    const RankEnv& e = w->env_;
    uint64_t rdzv =
        w->trace_->Begin({Op::kRendezvous, DType::kNone, ReduceOp::kNone, 0, 0, 0, world_size, 0, "init_distributed"});
    auto fail = [&](Status s) {
      w->trace_->Fail(rdzv, s.message());
      log->error("rank {}: init_distributed failed: {}", e.rank, s.message());
      return s;
    };
    bool single = e.source == "single process";
    std::unique_ptr<gloo::rendezvous::Store> local_store;
    gloo::rendezvous::Store* store = nullptr;
    if (single) {
      local_store = std::make_unique<gloo::rendezvous::HashStore>();
      store = local_store.get();
    } else {
      if (e.rank == 0) {
        auto server = TcpStoreServer::Start(e.master_addr, e.master_port);
        if (!server.ok()) return fail(server.status());
        w->server_ = std::move(*server);
      }
      auto client = TcpStore::Connect(e.master_addr, e.master_port, rdzv_timeout, rdzv_timeout);
      if (!client.ok()) return fail(client.status());
      w->store_ = std::move(*client);
      if (Status s = Rendezvous(*w->store_, e, world_size, rdzv_timeout); !s.ok()) return fail(s);
      store = w->store_.get();
    }
    gloo::rendezvous::PrefixStore prefixed("world", *store);
    if (backend == "gloo") {
      std::string bind = "127.0.0.1";
      if (const std::string* a = Find(env, "DSDOCTOR_BIND_ADDR")) {
        bind = *a;
      } else if (!single) {
        auto chosen =
            ChooseBindAddress(Find(env, "GLOO_SOCKET_IFNAME") ? *Find(env, "GLOO_SOCKET_IFNAME") : "", e.master_addr);
        if (!chosen.ok()) return fail(chosen.status());
        bind = *chosen;
      }
      auto created = CreateGlooBackend(e.rank, world_size, prefixed, bind, options.comm_timeout);
      if (!created.ok()) return fail(created.status());
      b = std::move(*created);
    } else {
      auto created = CreateNcclBackend(e.rank, world_size, e.local_rank, prefixed);
      if (!created.ok()) return fail(created.status());
      b = std::move(*created);
    }
    w->trace_->Complete(rdzv);
  }
  w->group_ = std::make_shared<ProcessGroup>(std::move(b), w->trace_);
  w->trace_->SetPhase(Phase::kUser);
  log->debug("rank {}/{} initialised on {} ({})", w->env_.rank, world_size, backend, w->env_.source);
  return w;
}

}  // namespace dsd::runtime
