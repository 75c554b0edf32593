// checkRemaining: a count read from untrusted input is checked against the bytes that remain in
// that input before it sizes an allocation (invariant 11).
//
// The decoder (include/ingrid/processors/codec.h, decode()) registers its input for the current
// thread with an InputBoundsScope; loaders anywhere below it (a topology, a partition table,
// Cereal's strings and lists) call checkRemaining after reading a count. Outside a decode it checks
// nothing. Thread safety: the registration is per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace ingrid {

// What a decoder exposes: how many input bytes are still unread.
class InputBounds {
 public:
  virtual std::size_t remaining() const = 0;

 protected:
  InputBounds() = default;
  InputBounds(const InputBounds&) = default;
  InputBounds& operator=(const InputBounds&) = default;
  ~InputBounds() = default;
};

namespace input_bounds_detail {
inline thread_local const InputBounds* tCurrent = nullptr;
}  // namespace input_bounds_detail

// Registers `input` as this thread's input for its lifetime (restoring an outer one after).
class InputBoundsScope {
 public:
  explicit InputBoundsScope(const InputBounds& input) noexcept
      : outer_(input_bounds_detail::tCurrent) {
    input_bounds_detail::tCurrent = &input;
  }
  ~InputBoundsScope() { input_bounds_detail::tCurrent = outer_; }
  InputBoundsScope(const InputBoundsScope&) = delete;
  InputBoundsScope& operator=(const InputBoundsScope&) = delete;

 private:
  const InputBounds* outer_;
};

// Bytes left in this thread's input; SIZE_MAX outside a decode.
inline std::size_t remainingInput() noexcept {
  const InputBounds* in = input_bounds_detail::tCurrent;
  return in == nullptr ? static_cast<std::size_t>(-1) : in->remaining();
}

// Throws std::length_error if `count` elements of at least `minBytes` each cannot fit in what
// remains of this thread's input. Call it after reading a count, before allocating by it.
inline void checkRemaining(std::uint64_t count, std::size_t minBytes, const char* what) {
  const InputBounds* in = input_bounds_detail::tCurrent;
  if (in == nullptr || minBytes == 0) return;
  const std::size_t left = in->remaining();
  if (count > left / minBytes) {
    throw std::length_error(std::string(what) + " claims " + std::to_string(count) +
                            " elements of at least " + std::to_string(minBytes) +
                            " bytes, but only " + std::to_string(left) + " bytes remain");
  }
}

}  // namespace ingrid
