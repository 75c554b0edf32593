// UniqueFunction<R(Args...)>: a move-only std::function (C++23's std::move_only_function), so
// that move-only completion handlers (std::promise, Asio's use_future handler) can be stored.
// Thread safety: a value type; distinct objects are safe.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace ingrid {

template <class Signature>
class UniqueFunction;

template <class R, class... Args>
class UniqueFunction<R(Args...)> {
 public:
  UniqueFunction() = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, UniqueFunction>>>
  UniqueFunction(F&& f)  // NOLINT: implicit, like std::function
      : impl_(std::make_unique<Impl<std::decay_t<F>>>(std::forward<F>(f))) {}

  explicit operator bool() const noexcept { return impl_ != nullptr; }
  // REQUIRES: *this holds a callable.
  R operator()(Args... args) { return impl_->call(std::forward<Args>(args)...); }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual R call(Args... args) = 0;
  };
  template <class F>
  struct Impl final : Base {
    explicit Impl(F&& f) : fn(std::move(f)) {}
    explicit Impl(const F& f) : fn(f) {}
    R call(Args... args) override { return fn(std::forward<Args>(args)...); }
    F fn;
  };
  std::unique_ptr<Base> impl_;
};

}  // namespace ingrid
