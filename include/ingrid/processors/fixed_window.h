// The fixed-window counter: at most `limit` units per window, windows aligned to time 0.
// docs/fixed-window.md is the specification (state, units, overflow bounds, a clock stepping
// backwards, the reply, what differs from its peers).
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
#include <ingrid/processors/limit_answer.h>
#include <ingrid/processors/limiter_support.h>

namespace ingrid {

struct WindowParams {
  // Units granted per window. REQUIRES: > 0.
  std::int64_t limit = 0;
  // Window length in nanoseconds. REQUIRES: > 0.
  Nanos window = 0;

  // nullopt if usable, else the first bad field and its value ("limit must be > 0, got 0").
  std::optional<std::string> invalidReason() const;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(limit, window);
  }
  friend bool operator==(const WindowParams&, const WindowParams&) = default;
};

// The state stored in a fixed window's entry.
struct FixedWindowState {
  // Start of the window `count` belongs to.
  Nanos windowStart = 0;
  // Units granted in it. >= 0.
  std::int64_t count = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(windowStart, count);
  }
  friend bool operator==(const FixedWindowState&, const FixedWindowState&) = default;
};

// The math of docs/fixed-window.md, for limiter_support.h's runners.
struct FixedWindow {
  using Params = WindowParams;
  using State = FixedWindowState;
  using Answer = LimitAnswer;
  static constexpr std::string_view kWhat = "a fixed window";
  static constexpr std::int64_t kMinQuantity = 1;

  static State create(const Params& p, Nanos now) noexcept {
    return State{limiter::windowStart(now, p.window), 0};
  }
  static std::optional<std::string> invalidState(const State& s);
  // REQUIRES: valid params, quantity > 0.
  static Answer take(State& s, const Params& p, std::int64_t quantity, Nanos now) noexcept;
  static bool granted(const Answer& a) noexcept { return a.granted; }
  static Nanos expiresAt(const State& s, const Params& p) noexcept {
    return limiter::saturate(limiter::windowEnd(s.windowStart, p.window));
  }
};

struct FixedWindowNames {
  static constexpr std::string_view kSingle = "ingrid.FixedWindowAcquire";
  static constexpr std::string_view kBatch = "ingrid.FixedWindowBatchAcquire";
};

// Takes `quantity` units from the window at the entry's key if the window has them.
using FixedWindowAcquire = limiter::LimiterRequest<FixedWindow, FixedWindowNames>;

// Several acquires on one window, answered in order, read once and written once: equivalent to
// FixedWindowAcquire for each quantity in order at the same `now`.
using FixedWindowBatchAcquire = limiter::LimiterBatch<FixedWindow, FixedWindowNames>;

}  // namespace ingrid
