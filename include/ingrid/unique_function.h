// UniqueFunction<R(Args...)>: a move-only std::function (C++23's std::move_only_function), so
// that move-only completion handlers (std::promise, Asio's use_future handler) can be stored.
//
// A callable of up to kInlineBytes (a completion capturing a connection, a request header and a
// pointer fits) that moves without throwing is stored inside the object: no heap allocation per
// request for the completions on the data path. A larger one is stored on the heap. A moved-from
// UniqueFunction is empty.
// Thread safety: a value type; distinct objects are safe.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace ingrid {

template <class Signature>
class UniqueFunction;

template <class R, class... Args>
class UniqueFunction<R(Args...)> {
 public:
  static constexpr std::size_t kInlineBytes = 64;

  UniqueFunction() noexcept = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, UniqueFunction>>>
  UniqueFunction(F&& f) {  // NOLINT: implicit, like std::function
    using Fn = std::decay_t<F>;
    if constexpr (kStoredInline<Fn>) {
      ::new (static_cast<void*>(buffer_)) Fn(std::forward<F>(f));
      ops_ = &kInlineOps<Fn>;
    } else {
      ::new (static_cast<void*>(buffer_)) Fn*(new Fn(std::forward<F>(f)));
      ops_ = &kHeapOps<Fn>;
    }
  }
  UniqueFunction(UniqueFunction&& other) noexcept { take(other); }
  UniqueFunction& operator=(UniqueFunction&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  UniqueFunction(const UniqueFunction&) = delete;
  UniqueFunction& operator=(const UniqueFunction&) = delete;
  ~UniqueFunction() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  // REQUIRES: *this holds a callable.
  R operator()(Args... args) { return ops_->call(buffer_, std::forward<Args>(args)...); }

 private:
  struct Ops {
    R (*call)(void* self, Args&&... args);
    // Move-constructs the callable at `from` into `to`, and destroys the one at `from`.
    void (*relocate)(void* from, void* to) noexcept;
    void (*destroy)(void* self) noexcept;
  };
  template <class Fn>
  static constexpr bool kStoredInline =
      sizeof(Fn) <= kInlineBytes &&
      alignof(Fn) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<Fn>;
  template <class Fn>
  static constexpr Ops kInlineOps{
      [](void* self, Args&&... args) -> R {
        return (*std::launder(static_cast<Fn*>(self)))(std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept {
        Fn* source = std::launder(static_cast<Fn*>(from));
        ::new (to) Fn(std::move(*source));
        source->~Fn();
      },
      [](void* self) noexcept { std::launder(static_cast<Fn*>(self))->~Fn(); }};
  template <class Fn>
  static constexpr Ops kHeapOps{
      [](void* self, Args&&... args) -> R {
        return (**std::launder(static_cast<Fn**>(self)))(std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept { ::new (to) Fn*(*std::launder(static_cast<Fn**>(from))); },
      [](void* self) noexcept { delete *std::launder(static_cast<Fn**>(self)); }};

  void take(UniqueFunction& other) noexcept {
    if (other.ops_ == nullptr) return;
    other.ops_->relocate(other.buffer_, buffer_);
    ops_ = std::exchange(other.ops_, nullptr);
  }
  void reset() noexcept {
    if (const Ops* ops = std::exchange(ops_, nullptr)) ops->destroy(buffer_);
  }

  alignas(std::max_align_t) unsigned char buffer_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

}  // namespace ingrid
