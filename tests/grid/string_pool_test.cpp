#include <ingrid/string_pool.h>

#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/fresh_thread.h"

using namespace ingrid;
using ingrid::testing::onFreshThread;

TEST_CASE("string pool: a string given back is taken again with its capacity, emptied", "[grid]") {
  onFreshThread([] {
    CHECK(StringPool::TEST_size() == 0);
    CHECK(StringPool::take().capacity() == std::string().capacity());  // empty pool: nothing
    std::string s(200, 'x');
    const char* block = s.data();
    const std::size_t capacity = s.capacity();
    StringPool::give(std::move(s));
    CHECK(s.empty());              // NOLINT(bugprone-use-after-move): give() promises it
    if (!StringPool::enabled()) {  // under ASan: every string is freed, nothing is kept
      CHECK(StringPool::TEST_size() == 0);
      return;
    }
    CHECK(StringPool::TEST_size() == 1);
    CHECK(StringPool::TEST_bytes() == capacity);
    const std::string copy = StringPool::copy("abc");
    CHECK(copy == "abc");
    CHECK(copy.data() == block);  // the same heap block: no allocation
    CHECK(copy.capacity() == capacity);
    CHECK(StringPool::TEST_size() == 0);
    CHECK(StringPool::TEST_bytes() == 0);
  });
}

TEST_CASE("string pool: bounded by count and by capacity, keeping no small or large string",
          "[grid]") {
  onFreshThread([] {
    StringPool::give(std::string("short"));  // within the small-string buffer: no block to keep
    StringPool::give(std::string(StringPool::kMaxPooledCapacity + 1, 'x'));  // too large
    CHECK(StringPool::TEST_size() == 0);
    if (!StringPool::enabled()) return;
    // The small shelf: bounded by count.
    for (std::size_t i = 0; i < StringPool::kMaxSmallStrings + 10; ++i) {
      StringPool::give(std::string(100, 'x'));
    }
    CHECK(StringPool::TEST_size() == StringPool::kMaxSmallStrings);
    std::vector<std::string> taken;
    for (std::size_t i = 0; i < StringPool::kMaxSmallStrings + 1; ++i) {
      taken.push_back(StringPool::take());
    }
    CHECK(StringPool::TEST_size() == 0);
    CHECK(StringPool::TEST_bytes() == 0);
    // The large shelf: bounded by count...
    for (std::size_t i = 0; i < StringPool::kMaxLargeStrings + 10; ++i) {
      StringPool::give(std::string(StringPool::kSmallCapacity + 1, 'x'));
    }
    CHECK(StringPool::TEST_size() == StringPool::kMaxLargeStrings);
    taken.clear();
    for (std::size_t i = 0; i < StringPool::kMaxLargeStrings; ++i) {
      taken.push_back(StringPool::take(StringPool::kSmallCapacity + 1));
    }
    CHECK(StringPool::TEST_size() == 0);
    // ...and by bytes: strings of the largest kept capacity fill it before the count does.
    const std::size_t fits = StringPool::kMaxPooledBytes / StringPool::kMaxPooledCapacity;
    REQUIRE(fits < StringPool::kMaxLargeStrings);
    for (std::size_t i = 0; i < fits + 3; ++i) {
      std::string big;
      big.reserve(StringPool::kMaxPooledCapacity);
      REQUIRE(big.capacity() == StringPool::kMaxPooledCapacity);  // (libstdc++ reserves exactly)
      StringPool::give(std::move(big));
    }
    CHECK(StringPool::TEST_size() == fits);
    CHECK(StringPool::TEST_bytes() == StringPool::kMaxPooledBytes);
  });
}

TEST_CASE("string pool: a small take is not served by a large string, nor a large by a small",
          "[grid]") {
  onFreshThread([] {
    if (!StringPool::enabled()) return;
    std::string large(4096, 'l');
    const char* largeBlock = large.data();
    std::string small(40, 's');
    const char* smallBlock = small.data();
    StringPool::give(std::move(small));
    StringPool::give(std::move(large));  // the newest: a single shelf would hand it out first
    REQUIRE(StringPool::TEST_size() == 2);
    const std::string a = StringPool::take(30);
    CHECK(a.data() == smallBlock);
    CHECK(a.capacity() <= StringPool::kSmallCapacity);
    const std::string b = StringPool::take(1000);
    CHECK(b.data() == largeBlock);
    CHECK(StringPool::TEST_size() == 0);
    // An empty shelf makes a new string even while the other shelf holds one.
    StringPool::give(std::string(4096, 'l'));
    const std::string c = StringPool::take(30);
    CHECK(c.capacity() < 4096);
    CHECK(StringPool::TEST_size() == 1);
  });
}

TEST_CASE("string pool: each thread has its own", "[grid]") {
  onFreshThread([] {
    StringPool::give(std::string(300, 'y'));
    const std::size_t here = StringPool::TEST_size();
    CHECK(here == (StringPool::enabled() ? 1u : 0u));
    onFreshThread([] { CHECK(StringPool::TEST_size() == 0); });
    CHECK(StringPool::TEST_size() == here);
  });
}
