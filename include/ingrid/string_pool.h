// StringPool: byte strings reused on the thread that freed them, so that what is encoded and
// freed on one thread for every request (frame bodies, a processor's encoded arguments, result
// and state, a replication's encoding) costs no heap allocation in its steady state.
//
// encode() (processors/codec.h) returns a string taken from the calling thread's pool, and the
// library gives back every such string it is done with: a connection gives back each body it
// wrote and reads each body into a pooled string; a node gives back a request's arguments, the
// state a processor set once it is stored, an answer once it is written, an update's encoding
// once every backup has it; the typed invoke surface gives back the answer it decoded. So on
// each thread the strings freed refill the pool the next requests take from. A caller may give
// back its own strings too; it need not.
//
// The pool is thread-local (no lock): a string given on one thread is taken on that thread only
// (a string made on one thread and freed on another moves to the other's pool). It keeps two
// shelves, so that the many small strings (arguments, answers, states: tens of bytes) are not
// served by, and do not grow into, the few large ones (frame bodies of whole batches): strings of
// a capacity up to kSmallCapacity on one, larger ones on the other, and a take of a size is served
// from its size's shelf. It is bounded, by count per shelf and, for the large shelf, by capacity:
// strings larger than kMaxPooledCapacity are freed as usual, so a large frame (a snapshot chunk)
// does not stay pinned, and at most kMaxSmallStrings x kSmallCapacity + kMaxPooledBytes of
// capacity waits in one thread's pool.
//
// A string given here must not be viewed any more: its bytes are overwritten by the next user.
// Under AddressSanitizer the pool keeps nothing (give() frees), so a view that outlives its
// string is still reported as a use after free there.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ingrid {

class StringPool {
 public:
  // False when the library was built with AddressSanitizer (see above): give() then frees and
  // take() returns empty strings. Asked of the library, so it is the library's build that counts.
  static bool enabled() noexcept;
  // Strings of a larger capacity are not kept. Matches a connection's read chunk.
  static constexpr std::size_t kMaxPooledCapacity = 16 * 1024;
  // The small shelf: strings of a capacity up to this, at most kMaxSmallStrings of them.
  static constexpr std::size_t kSmallCapacity = 256;
  static constexpr std::size_t kMaxSmallStrings = 256;
  // The large shelf: at most this many strings, holding at most kMaxPooledBytes of capacity.
  static constexpr std::size_t kMaxLargeStrings = 64;
  static constexpr std::size_t kMaxPooledBytes = 256 * 1024;

  // An empty string with room for `atLeast` bytes, to encode into: the one the shelf of that
  // size got last (grown if it is smaller), or a new one if that shelf is empty.
  static std::string take(std::size_t atLeast = 0);
  // A copy of `bytes` in a string from this thread's pool (allocates only if the pool is empty
  // or its string is too small).
  static std::string copy(std::string_view bytes);
  // Gives `s` to this thread's pool (its contents are dropped), or frees it if it is too large
  // or the pool is full. `s` is empty afterwards.
  static void give(std::string&& s) noexcept;

  // For tests: the strings and the bytes of capacity this thread's pool holds (both shelves).
  static std::size_t TEST_size() noexcept;
  static std::size_t TEST_bytes() noexcept;
};

}  // namespace ingrid
