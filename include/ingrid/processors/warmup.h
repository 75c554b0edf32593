// Warm-up (Guava's SmoothWarmingUp): after an idle period the first permits are spaced at up to
// coldFactor times the stable interval, and the spacing falls linearly to the stable interval as
// the stored permits are used. docs/warm-up.md is the specification (parameters, state, the cost
// formula, rounding, overflow bounds, a clock stepping backwards, why it is a processor of its
// own); the facade offers it as an option of the token bucket (LimiterOptions::warmup).
//
// Thread safety: pure value types and functions. The processors are pure (entry, args, now).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <ingrid/entry.h>
#include <ingrid/processors/limiter_support.h>
#include <ingrid/processors/token_bucket.h>

namespace ingrid {

struct WarmupParams {
  static constexpr std::int64_t kMaxColdFactor = 1000;

  // The stable rate: `permits` per `period` nanoseconds. REQUIRES: both > 0.
  std::int64_t permits = 0;
  Nanos period = 0;
  // Guava's warmupPeriod, in nanoseconds. REQUIRES: > 0.
  Nanos warmup = 0;
  // A cold permit costs coldFactor stable intervals. REQUIRES: 1..kMaxColdFactor. Default: 3.
  std::int64_t coldFactor = 3;
  // The longest wait a request accepts, in nanoseconds; 0: only if it may go now.
  // REQUIRES: >= 0. Default: 0.
  Nanos maxWait = 0;

  // The stable rate of `bucket` (refillTokens per refillPeriod) with a warm-up.
  static WarmupParams of(const BucketParams& bucket, Nanos warmup, std::int64_t coldFactor = 3,
                         Nanos maxWait = 0) {
    return WarmupParams{bucket.refillTokens, bucket.refillPeriod, warmup, coldFactor, maxWait};
  }

  // nullopt if usable, else the first bad field and its value ("warmup must be > 0, got 0").
  std::optional<std::string> invalidReason() const;
  // Stored permits below which a permit costs the stable interval. REQUIRES: valid.
  std::int64_t thresholdPermits() const noexcept;
  // Stored permits of a fully cold limiter (threshold + warm-up zone). REQUIRES: valid.
  std::int64_t maxPermits() const noexcept;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(permits, period, warmup, coldFactor, maxWait);
  }
  friend bool operator==(const WarmupParams&, const WarmupParams&) = default;
};

struct WarmupState {
  // Whole stored permits: how cold the limiter is. 0 <= stored <= maxPermits.
  std::int64_t stored = 0;
  // A fraction of a stored permit, in units of 1/warmup permit: 0 <= remainder < warmup.
  std::int64_t remainder = 0;
  // When the next request may go (Guava's nextFreeTicket).
  Nanos nextFree = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(stored, remainder, nextFree);
  }
  friend bool operator==(const WarmupState&, const WarmupState&) = default;
};

// A refusal is a normal answer, not an error.
struct WarmupAnswer {
  bool granted = false;
  // Granted: nanoseconds to wait before going (0: at once). Refused: the wait it would have
  // needed (more than maxWait), or kNever if the schedule would pass int64 time.
  Nanos delay = 0;
  // What these permits add (or would add) to the schedule, in nanoseconds; kNever if saturated.
  Nanos cost = 0;
  // Stored permits after this request.
  std::int64_t stored = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(granted, delay, cost, stored);
  }
  friend bool operator==(const WarmupAnswer&, const WarmupAnswer&) = default;
};

// The math of docs/warm-up.md, in the shape limiter_support.h runs.
struct Warmup {
  using Params = WarmupParams;
  using State = WarmupState;
  using Answer = WarmupAnswer;
  static constexpr std::string_view kWhat = "a warm-up limiter";
  static constexpr std::int64_t kMinQuantity = 1;

  // Fully cold: {maxPermits, 0, now}. REQUIRES: valid params.
  static State create(const Params& p, Nanos now) noexcept;
  static std::optional<std::string> invalidState(const State& s);
  // Reconciles with the params and cools down from s.nextFree to now (docs "Catching up").
  static void resync(State& s, const Params& p, Nanos now) noexcept;
  // ceil of the nanoseconds `n` permits cost with `stored` stored; kNever if it saturates.
  // REQUIRES: valid params, 0 <= stored <= maxPermits, n > 0.
  static Nanos cost(const Params& p, std::int64_t stored, std::int64_t n) noexcept;
  // REQUIRES: valid params, quantity > 0.
  static Answer take(State& s, const Params& p, std::int64_t quantity, Nanos now) noexcept;
  static bool granted(const Answer& a) noexcept { return a.granted; }
  // When the idle limiter is fully cold again.
  static Nanos expiresAt(const State& s, const Params& p) noexcept;
};

struct WarmupNames {
  static constexpr std::string_view kSingle = "ingrid.WarmupAcquire";
  static constexpr std::string_view kBatch = "ingrid.WarmupBatchAcquire";
};

// Takes `quantity` permits from the warm-up limiter at the entry's key if the schedule lets it
// go within maxWait; the answer says how long to wait.
using WarmupAcquire = limiter::LimiterRequest<Warmup, WarmupNames>;

// Several requests on one warm-up limiter, in order at the same `now`, read once, written once.
using WarmupBatchAcquire = limiter::LimiterBatch<Warmup, WarmupNames>;

}  // namespace ingrid
