#include "grid/block_cache.h"

#include <array>
#include <vector>

namespace ingrid {
namespace {

constexpr std::size_t kClasses = BlockCache::kMaxBlockBytes / BlockCache::kGranule;
static_assert(alignof(std::max_align_t) <= BlockCache::kGranule);

// False once this thread's cache is destroyed (at its exit): a block freed after that, by a
// destructor that runs later, goes straight back to the heap. A trivial thread_local, readable to
// the end.
thread_local bool tCacheGone = false;

struct Cache {
  std::array<std::vector<void*>, kClasses> free;
  Cache() = default;
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;
  ~Cache() {
    tCacheGone = true;
    for (std::vector<void*>& blocks : free) {
      for (void* block : blocks) ::operator delete(block);
    }
  }
};

Cache& cache() noexcept {
  thread_local Cache c;
  return c;
}

// The class of an allocation of `bytes` (> 0, <= kMaxBlockBytes), and the size of its blocks.
std::size_t classOf(std::size_t bytes) noexcept {
  return (bytes + BlockCache::kGranule - 1) / BlockCache::kGranule - 1;
}
std::size_t blockBytes(std::size_t cls) noexcept { return (cls + 1) * BlockCache::kGranule; }

bool cached(std::size_t bytes) noexcept {
  return BlockCache::kEnabled && bytes > 0 && bytes <= BlockCache::kMaxBlockBytes;
}

}  // namespace

void* BlockCache::allocate(std::size_t bytes) {
  if (!cached(bytes)) return ::operator new(bytes);
  // Always a whole block of its class, even when none is cached: any block may be cached later,
  // on any thread, and handed out for any allocation of its class.
  const std::size_t cls = classOf(bytes);
  if (tCacheGone) return ::operator new(blockBytes(cls));
  std::vector<void*>& blocks = cache().free[cls];
  if (blocks.empty()) return ::operator new(blockBytes(cls));
  void* block = blocks.back();
  blocks.pop_back();
  return block;
}

void BlockCache::deallocate(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  if (!cached(bytes) || tCacheGone) {
    ::operator delete(block);
    return;
  }
  std::vector<void*>& blocks = cache().free[classOf(bytes)];
  if (blocks.size() >= kMaxBlocksPerClass) {
    ::operator delete(block);
    return;
  }
  if (blocks.capacity() == 0) {
    try {
      blocks.reserve(kMaxBlocksPerClass);  // once per class and thread; never again
    } catch (...) {
      ::operator delete(block);  // out of memory: just free it
      return;
    }
  }
  blocks.push_back(block);
}

std::size_t BlockCache::TEST_cached(std::size_t bytes) noexcept {
  return cached(bytes) && !tCacheGone ? cache().free[classOf(bytes)].size() : 0;
}

}  // namespace ingrid
