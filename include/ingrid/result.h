// Result<T>: a T or an Error. What every invoke returns, and what every completion receives.
//
// Thread safety: a value type; distinct objects are safe.
#pragma once

#include <cassert>
#include <utility>
#include <variant>

#include <ingrid/error.h>

namespace ingrid {

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // REQUIRES: ok().
  T& value() & { return assertOk(), std::get<0>(v_); }
  const T& value() const& { return assertOk(), std::get<0>(v_); }
  T&& value() && { return assertOk(), std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // REQUIRES: !ok().
  const Error& error() const& {
    assert(!ok());
    return std::get<1>(v_);
  }
  Error&& error() && {
    assert(!ok());
    return std::get<1>(std::move(v_));
  }

 private:
  void assertOk() const { assert(ok() && "Result::value() on an error"); }
  std::variant<T, Error> v_;
};

}  // namespace ingrid
