#include <ingrid/hash.h>

#include <catch2/catch.hpp>

#include <string>

using ingrid::keyHash;
using ingrid::partitionOf;

// These vectors pin the key hash (XXH64, seed 0). If one fails, the hash changed and every key
// of a running cluster would move to another partition: that is a breaking change.
TEST_CASE("keyHash is XXH64 with seed 0", "[grid][hash]") {
  CHECK(keyHash("") == 0xEF46DB3751D8E999ULL);
  CHECK(keyHash("a") == 0xD24EC4F1A98C6E5BULL);
  CHECK(keyHash("abc") == 0x44BC2CF5AD770999ULL);
  CHECK(keyHash("user:42") == keyHash(std::string("user:42")));
  const std::string withNul("a\0b", 3);
  CHECK(keyHash(withNul) != keyHash("a"));
}

TEST_CASE("partitionOf is the hash modulo the partition count", "[grid][hash]") {
  CHECK(partitionOf("abc", 1024) == 0x44BC2CF5AD770999ULL % 1024);
  CHECK(partitionOf("abc", 1) == 0);
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "key-" + std::to_string(i);
    CHECK(partitionOf(key, 7) < 7);
  }
}
