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

#include <ingrid/grid/entry.h>
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

struct FixedWindowBatchAcquire;

// Takes `quantity` units from the window at the entry's key if the window has them.
struct FixedWindowAcquire {
  static constexpr std::string_view kName = "ingrid.FixedWindowAcquire";
  using Result = LimitAnswer;
  using Batch = FixedWindowBatchAcquire;

  WindowParams params;
  // REQUIRES: > 0.
  std::int64_t quantity = 1;

  Result process(MutableEntry& entry, Nanos now) const {
    return limiter::runLimiter<FixedWindow>(params, quantity, "quantity", entry, now);
  }
  template <class Archive>
  void serialize(Archive& ar) {
    ar(params, quantity);
  }
  static bool joinable(const FixedWindowAcquire& first, const FixedWindowAcquire& other) {
    return first.params == other.params;
  }
  static FixedWindowBatchAcquire batch(std::vector<FixedWindowAcquire> items);
};

// Several acquires on one window, answered in order, read once and written once: equivalent to
// FixedWindowAcquire for each quantity in order at the same `now`.
struct FixedWindowBatchAcquire {
  static constexpr std::string_view kName = "ingrid.FixedWindowBatchAcquire";
  using Result = std::vector<LimitAnswer>;
  static constexpr std::size_t kMaxWants = limiter::kMaxBatch;

  WindowParams params;
  // REQUIRES: each > 0; 1..kMaxWants of them.
  std::vector<std::int64_t> quantities;

  Result process(MutableEntry& entry, Nanos now) const {
    return limiter::runLimiterBatch<FixedWindow>(params, quantities, "quantities", entry, now);
  }
  template <class Archive>
  void save(Archive& ar) const {
    ar(params, quantities);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(params);
    limiter::loadQuantities(ar, quantities, "FixedWindowBatchAcquire.quantities");
  }
};

inline FixedWindowBatchAcquire FixedWindowAcquire::batch(std::vector<FixedWindowAcquire> items) {
  FixedWindowBatchAcquire out;
  if (!items.empty()) out.params = items.front().params;
  out.quantities.reserve(items.size());
  for (const auto& item : items) out.quantities.push_back(item.quantity);
  return out;
}

}  // namespace ingrid
