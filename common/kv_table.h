// A key-value table with blocking multi-key waits: the rendezvous state behind the agent's kv
// service (agent/agent.cc) and the training runtime's TCP store (runtime/store.cc).
// Thread-safe: a mutex guards the map, a condition variable wakes waiters.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"

namespace dsd {

class KvTable {
 public:
  void Set(const std::string& key, std::string value);
  // Waits until every key is set, `timeout` passes or Cancel() is called. Fills `values` with the
  // keys that are set (all of them when it returns true) and `missing` with the others.
  bool WaitGet(const std::vector<std::string>& keys, Duration timeout, std::map<std::string, std::string>* values,
               std::vector<std::string>* missing = nullptr);
  // Wakes every waiter for good (shutdown); later waits return at once.
  void Cancel();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
  bool cancelled_ = false;
};

}  // namespace dsd
