// InlineBytes: a short byte string held inside the object, up to kInline bytes; a longer one is
// on the heap. 40 bytes, against 32 for a std::string plus its heap block past 15 bytes, so an
// object made or kept per request (a dedup record's answer, a routed call's processor name)
// costs no allocation of its own when its bytes are short: every limiter's answer (a token
// bucket's is 25 bytes encoded, a LimitAnswer 34) and every built-in processor's name fit.
// Move-only; not thread-safe (like a std::string).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ingrid {

class InlineBytes {
 public:
  static constexpr std::size_t kInline = 36;
  InlineBytes() noexcept = default;
  // Throws std::length_error past 4 GiB (the size is 32 bits), std::bad_alloc.
  explicit InlineBytes(std::string_view bytes);
  InlineBytes(InlineBytes&& other) noexcept;
  InlineBytes& operator=(InlineBytes&& other) noexcept;
  InlineBytes(const InlineBytes&) = delete;
  InlineBytes& operator=(const InlineBytes&) = delete;
  ~InlineBytes() { release(); }

  std::string_view view() const noexcept;
  operator std::string_view() const noexcept { return view(); }  // NOLINT(google-explicit-*)

 private:
  char* heap() const noexcept;
  void release() noexcept;

  std::uint32_t size_ = 0;
  // The bytes, or (past kInline) the pointer to them, copied in and out with memcpy.
  char bytes_[kInline] = {};
};

}  // namespace ingrid
