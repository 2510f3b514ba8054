#include "tracers/flat_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>

namespace dsd::tracers {
namespace {

TEST(FlatMapTest, FindsWhatWasPutAndForgetsWhatWasErased) {
  FlatMap<const void*, uint64_t> m(nullptr);
  int a, b;
  EXPECT_EQ(m.Find(&a), nullptr);
  bool fresh = false;
  m.Get(&a, &fresh) = 7;
  EXPECT_TRUE(fresh);
  m.Get(&b) = 9;
  m.Get(&a, &fresh) += 1;
  EXPECT_FALSE(fresh);
  ASSERT_NE(m.Find(&a), nullptr);
  EXPECT_EQ(*m.Find(&a), 8u);
  EXPECT_EQ(*m.Find(&b), 9u);
  EXPECT_TRUE(m.Erase(&a));
  EXPECT_FALSE(m.Erase(&a));
  EXPECT_EQ(m.Find(&a), nullptr);
  EXPECT_EQ(*m.Find(&b), 9u);
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.Find(nullptr), nullptr);  // the empty key is never found
}

// Keys that share their home slot make long runs: erasing from a run's middle, start and wrapped
// end must leave every other key reachable (the backward shift).
TEST(FlatMapTest, AgreesWithUnorderedMapUnderRandomPutsAndErases) {
  for (uint64_t spread : {1ull, 16ull, 1ull << 40}) {  // dense ints, aligned pointers, far apart
    FlatMap<uint64_t, uint64_t> m(0);
    std::unordered_map<uint64_t, uint64_t> ref;
    std::mt19937_64 rng(spread);
    for (int step = 0; step < 20000; ++step) {
      const uint64_t key = (rng() % 300 + 1) * spread;
      switch (rng() % 3) {
        case 0:
          m.Get(key) = step;
          ref[key] = step;
          break;
        case 1:
          EXPECT_EQ(m.Erase(key), ref.erase(key) == 1) << "key " << key;
          break;
        default: {
          uint64_t* v = m.Find(key);
          auto it = ref.find(key);
          ASSERT_EQ(v != nullptr, it != ref.end()) << "key " << key << " at step " << step;
          if (v) {
            EXPECT_EQ(*v, it->second);
          }
        }
      }
      ASSERT_EQ(m.size(), ref.size());
    }
    for (const auto& [key, value] : ref) {
      ASSERT_NE(m.Find(key), nullptr) << key;
      EXPECT_EQ(*m.Find(key), value);
    }
  }
}

TEST(FlatMapTest, ClearEmptiesItAndItFillsAgain) {
  FlatMap<int, int> m(-1);
  for (int i = 0; i < 100; ++i) m.Get(i) = i * 2;
  EXPECT_EQ(m.size(), 100u);
  m.Clear();
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.Find(5), nullptr);
  m.Get(5) = 1;
  EXPECT_EQ(*m.Find(5), 1);
}

}  // namespace
}  // namespace dsd::tracers
