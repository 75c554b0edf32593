// BlockCache: small heap blocks kept per thread for reuse, so the objects made for every request
// (a routed call, a replication record, its outcome) cost no call to the allocator in the steady
// state.
//
// A block freed on a thread goes to that thread's cache for its size class (rounded up to 16
// bytes, up to kMaxBlockBytes) and is handed out again by the next allocation of that class
// there; a block allocated on one thread and freed on another moves to the other's cache.
// Bounded: at most kMaxBlocksPerClass blocks per class and thread. A thread whose cache of a class
// is full leaves its newest kTransferBlocks in a shared depot (one per class, bounded; past it they
// go back to the heap), and a thread whose cache is empty takes a run of them from there before
// it asks the heap: so blocks made on one thread and freed on another (an embedded call, made on
// the caller's thread and freed on another) come back, one lock per run. The fast path takes no
// lock (thread-local). A thread's cache is freed when the thread ends.
//
// Under AddressSanitizer nothing is kept (every block goes back to the heap at once), so a use
// after free is still reported there.
#pragma once

#include <cstddef>
#include <new>

namespace ingrid {

// Reuse is off under AddressSanitizer (here and in the string pool, grid/string_pool.cpp).
#if defined(__SANITIZE_ADDRESS__)
#define INGRID_BLOCK_REUSE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define INGRID_BLOCK_REUSE 0
#endif
#endif
#ifndef INGRID_BLOCK_REUSE
#define INGRID_BLOCK_REUSE 1
#endif

class BlockCache {
 public:
  // False under AddressSanitizer: blocks then go straight to the heap and back.
  static constexpr bool kEnabled = INGRID_BLOCK_REUSE;
  static constexpr std::size_t kGranule = 16;
  static constexpr std::size_t kMaxBlockBytes = 512;
  static constexpr std::size_t kMaxBlocksPerClass = 256;
  static constexpr std::size_t kTransferBlocks = 64;  // a run moved to or from the depot

  // A block of at least `bytes` bytes, aligned for any fundamental type. Throws std::bad_alloc.
  static void* allocate(std::size_t bytes);
  // Frees a block that allocate(bytes) returned, with the same `bytes`.
  static void deallocate(void* block, std::size_t bytes) noexcept;

  // For tests: the blocks this thread's cache holds for allocations of `bytes`.
  static std::size_t TEST_cached(std::size_t bytes) noexcept;
};

// A standard allocator over the BlockCache, for std::allocate_shared (the object and its control
// block in one cached block).
template <class T>
struct CachedAllocator {
  using value_type = T;
  CachedAllocator() noexcept = default;
  template <class U>
  CachedAllocator(const CachedAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  static_assert(alignof(T) <= BlockCache::kGranule, "an over-aligned type: not from the cache");
  T* allocate(std::size_t n) { return static_cast<T*>(BlockCache::allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { BlockCache::deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const CachedAllocator<U>&) const noexcept {
    return true;
  }
};

// Class-level operator new and delete through the BlockCache, for a type made per request:
//   struct Call : CachedBlocks { ... };
struct CachedBlocks {
  static void* operator new(std::size_t bytes) { return BlockCache::allocate(bytes); }
  static void operator delete(void* block, std::size_t bytes) noexcept {
    BlockCache::deallocate(block, bytes);
  }
  // An over-aligned type (alignof > kGranule) bypasses the cache: these are chosen for it.
  static void* operator new(std::size_t bytes, std::align_val_t align) {
    return ::operator new(bytes, align);
  }
  static void operator delete(void* block, std::align_val_t align) noexcept {
    ::operator delete(block, align);
  }
};

}  // namespace ingrid
