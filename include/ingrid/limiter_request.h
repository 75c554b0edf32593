// LimiterSpec -> LimiterRequest: the one mapping from a limiter named by its options (ingrid-cli's
// --limiter and its options, the RESP gateway's INGRID.ACQUIRE) to the processor request that
// takes `units` from it, so that every front end asks the same limiter for the same options.
//
// Thread safety: pure functions and values, any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <ingrid/error.h>
#include <ingrid/processors/composite_bucket.h>
#include <ingrid/processors/concurrency.h>
#include <ingrid/processors/fixed_window.h>
#include <ingrid/processors/gcra.h>
#include <ingrid/processors/leaky_bucket.h>
#include <ingrid/processors/sliding_log.h>
#include <ingrid/processors/sliding_window.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/processors/warmup.h>
#include <ingrid/result.h>

namespace ingrid {

// The limiters, in kLimiterNames' order.
enum class LimiterKind {
  kTokenBucket,
  kGcra,
  kFixedWindow,
  kSlidingLog,
  kSlidingWindow,
  kLeakyMeter,
  kLeakyShaper,
  kConcurrency,
  kComposite
};
inline constexpr const char* kLimiterNames[] = {"token-bucket", "gcra",           "fixed-window",
                                                "sliding-log",  "sliding-window", "leaky-meter",
                                                "leaky-shaper", "concurrency",    "composite"};

// The limiter called `name` (exactly one of kLimiterNames), or nullopt.
inline std::optional<LimiterKind> limiterKindOf(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kLimiterNames); ++i) {
    if (name == kLimiterNames[i]) return static_cast<LimiterKind>(i);
  }
  return std::nullopt;
}

// A limiter and its options, as ingrid-cli's flags name them (docs/operations.md).
struct LimiterSpec {
  LimiterKind kind = LimiterKind::kTokenBucket;
  // The limit: bucket capacity (token-bucket, leaky-meter), burst + 1 (gcra), units per window
  // (fixed-window, sliding-log, sliding-window), queue size (leaky-shaper), units held at once
  // (concurrency). Default: 100.
  std::int64_t capacity = 100;
  // Nanoseconds: of the refill, leak or drain, or the window; a lease's time to live
  // (concurrency). Default: 1 s.
  Nanos period = 1'000'000'000;
  // Units refilled, leaked or drained per period (token-bucket, gcra, leaky-*, composite).
  // Default: capacity.
  std::optional<std::int64_t> refill;
  // A new bucket's tokens (token-bucket). Default: capacity.
  std::optional<std::int64_t> initial;
  // Warm-up period in nanoseconds (token-bucket: a WarmupAcquire instead). Default: none.
  std::optional<Nanos> warmup;
  std::int64_t coldFactor = 3;  // with warmup
  // Reserve instead, waiting at most this many nanoseconds (token-bucket). Default: none.
  std::optional<Nanos> maxWait;
  // Composite: its bandwidths (default: one of capacity per period, refilled by refill), the
  // configuration's version and what a newer one does with the tokens.
  std::vector<BucketParams> bands;
  std::int64_t configVersion = 0;
  Replacement replacement = Replacement::kProportional;

  std::int64_t rate() const noexcept { return refill ? *refill : capacity; }
};

// Whether the option `name` (ingrid-cli's flag without its "--": "refill", "initial",
// "max-wait-ms", "warmup-ms", "cold-factor", "band", "config-version", "replacement"; any other
// applies to every limiter) means something to `kind`.
inline bool limiterOptionApplies(LimiterKind kind, std::string_view name) {
  if (name == "initial" || name == "max-wait-ms" || name == "warmup-ms" || name == "cold-factor") {
    return kind == LimiterKind::kTokenBucket;
  }
  if (name == "band" || name == "config-version" || name == "replacement") {
    return kind == LimiterKind::kComposite;
  }
  if (name == "refill") {
    return kind == LimiterKind::kTokenBucket || kind == LimiterKind::kGcra ||
           kind == LimiterKind::kLeakyMeter || kind == LimiterKind::kLeakyShaper ||
           kind == LimiterKind::kComposite;
  }
  return true;
}

using LimiterRequest =
    std::variant<TokenBucketAcquire, TokenBucketReserve, WarmupAcquire, GcraThrottle,
                 FixedWindowAcquire, SlidingLogAcquire, SlidingWindowAcquire, LeakyMeterAcquire,
                 LeakyShaperAcquire, ConcurrencyAcquire, CompositeBucketAcquire>;

namespace limiter_request_detail {

template <class Params>
Result<LimiterRequest> checked(const Params& p, LimiterRequest request) {
  if (auto reason = p.invalidReason()) return Error(Errc::invalid_argument, *reason);
  return request;
}

}  // namespace limiter_request_detail

// The request that takes `units` from `spec`'s limiter, or Errc::invalid_argument naming why
// its parameters are unusable (the processor's own reason). Options that do not apply to the
// limiter are ignored here; a front end that takes them from a user refuses them first.
inline Result<LimiterRequest> limiterRequest(const LimiterSpec& spec, std::int64_t units) {
  using limiter_request_detail::checked;
  const std::int64_t capacity = spec.capacity;
  const Nanos period = spec.period;
  switch (spec.kind) {
    case LimiterKind::kTokenBucket: {
      BucketParams b{capacity, spec.rate(), period, spec.initial};
      if (auto reason = b.invalidReason()) return Error(Errc::invalid_argument, *reason);
      if (spec.warmup) {
        const WarmupParams w =
            WarmupParams::of(b, *spec.warmup, spec.coldFactor, spec.maxWait.value_or(0));
        return checked(w, WarmupAcquire{w, units});
      }
      if (spec.maxWait) return LimiterRequest{TokenBucketReserve{b, units, *spec.maxWait}};
      return LimiterRequest{TokenBucketAcquire{b, units}};
    }
    case LimiterKind::kGcra: {
      const GcraParams p{capacity - 1, spec.rate(), period};
      return checked(p, GcraThrottle{p, units});
    }
    case LimiterKind::kFixedWindow: {
      const WindowParams p{capacity, period};
      return checked(p, FixedWindowAcquire{p, units});
    }
    case LimiterKind::kSlidingLog: {
      const SlidingLogParams p{capacity, period};
      return checked(p, SlidingLogAcquire{p, units});
    }
    case LimiterKind::kSlidingWindow: {
      const WindowParams p{capacity, period};
      return checked(p, SlidingWindowAcquire{p, units});
    }
    case LimiterKind::kLeakyMeter: {
      const LeakyMeterParams p{capacity, spec.rate(), period};
      return checked(p, LeakyMeterAcquire{p, units});
    }
    case LimiterKind::kLeakyShaper: {
      const LeakyShaperParams p{capacity, spec.rate(), period};
      return checked(p, LeakyShaperAcquire{p, units});
    }
    case LimiterKind::kConcurrency: {
      const ConcurrencyParams p{capacity, period};
      return checked(p, ConcurrencyAcquire{p, units});
    }
    case LimiterKind::kComposite: {
      CompositeParams p;
      p.bandwidths = spec.bands;
      if (p.bandwidths.empty())
        p.bandwidths.push_back(BucketParams{capacity, spec.rate(), period, {}});
      p.version = spec.configVersion;
      p.replacement = spec.replacement;
      return checked(p, CompositeBucketAcquire{p, units});
    }
  }
  return Error(Errc::invalid_argument, "unknown limiter");
}

}  // namespace ingrid
