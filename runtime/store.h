// The rendezvous store of a job, like torch's TCPStore: rank 0 serves a key-value table on
// MASTER_ADDR:MASTER_PORT, every rank (rank 0 too) talks to it through a TcpStore client, which is
// a gloo::rendezvous::Store. Frames are docs/protocol.md's, messages {"type":"set"|"get"} JSON
// (docs/runtime.md, "init_distributed"). Like torch's TCPStore it is unauthenticated: it binds
// MASTER_ADDR only and holds nothing but addresses and ids for the rendezvous.
//
// TcpStoreServer: owns its listener and one thread per connection; Stop()/destructor joins them.
// TcpStore: one connection, calls serialised by a mutex (thread-safe). Failures throw
// gloo::IoException (gloo's Store contract); callers in the runtime catch them.
#pragma once

#include <gloo/rendezvous/store.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/kv_table.h"
#include "common/net.h"

namespace dsd::runtime {

class TcpStoreServer {
 public:
  // Listens on addr:port (port 0: any; see port()).
  static Result<std::unique_ptr<TcpStoreServer>> Start(const std::string& addr, int port);
  ~TcpStoreServer();
  int port() const { return port_; }
  void Stop();

 private:
  TcpStoreServer(net::Fd listener, int port);
  void AcceptLoop();
  void Serve(int fd);

  net::Fd listener_;
  int port_;
  std::atomic<bool> stop_{false};
  KvTable kv_;
  std::mutex mu_;
  std::vector<int> conns_;
  std::vector<std::thread> threads_;
  std::thread accept_;
};

class TcpStore final : public gloo::rendezvous::Store {
 public:
  // Retries the connection until `connect_timeout` (the server may start after us).
  static Result<std::unique_ptr<TcpStore>> Connect(const std::string& host, int port, Duration connect_timeout,
                                                   Duration default_wait);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // Status-returning forms. WaitGet reports the keys still missing at the timeout.
  Status Set(const std::string& key, const std::string& value);
  Result<std::map<std::string, std::string>> WaitGet(const std::vector<std::string>& keys, Duration timeout,
                                                     std::vector<std::string>* missing = nullptr);

 private:
  TcpStore(net::Fd fd, std::string where, Duration default_wait)
      : fd_(std::move(fd)), where_(std::move(where)), default_wait_(default_wait) {}
  Result<nlohmann::json> Call(const nlohmann::json& request, Duration timeout);

  std::mutex mu_;
  net::Fd fd_;
  wire::FrameDecoder decoder_;
  std::string where_;
  Duration default_wait_;
};

}  // namespace dsd::runtime
