// StringPool: frame bodies reused on the thread that freed them, so a connection whose frames
// are read and written on one thread needs no heap allocation per body in its steady state.
//
// A connection takes a string from its thread's pool for each frame body it reads, and gives
// each body it has written back to the pool. On a connection that answers requests, the
// replies it writes refill the pool the next requests' bodies are read into; on one that sends
// requests, the requests refill it for the replies. The pool is thread-local (no lock): a string
// given on one thread is taken on that thread only. It is bounded, by count and by capacity:
// strings larger than kMaxPooledCapacity are freed as usual, so a large frame (a snapshot chunk)
// does not stay pinned, and at most kMaxPooledBytes of capacity waits in one thread's pool.
//
// A string given here must not be viewed any more: its bytes are overwritten by the next frame.
// Under AddressSanitizer the pool keeps nothing (give() frees), so a view that outlives its
// string is still reported as a use after free there.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "grid/block_cache.h"

namespace ingrid {

class StringPool {
 public:
  // False under AddressSanitizer (see above): give() then frees and take() returns empty strings.
  static constexpr bool kEnabled = BlockCache::kEnabled;
  // Strings of a larger capacity are not kept. Matches the connection's read chunk.
  static constexpr std::size_t kMaxPooledCapacity = 16 * 1024;
  // Most strings, and most bytes of capacity, one thread's pool holds.
  static constexpr std::size_t kMaxPooledStrings = 64;
  static constexpr std::size_t kMaxPooledBytes = 256 * 1024;

  // An empty string with room for `atLeast` bytes, to encode a frame body into: the one this
  // thread's pool got last (grown if it is smaller), or a new one if the pool is empty.
  static std::string take(std::size_t atLeast = 0);
  // A copy of `bytes` in a string from this thread's pool (allocates only if the pool is empty
  // or its string is too small).
  static std::string copy(std::string_view bytes);
  // Gives `s` to this thread's pool (its contents are dropped), or frees it if it is too large
  // or the pool is full. `s` is empty afterwards.
  static void give(std::string&& s) noexcept;

  // For tests: the strings and the bytes of capacity this thread's pool holds.
  static std::size_t TEST_size() noexcept;
  static std::size_t TEST_bytes() noexcept;
};

}  // namespace ingrid
