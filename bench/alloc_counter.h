// A counting replacement of the global operator new and delete, for the programs that count heap
// allocations (bench/bench_allocs, tests/cluster/steady_allocs_test). Every form of operator new
// in the program lands in malloc and is counted, from every thread.
//
// Include in exactly one source file of a program: it defines the replacement functions (except
// under ASan or TSan, see below).
// Thread safety: the counters are atomics; `onAlloc` is set before any thread of interest starts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace ingrid::alloc_counter {

inline std::atomic<std::uint64_t> allocs{0};
inline std::atomic<std::uint64_t> bytes{0};
// Called with each allocation's number (before it is made), if set.
inline void (*onAlloc)(std::uint64_t number) = nullptr;

}  // namespace ingrid::alloc_counter

// Under a sanitizer the replacement is left out (its runtime has its own operator new, and
// blocks would cross between the two): nothing is counted there, and the test that counts says so.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define INGRID_ALLOC_COUNTER_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define INGRID_ALLOC_COUNTER_OFF 1
#endif
#endif

#ifndef INGRID_ALLOC_COUNTER_OFF
#if defined(__GNUC__) && !defined(__clang__)
// GCC sees free() of what its builtin knowledge calls operator new's memory once these are
// inlined; here both sides are malloc/free by construction.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t n) {
  const std::uint64_t number =
      ingrid::alloc_counter::allocs.fetch_add(1, std::memory_order_relaxed);
  if (auto hook = ingrid::alloc_counter::onAlloc) hook(number);
  ingrid::alloc_counter::bytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  const std::uint64_t number =
      ingrid::alloc_counter::allocs.fetch_add(1, std::memory_order_relaxed);
  if (auto hook = ingrid::alloc_counter::onAlloc) hook(number);
  ingrid::alloc_counter::bytes.fetch_add(n, std::memory_order_relaxed);
  const std::size_t align = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif  // INGRID_ALLOC_COUNTER_OFF
