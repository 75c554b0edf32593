#include <ingrid/string_pool.h>

#include <utility>
#include <vector>

#include "grid/block_cache.h"  // INGRID_BLOCK_REUSE

namespace ingrid {
namespace {

// True once this thread's pool is destroyed (at its exit): what is given after that is freed.
thread_local bool tPoolGone = false;

struct Shelf {
  std::vector<std::string> strings;
  std::size_t bytes = 0;  // capacity held
};

struct Pool {
  Shelf small;  // capacities up to kSmallCapacity
  Shelf large;  // larger, up to kMaxPooledCapacity
  Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool() { tPoolGone = true; }
};

Pool& pool() noexcept {
  thread_local Pool p;
  return p;
}

}  // namespace

std::string StringPool::take(std::size_t atLeast) {
  std::string s;
  if (Pool* p = tPoolGone ? nullptr : &pool(); p != nullptr) {
    Shelf& shelf = atLeast <= kSmallCapacity ? p->small : p->large;
    if (!shelf.strings.empty()) {
      s = std::move(shelf.strings.back());
      shelf.strings.pop_back();
      shelf.bytes -= s.capacity();
    }
  }
  // The newest string only: one too small grows here (the allocation a new one would cost), so
  // strings of a size nobody asks for do not pile up in the pool.
  s.reserve(atLeast);
  return s;  // (cleared when given)
}

std::string StringPool::copy(std::string_view bytes) {
  std::string s = take(bytes.size());
  s.assign(bytes.data(), bytes.size());  // allocates only if the pooled string is too small
  return s;
}

void StringPool::give(std::string&& s) noexcept {
  std::string taken = std::move(s);
  s.clear();  // a moved-from string is valid but unspecified: make the promise hold
  if (!enabled() || tPoolGone) return;
  const std::size_t capacity = taken.capacity();
  // A string within its small buffer has no heap block to keep.
  if (capacity <= std::string().capacity() || capacity > kMaxPooledCapacity) return;
  Pool& p = pool();
  const bool small = capacity <= kSmallCapacity;
  Shelf& shelf = small ? p.small : p.large;
  const std::size_t maxStrings = small ? kMaxSmallStrings : kMaxLargeStrings;
  if (shelf.strings.size() >= maxStrings || (!small && shelf.bytes + capacity > kMaxPooledBytes)) {
    return;
  }
  if (shelf.strings.capacity() == 0) {
    try {
      shelf.strings.reserve(maxStrings);  // once per thread; never again (bounded above)
    } catch (...) {
      return;  // out of memory: just free the string
    }
  }
  taken.clear();
  shelf.bytes += capacity;
  shelf.strings.push_back(std::move(taken));
}

bool StringPool::enabled() noexcept { return INGRID_BLOCK_REUSE != 0; }

std::size_t StringPool::TEST_size() noexcept {
  return tPoolGone ? 0 : pool().small.strings.size() + pool().large.strings.size();
}
std::size_t StringPool::TEST_bytes() noexcept {
  return tPoolGone ? 0 : pool().small.bytes + pool().large.bytes;
}

}  // namespace ingrid
