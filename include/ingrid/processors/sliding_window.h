// The two-window sliding counter (Cloudflare's approximation): the current aligned window's count
// plus the previous window's weighted by the part of it still inside (now - window, now]. Exact
// integer weighting; the error bound is stated and proven in docs/sliding-window.md, which is the
// specification.
//
// Thread safety: pure value types and functions. The processors are pure (entry, args, now).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ingrid/entry.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>
#include <ingrid/processors/fixed_window.h>
#include <ingrid/processors/limit_answer.h>
#include <ingrid/processors/limiter_support.h>

namespace ingrid {

// The state stored in a sliding counter's entry.
struct SlidingWindowState {
  // A time in the window `current` belongs to (its start, or INT64_MIN for the first window).
  Nanos windowStart = 0;
  // Units granted in that window, and in the one before. Both >= 0.
  std::int64_t current = 0;
  std::int64_t previous = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(windowStart, current, previous);
  }
  friend bool operator==(const SlidingWindowState&, const SlidingWindowState&) = default;
};

// The math of docs/sliding-window.md (the two-window counter), for limiter_support.h's runners.
struct SlidingWindow {
  using Params = WindowParams;
  using State = SlidingWindowState;
  using Answer = LimitAnswer;
  static constexpr std::string_view kWhat = "a sliding window counter";
  static constexpr std::int64_t kMinQuantity = 1;

  static State create(const Params& p, Nanos now) noexcept {
    return State{limiter::windowStart(now, p.window), 0, 0};
  }
  static std::optional<std::string> invalidState(const State& s);
  // REQUIRES: valid params, quantity > 0.
  static Answer take(State& s, const Params& p, std::int64_t quantity, Nanos now) noexcept;
  static bool granted(const Answer& a) noexcept { return a.granted; }
  static Nanos expiresAt(const State& s, const Params& p) noexcept;
};

struct SlidingWindowNames {
  static constexpr std::string_view kSingle = "ingrid.SlidingWindowAcquire";
  static constexpr std::string_view kBatch = "ingrid.SlidingWindowBatchAcquire";
};

// Takes `quantity` units if the sliding estimate has room for them.
using SlidingWindowAcquire = limiter::LimiterRequest<SlidingWindow, SlidingWindowNames>;

// Several acquires on one counter, in order, read once and written once.
using SlidingWindowBatchAcquire = limiter::LimiterBatch<SlidingWindow, SlidingWindowNames>;

}  // namespace ingrid
