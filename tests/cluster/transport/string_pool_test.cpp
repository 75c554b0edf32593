#include "cluster/transport/string_pool.h"

#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/fresh_thread.h"

using namespace ingrid;
using ingrid::testing::onFreshThread;

TEST_CASE("string pool: a string given back is taken again with its capacity, emptied",
          "[cluster][transport]") {
  onFreshThread([] {
    CHECK(StringPool::TEST_size() == 0);
    CHECK(StringPool::take().capacity() == std::string().capacity());  // empty pool: nothing
    std::string s(200, 'x');
    const char* block = s.data();
    const std::size_t capacity = s.capacity();
    StringPool::give(std::move(s));
    CHECK(s.empty());             // NOLINT(bugprone-use-after-move): give() promises it
    if (!StringPool::kEnabled) {  // under ASan: every string is freed, nothing is kept
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
          "[cluster][transport]") {
  onFreshThread([] {
    StringPool::give(std::string("short"));  // within the small-string buffer: no block to keep
    StringPool::give(std::string(StringPool::kMaxPooledCapacity + 1, 'x'));  // too large
    CHECK(StringPool::TEST_size() == 0);
    if (!StringPool::kEnabled) return;
    for (std::size_t i = 0; i < StringPool::kMaxPooledStrings + 10; ++i) {
      StringPool::give(std::string(100, 'x'));
    }
    CHECK(StringPool::TEST_size() == StringPool::kMaxPooledStrings);
    std::vector<std::string> taken;
    for (std::size_t i = 0; i < StringPool::kMaxPooledStrings + 1; ++i) {
      taken.push_back(StringPool::take());
    }
    CHECK(StringPool::TEST_size() == 0);
    CHECK(StringPool::TEST_bytes() == 0);
    // The bytes bound: strings of the largest kept capacity fill it before the count does.
    const std::size_t fits = StringPool::kMaxPooledBytes / StringPool::kMaxPooledCapacity;
    REQUIRE(fits < StringPool::kMaxPooledStrings);
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

TEST_CASE("string pool: each thread has its own", "[cluster][transport]") {
  onFreshThread([] {
    StringPool::give(std::string(300, 'y'));
    const std::size_t here = StringPool::TEST_size();
    CHECK(here == (StringPool::kEnabled ? 1u : 0u));
    onFreshThread([] { CHECK(StringPool::TEST_size() == 0); });
    CHECK(StringPool::TEST_size() == here);
  });
}
