#include "grid/block_cache.h"

#include <algorithm>
#include <array>
#include <mutex>
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

// The shared depot: where a thread whose cache is full leaves blocks, in runs of
// BlockCache::kTransferBlocks, and a thread whose cache is empty takes them. So a block made on
// one thread and freed on another (an embedded call: made on the caller's thread, freed on the
// partition's or the completion's) comes back to the thread that makes them, one lock per run.
// At most kDepotBytes per class; never destroyed (blocks may be freed during static destruction).
struct Depot {
  static constexpr std::size_t kDepotBytes = 128u << 10;
  struct Class {
    std::mutex mu;
    std::vector<void*> blocks;  // guarded by mu
  };
  std::array<Class, kClasses> classes;
};

Depot& depot() noexcept {
  // Made in static storage (no allocation that could throw here), and never destroyed.
  alignas(Depot) static unsigned char storage[sizeof(Depot)];
  static Depot* d = new (storage) Depot;
  return *d;
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

namespace {

// Moves up to kTransferBlocks blocks of class `cls` from the depot into `blocks` (empty, with its
// capacity reserved); how many it moved.
std::size_t takeRun(std::size_t cls, std::vector<void*>& blocks) noexcept {
  Depot::Class& shared = depot().classes[cls];
  std::lock_guard lock(shared.mu);
  const std::size_t n = std::min(BlockCache::kTransferBlocks, shared.blocks.size());
  blocks.insert(blocks.end(), shared.blocks.end() - static_cast<std::ptrdiff_t>(n),
                shared.blocks.end());
  shared.blocks.resize(shared.blocks.size() - n);
  return n;
}

// Moves the newest kTransferBlocks blocks of `blocks` (full) to the depot; what the depot has no
// room for goes back to the heap.
void leaveRun(std::size_t cls, std::vector<void*>& blocks) noexcept {
  const auto first = blocks.end() - static_cast<std::ptrdiff_t>(BlockCache::kTransferBlocks);
  {
    Depot::Class& shared = depot().classes[cls];
    std::lock_guard lock(shared.mu);
    const std::size_t limit = Depot::kDepotBytes / blockBytes(cls);
    if (shared.blocks.capacity() == 0) {
      try {
        shared.blocks.reserve(limit);  // once per class; never again
      } catch (...) {
      }
    }
    const std::size_t room =
        std::min(limit, shared.blocks.capacity()) - std::min(limit, shared.blocks.size());
    const auto kept =
        first + static_cast<std::ptrdiff_t>(std::min(room, BlockCache::kTransferBlocks));
    shared.blocks.insert(shared.blocks.end(), first, kept);
    for (auto it = kept; it != blocks.end(); ++it) ::operator delete(*it);
  }
  blocks.erase(first, blocks.end());
}

}  // namespace

void* BlockCache::allocate(std::size_t bytes) {
  if (!cached(bytes)) return ::operator new(bytes);
  // Always a whole block of its class, even when none is cached: any block may be cached later,
  // on any thread, and handed out for any allocation of its class.
  const std::size_t cls = classOf(bytes);
  if (tCacheGone) return ::operator new(blockBytes(cls));
  std::vector<void*>& blocks = cache().free[cls];
  if (blocks.empty()) {
    if (blocks.capacity() == 0) {
      try {
        blocks.reserve(kMaxBlocksPerClass);  // once per class and thread; never again
      } catch (...) {
        return ::operator new(blockBytes(cls));
      }
    }
    if (takeRun(cls, blocks) == 0) return ::operator new(blockBytes(cls));
  }
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
  const std::size_t cls = classOf(bytes);
  std::vector<void*>& blocks = cache().free[cls];
  if (blocks.size() >= kMaxBlocksPerClass) leaveRun(cls, blocks);  // for a thread that makes them
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
