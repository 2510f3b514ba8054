#include "common/kv_table.h"

namespace dsd {

void KvTable::Set(const std::string& key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kv_[key] = std::move(value);
  }
  cv_.notify_all();
}

bool KvTable::WaitGet(const std::vector<std::string>& keys, Duration timeout,
                      std::map<std::string, std::string>* values, std::vector<std::string>* missing) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] {
    if (cancelled_) return true;
    for (const auto& k : keys) {
      if (!kv_.count(k)) return false;
    }
    return true;
  });
  bool all = true;
  for (const auto& k : keys) {
    auto it = kv_.find(k);
    if (it != kv_.end()) {
      (*values)[k] = it->second;
    } else {
      all = false;
      if (missing) missing->push_back(k);
    }
  }
  return all;
}

void KvTable::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

}  // namespace dsd
