#include "grid/block_cache.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "support/fresh_thread.h"

using namespace ingrid;
using ingrid::testing::onFreshThread;

namespace {

struct Call : CachedBlocks {
  char bytes[100] = {};
};

}  // namespace

TEST_CASE("block cache: a freed block is handed out again to its size class on the same thread",
          "[grid]") {
  onFreshThread([] {
    void* a = BlockCache::allocate(40);
    // With the cache on, the whole block of its class (40 rounds up to 48) is there.
    std::memset(a, 0xab, BlockCache::kEnabled ? 48 : 40);
    BlockCache::deallocate(a, 40);
    if (!BlockCache::kEnabled) {  // under ASan: nothing is kept
      CHECK(BlockCache::TEST_cached(40) == 0);
      return;
    }
    CHECK(BlockCache::TEST_cached(40) == 1);
    CHECK(BlockCache::TEST_cached(48) == 1);  // one class
    CHECK(BlockCache::TEST_cached(64) == 0);
    void* b = BlockCache::allocate(33);  // same class (33..48)
    CHECK(b == a);
    CHECK(BlockCache::TEST_cached(40) == 0);
    BlockCache::deallocate(b, 33);
  });
}

TEST_CASE("block cache: bounded per class, large blocks and other threads' caches untouched",
          "[grid]") {
  onFreshThread([] {
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < BlockCache::kMaxBlocksPerClass + 5; ++i) {
      blocks.push_back(BlockCache::allocate(64));
    }
    for (void* b : blocks) BlockCache::deallocate(b, 64);
    // The free that found the cache full moved a run of the newest to the depot first.
    CHECK(BlockCache::TEST_cached(64) ==
          (BlockCache::kEnabled ? BlockCache::kMaxBlocksPerClass - BlockCache::kTransferBlocks + 5
                                : 0u));
    const std::size_t largestClass = BlockCache::TEST_cached(BlockCache::kMaxBlockBytes);
    void* large = BlockCache::allocate(BlockCache::kMaxBlockBytes + 1);
    BlockCache::deallocate(large, BlockCache::kMaxBlockBytes + 1);
    CHECK(BlockCache::TEST_cached(BlockCache::kMaxBlockBytes + 1) == 0);
    // Not kept in any class either (the largest is the one it would have rounded into).
    CHECK(BlockCache::TEST_cached(BlockCache::kMaxBlockBytes) == largestClass);
    onFreshThread([] { CHECK(BlockCache::TEST_cached(64) == 0); });
  });
}

TEST_CASE("block cache: a block allocated on one thread and freed on another is cached there",
          "[grid]") {
  void* block = nullptr;
  onFreshThread([&] { block = BlockCache::allocate(200); });
  onFreshThread([&] {
    BlockCache::deallocate(block, 200);
    CHECK(BlockCache::TEST_cached(200) == (BlockCache::kEnabled ? 1u : 0u));
    void* again = BlockCache::allocate(200);
    if (BlockCache::kEnabled) CHECK(again == block);
    BlockCache::deallocate(again, 200);
  });
}

TEST_CASE("block cache: allocate_shared and class-level new go through it", "[grid]") {
  onFreshThread([] {
    auto shared = std::allocate_shared<int>(CachedAllocator<int>(), 7);
    CHECK(*shared == 7);
    const void* sharedAt = shared.get();
    shared.reset();
    auto call = std::make_unique<Call>();
    const void* callAt = call.get();
    call.reset();
    if (!BlockCache::kEnabled) return;
    CHECK(BlockCache::TEST_cached(sizeof(Call)) == 1);
    // The same blocks again: the object and its control block in one, and the Call's.
    auto sharedAgain = std::allocate_shared<int>(CachedAllocator<int>(), 8);
    CHECK(static_cast<const void*>(sharedAgain.get()) == sharedAt);
    auto again = std::make_unique<Call>();
    CHECK(static_cast<const void*>(again.get()) == callAt);
    CHECK(BlockCache::TEST_cached(sizeof(Call)) == 0);
  });
}

TEST_CASE(
    "block cache: blocks freed past a thread's bound go to the depot, where a thread that "
    "only allocates takes them back",
    "[grid]") {
  if (!BlockCache::kEnabled) return;   // under ASan: nothing is kept
  constexpr std::size_t kBytes = 496;  // a class no other test uses
  std::vector<void*> made;
  // One thread makes them (as a caller makes its calls)...
  onFreshThread([&] {
    for (std::size_t i = 0; i < BlockCache::kMaxBlocksPerClass + BlockCache::kTransferBlocks; ++i) {
      made.push_back(BlockCache::allocate(kBytes));
    }
  });
  // ...another frees them (as a partition's thread does): its cache fills, then a run goes to the
  // depot.
  onFreshThread([&] {
    for (void* b : made) BlockCache::deallocate(b, kBytes);
    CHECK(BlockCache::TEST_cached(kBytes) <= BlockCache::kMaxBlocksPerClass);
  });
  // A third thread, with nothing cached, is handed one of those, not a new block from the heap.
  onFreshThread([&] {
    CHECK(BlockCache::TEST_cached(kBytes) == 0);
    void* block = BlockCache::allocate(kBytes);
    CHECK(std::find(made.begin(), made.end(), block) != made.end());
    // It took a whole run: the rest of it is now in its own cache.
    CHECK(BlockCache::TEST_cached(kBytes) == BlockCache::kTransferBlocks - 1);
    BlockCache::deallocate(block, kBytes);
  });
}
