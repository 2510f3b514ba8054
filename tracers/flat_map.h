// FlatMap: a hash map of small plain keys and values in one array (open addressing, linear probing,
// deletion by backward shift), for the PMPI tracer's hot tables: the requests of non-blocking calls
// in flight and the per-peer p2p sequence numbers. std::unordered_map allocated a node per request
// and chased it per look-up; a traced MPI_Isend/MPI_Irecv/MPI_Waitall spent a fifth of its cost there.
//
// K and V are trivially copyable, K at most 8 bytes (MPI_Request is a pointer in Open MPI, an int in
// MPICH). One key value, `empty`, marks a free slot and is never stored. Pointers returned by Find
// and Get stay valid until the next Get or Erase (either may move entries).
// Not thread-safe: the caller serialises access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace dsd::tracers {

template <class K, class V>
class FlatMap {
  static_assert(std::is_trivially_copyable_v<K> && sizeof(K) <= 8 && std::is_trivially_copyable_v<V>);

 public:
  explicit FlatMap(K empty) : empty_(empty) {}

  size_t size() const { return size_; }

  V* Find(K key) {
    if (size_ == 0 || Same(key, empty_)) return nullptr;
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      if (Same(slots_[i].key, key)) return &slots_[i].value;
      if (Same(slots_[i].key, empty_)) return nullptr;
    }
  }

  // The value of `key`, made (value-initialised) if absent; `*fresh` says which. `key` != empty.
  V& Get(K key, bool* fresh = nullptr) {
    if (2 * (size_ + 1) > slots_.size()) Grow();  // at most half full: probes stay short
    size_t i = Home(key);
    for (; !Same(slots_[i].key, empty_); i = (i + 1) & mask_) {
      if (Same(slots_[i].key, key)) {
        if (fresh) *fresh = false;
        return slots_[i].value;
      }
    }
    slots_[i].key = key;
    slots_[i].value = V{};
    ++size_;
    if (fresh) *fresh = true;
    return slots_[i].value;
  }

  bool Erase(K key) {
    if (size_ == 0 || Same(key, empty_)) return false;
    size_t i = Home(key);
    for (; !Same(slots_[i].key, key); i = (i + 1) & mask_)
      if (Same(slots_[i].key, empty_)) return false;
    // Backward shift: move each later entry of the run whose home is not between the hole and it
    // into the hole, so every entry stays reachable from its home without tombstones.
    for (size_t j = i;;) {
      j = (j + 1) & mask_;
      if (Same(slots_[j].key, empty_)) break;
      const size_t home = Home(slots_[j].key);
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].key = empty_;
    --size_;
    return true;
  }

  void Clear() {
    slots_.clear();
    mask_ = 0;
    size_ = 0;
  }

 private:
  struct Slot {
    K key;
    V value;
  };

  static uint64_t Bits(K key) {
    uint64_t b = 0;
    std::memcpy(&b, &key, sizeof key);
    return b;
  }
  static bool Same(K a, K b) { return Bits(a) == Bits(b); }
  // Fibonacci hashing: pointers' low bits are alignment zeros; the multiply spreads the rest.
  size_t Home(K key) const { return static_cast<size_t>((Bits(key) * 0x9E3779B97F4A7C15ULL) >> shift_); }

  void Grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    const size_t n = old.empty() ? 16 : 2 * old.size();
    slots_.assign(n, Slot{empty_, V{}});
    mask_ = n - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(n));
    size_ = 0;
    for (const Slot& s : old)
      if (!Same(s.key, empty_)) Get(s.key) = s.value;
  }

  K empty_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace dsd::tracers
