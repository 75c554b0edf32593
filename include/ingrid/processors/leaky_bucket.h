// The leaky bucket in its two forms: a meter (a request pours in if it fits, else it is refused;
// like ShenYu's leaky script) and a shaper (a bounded queue drained at a constant rate; a request
// is told how long to wait for its turn). docs/leaky-bucket.md is the specification.
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
#include <ingrid/processors/gcra.h>
#include <ingrid/processors/limit_answer.h>
#include <ingrid/processors/limiter_support.h>

namespace ingrid {

struct LeakyMeterParams {
  // Units the bucket holds. REQUIRES: > 0.
  std::int64_t capacity = 0;
  // Units leaked every leakPeriod, continuously. REQUIRES: > 0.
  std::int64_t leakCount = 0;
  // Nanoseconds. REQUIRES: > 0.
  Nanos leakPeriod = 0;

  std::optional<std::string> invalidReason() const;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(capacity, leakCount, leakPeriod);
  }
  friend bool operator==(const LeakyMeterParams&, const LeakyMeterParams&) = default;
};

// A meter's state, as stored in its entry.
struct LeakyMeterState {
  // Whole units in the bucket, a partly leaked one counted whole. >= 0.
  std::int64_t level = 0;
  // How much of the top unit has leaked, in units of 1/leakPeriod: 0 <= drained < leakPeriod,
  // and 0 when level is 0.
  std::int64_t drained = 0;
  // Clock time up to which leaking has been accounted. Never moves backwards.
  Nanos lastLeak = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(level, drained, lastLeak);
  }
  friend bool operator==(const LeakyMeterState&, const LeakyMeterState&) = default;
};

// The meter's math, for limiter_support.h's runners.
struct LeakyMeter {
  using Params = LeakyMeterParams;
  using State = LeakyMeterState;
  using Answer = LimitAnswer;
  static constexpr std::string_view kWhat = "a leaky meter";
  static constexpr std::int64_t kMinQuantity = 1;

  static State create(const Params&, Nanos now) noexcept { return State{0, 0, now}; }
  static std::optional<std::string> invalidState(const State& s);
  // Leaks what has leaked from s.lastLeak to now (nothing if now is not later).
  static void leak(State& s, const Params& p, Nanos now) noexcept;
  // Nanoseconds from s.lastLeak until at most `target` whole units are left (0 if already).
  static limiter::int128 untilAtMost(const State& s, const Params& p, std::int64_t target) noexcept;
  // REQUIRES: valid params, quantity > 0.
  static Answer take(State& s, const Params& p, std::int64_t quantity, Nanos now) noexcept;
  static bool granted(const Answer& a) noexcept { return a.granted; }
  static Nanos expiresAt(const State& s, const Params& p) noexcept {
    return limiter::saturate(s.lastLeak + untilAtMost(s, p, 0));
  }
};

struct LeakyShaperParams {
  // Units the queue holds, the one being admitted included. REQUIRES: > 0.
  std::int64_t capacity = 0;
  // Units drained per period. REQUIRES: > 0.
  std::int64_t count = 0;
  // Nanoseconds. REQUIRES: > 0.
  Nanos period = 0;

  std::optional<std::string> invalidReason() const;
  // The same admission as GCRA with a burst of `capacity`.
  GcraParams asGcra() const noexcept { return GcraParams{capacity - 1, count, period}; }
  template <class Archive>
  void serialize(Archive& ar) {
    ar(capacity, count, period);
  }
  friend bool operator==(const LeakyShaperParams&, const LeakyShaperParams&) = default;
};

// The shaper's reply. A refusal is a normal answer, not an error.
struct ShaperAnswer {
  bool granted = false;
  // Admitted: nanoseconds to wait before proceeding (this request's turn). Refused: 0.
  Nanos delay = 0;
  // The queue's capacity.
  std::int64_t limit = 0;
  // Units the queue can still take now.
  std::int64_t remaining = 0;
  // Refused: nanoseconds until this request would be admitted (kNever: never). Admitted: 0.
  Nanos retryAfter = 0;
  // Nanoseconds until the queue is empty.
  Nanos resetAfter = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(granted, delay, limit, remaining, retryAfter, resetAfter);
  }
  friend bool operator==(const ShaperAnswer&, const ShaperAnswer&) = default;
};

// The shaper's math (GCRA's state and admission, a delay in the answer).
struct LeakyShaper {
  using Params = LeakyShaperParams;
  using State = std::int64_t;  // the TAT: when the queue is empty
  using Answer = ShaperAnswer;
  static constexpr std::string_view kWhat = "a leaky shaper";
  static constexpr std::int64_t kMinQuantity = 1;

  static State create(const Params&, Nanos now) noexcept { return now; }
  static std::optional<std::string> invalidState(const State&) { return std::nullopt; }
  // REQUIRES: valid params, quantity > 0.
  static Answer take(State& tat, const Params& p, std::int64_t quantity, Nanos now) noexcept;
  static bool granted(const Answer& a) noexcept { return a.granted; }
  static Nanos expiresAt(const State& tat, const Params&) noexcept { return tat; }
};

struct LeakyMeterNames {
  static constexpr std::string_view kSingle = "ingrid.LeakyMeterAcquire";
  static constexpr std::string_view kBatch = "ingrid.LeakyMeterBatchAcquire";
};
struct LeakyShaperNames {
  static constexpr std::string_view kSingle = "ingrid.LeakyShaperAcquire";
  static constexpr std::string_view kBatch = "ingrid.LeakyShaperBatchAcquire";
};

// Pours `quantity` units into the meter at the entry's key if they fit.
using LeakyMeterAcquire = limiter::LimiterRequest<LeakyMeter, LeakyMeterNames>;

// Several pours into one meter, in order, read once and written once.
using LeakyMeterBatchAcquire = limiter::LimiterBatch<LeakyMeter, LeakyMeterNames>;

// Joins the queue at the entry's key if it has room; the answer says how long to wait.
using LeakyShaperAcquire = limiter::LimiterRequest<LeakyShaper, LeakyShaperNames>;

// Several requests joining one queue, in order (each waits behind the ones before it), read once
// and written once.
using LeakyShaperBatchAcquire = limiter::LimiterBatch<LeakyShaper, LeakyShaperNames>;

}  // namespace ingrid
