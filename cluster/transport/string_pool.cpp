#include "cluster/transport/string_pool.h"

#include <utility>
#include <vector>

namespace ingrid {
namespace {

// True once this thread's pool is destroyed (at its exit): what is given after that is freed.
thread_local bool tPoolGone = false;

struct Pool {
  std::vector<std::string> strings;
  std::size_t bytes = 0;  // capacity held
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
  if (Pool* p = tPoolGone ? nullptr : &pool(); p != nullptr && !p->strings.empty()) {
    s = std::move(p->strings.back());
    p->strings.pop_back();
    p->bytes -= s.capacity();
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
  if (!kEnabled || tPoolGone) return;
  const std::size_t capacity = taken.capacity();
  // A string within its small buffer has no heap block to keep.
  if (capacity <= std::string().capacity() || capacity > kMaxPooledCapacity) return;
  Pool& p = pool();
  if (p.strings.size() >= kMaxPooledStrings || p.bytes + capacity > kMaxPooledBytes) return;
  if (p.strings.capacity() == 0) {
    try {
      p.strings.reserve(kMaxPooledStrings);  // once per thread; never again (bounded above)
    } catch (...) {
      return;  // out of memory: just free the string
    }
  }
  taken.clear();
  p.bytes += capacity;
  p.strings.push_back(std::move(taken));
}

std::size_t StringPool::TEST_size() noexcept { return tPoolGone ? 0 : pool().strings.size(); }
std::size_t StringPool::TEST_bytes() noexcept { return tPoolGone ? 0 : pool().bytes; }

}  // namespace ingrid
