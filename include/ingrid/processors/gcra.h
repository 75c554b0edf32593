// GCRA: redis-cell's CL.THROTTLE as an entry processor, with one int64 of state (the theoretical
// arrival time). docs/gcra.md is the specification (units, formulas, rounding, overflow bounds,
// a clock stepping backwards, the reply, what differs from redis-cell).
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
#include <ingrid/processors/limiter_support.h>

namespace ingrid {

// What a request says the limiter is, as CL.THROTTLE's max_burst, count and period.
struct GcraParams {
  // Requests allowed at once beyond the steady rate; the limit is maxBurst + 1.
  // REQUIRES: 0 <= maxBurst < INT64_MAX.
  std::int64_t maxBurst = 0;
  // Requests per period. REQUIRES: > 0.
  std::int64_t count = 0;
  // Nanoseconds. REQUIRES: > 0.
  Nanos period = 0;

  // A limit of `limit` (> 0) per `period`: a burst of `limit` at once, refilled over the period.
  static GcraParams perPeriod(std::int64_t limit, Nanos period) {
    return GcraParams{limit - 1, limit, period};
  }

  // nullopt if usable, else the first bad field and its value ("count must be > 0, got 0").
  std::optional<std::string> invalidReason() const;
  // Nanoseconds per unit, ceil(period / count). REQUIRES: valid.
  Nanos emissionInterval() const noexcept { return (period - 1) / count + 1; }

  template <class Archive>
  void serialize(Archive& ar) {
    ar(maxBurst, count, period);
  }
  friend bool operator==(const GcraParams&, const GcraParams&) = default;
};

// CL.THROTTLE's reply. A refusal is a normal answer, not an error.
struct GcraAnswer {
  bool limited = false;
  // maxBurst + 1.
  std::int64_t limit = 0;
  // Units that could still be taken now.
  std::int64_t remaining = 0;
  // Limited: nanoseconds until this request would be allowed, kNever if never. Allowed: 0.
  Nanos retryAfter = 0;
  // Nanoseconds until the limiter is back to its full burst.
  Nanos resetAfter = 0;

  bool granted() const noexcept { return !limited; }
  template <class Archive>
  void serialize(Archive& ar) {
    ar(limited, limit, remaining, retryAfter, resetAfter);
  }
  friend bool operator==(const GcraAnswer&, const GcraAnswer&) = default;
};

// The pure math of docs/gcra.md, for limiter_support.h's runners.
struct Gcra {
  using Params = GcraParams;
  using State = std::int64_t;  // the TAT, wall-clock nanoseconds
  using Answer = GcraAnswer;
  static constexpr std::string_view kWhat = "a GCRA limiter";
  static constexpr std::int64_t kMinQuantity = 0;

  static State create(const Params&, Nanos now) noexcept { return now; }
  static std::optional<std::string> invalidState(const State&) { return std::nullopt; }
  // REQUIRES: valid params, quantity >= 0.
  static Answer take(State& tat, const Params& params, std::int64_t quantity, Nanos now) noexcept;
  static bool granted(const Answer& a) noexcept { return !a.limited; }
  static Nanos expiresAt(const State& tat, const Params&) noexcept { return tat; }
};

struct GcraNames {
  static constexpr std::string_view kSingle = "ingrid.GcraThrottle";
  static constexpr std::string_view kBatch = "ingrid.GcraBatchThrottle";
};

// CL.THROTTLE key max_burst count period quantity, on the entry's key. A quantity of 0 asks
// without taking.
using GcraThrottle = limiter::LimiterRequest<Gcra, GcraNames>;

// Several throttles on one key, answered in order, read once and written once: equivalent to
// GcraThrottle for each quantity in order at the same `now`.
using GcraBatchThrottle = limiter::LimiterBatch<Gcra, GcraNames>;

}  // namespace ingrid
