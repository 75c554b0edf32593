#include <ingrid/processors/warmup.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace ingrid {

using limiter::int128;
using limiter::kMaxInt64;

namespace {

__extension__ typedef unsigned __int128 uint128;

// floor(a * b / d) and the remainder, exact through a 256-bit product. `overflow` when the
// quotient does not fit in 128 bits. REQUIRES: 0 < d < 2^127.
struct Quotient {
  uint128 q = 0;
  uint128 r = 0;
  bool overflow = false;
};

Quotient mulDiv(uint128 a, uint128 b, uint128 d) noexcept {
  constexpr uint128 kLow = ~std::uint64_t{0};
  const uint128 a0 = a & kLow, a1 = a >> 64, b0 = b & kLow, b1 = b >> 64;
  const uint128 p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const uint128 mid = (p00 >> 64) + (p01 & kLow) + (p10 & kLow);  // < 3 * 2^64
  const uint128 lo = (mid << 64) | (p00 & kLow);
  const uint128 hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
  Quotient out;
  if (hi >= d) {
    out.overflow = true;
    return out;
  }
  // Long division of hi:lo by d, one bit at a time; r < d < 2^127, so 2r + 1 fits.
  uint128 r = hi;
  uint128 q = 0;
  for (int bit = 127; bit >= 0; --bit) {
    r = (r << 1) | ((lo >> bit) & 1);
    q <<= 1;
    if (r >= d) {
      r -= d;
      q |= 1;
    }
  }
  out.q = q;
  out.r = r;
  return out;
}

// threshold and zone of docs/warm-up.md "Parameters", unbounded. REQUIRES: fields > 0.
int128 thresholdOf(const WarmupParams& p) noexcept {
  return int128{p.warmup} * p.permits / (int128{2} * p.period);
}
int128 zoneOf(const WarmupParams& p) noexcept {
  return int128{2} * p.warmup * p.permits / ((int128{1} + p.coldFactor) * p.period);
}

}  // namespace

std::optional<std::string> WarmupParams::invalidReason() const {
  if (permits <= 0) return "permits must be > 0, got " + std::to_string(permits);
  if (period <= 0) return "period must be > 0, got " + std::to_string(period);
  if (warmup <= 0) return "warmup must be > 0, got " + std::to_string(warmup);
  if (coldFactor < 1 || coldFactor > kMaxColdFactor) {
    return "coldFactor must be in [1, " + std::to_string(kMaxColdFactor) + "], got " +
           std::to_string(coldFactor);
  }
  if (maxWait < 0) return "maxWait must be >= 0, got " + std::to_string(maxWait);
  const int128 max = thresholdOf(*this) + zoneOf(*this);
  if (max > kMaxInt64) {
    return "the warm-up stores more than INT64_MAX permits (warmup * permits / period is too "
           "large): shorten warmup or lower the rate";
  }
  return std::nullopt;
}

std::int64_t WarmupParams::thresholdPermits() const noexcept {
  return static_cast<std::int64_t>(thresholdOf(*this));
}

std::int64_t WarmupParams::maxPermits() const noexcept {
  return static_cast<std::int64_t>(thresholdOf(*this) + zoneOf(*this));
}

WarmupState Warmup::create(const Params& p, Nanos now) noexcept {
  return WarmupState{p.maxPermits(), 0, now};
}

std::optional<std::string> Warmup::invalidState(const State& s) {
  if (s.stored < 0 || s.remainder < 0) {
    return "negative stored permits " + std::to_string(s.stored) + " or remainder " +
           std::to_string(s.remainder);
  }
  return std::nullopt;
}

void Warmup::resync(State& s, const Params& p, Nanos now) noexcept {
  const std::int64_t max = p.maxPermits();
  if (s.stored >= max) {
    s.stored = max;
    s.remainder = 0;
  }
  if (s.remainder >= p.warmup) s.remainder = 0;
  if (now <= s.nextFree) return;  // behind the schedule: nothing cools
  const int128 acc = (int128{now} - s.nextFree) * max + s.remainder;
  const int128 whole = acc / p.warmup;
  if (whole >= max - s.stored) {
    s.stored = max;
    s.remainder = 0;
  } else {
    s.stored += static_cast<std::int64_t>(whole);
    s.remainder = static_cast<std::int64_t>(acc % p.warmup);
  }
  s.nextFree = now;
}

Nanos Warmup::cost(const Params& p, std::int64_t stored, std::int64_t n) noexcept {
  const uint128 period = static_cast<uint128>(p.period);
  const uint128 permits = static_cast<uint128>(p.permits);
  const std::int64_t above = std::max<std::int64_t>(0, stored - p.thresholdPermits());
  const std::int64_t k = std::min(n, above);
  if (k == 0) {  // every permit at the stable interval
    const Quotient t = mulDiv(period, static_cast<uint128>(n), permits);
    if (t.overflow) return kNever;
    const uint128 c = t.q + (t.r != 0 ? 1 : 0);
    return c >= static_cast<uint128>(kMaxInt64) ? kNever : static_cast<Nanos>(c);
  }
  // k > 0 implies zone >= above >= k >= 1.
  const uint128 zone2 = 2 * static_cast<uint128>(zoneOf(p));
  const uint128 g = static_cast<uint128>(k) * static_cast<uint128>(2 * int128{above} - k);
  const uint128 steps = static_cast<uint128>(p.coldFactor - 1);
  const uint128 e = static_cast<uint128>(n) + steps * (g / zone2);
  const uint128 f = steps * (g % zone2);
  const Quotient q1 = mulDiv(period, e, permits);
  const Quotient q2 = mulDiv(period, f, zone2 * permits);
  if (q1.overflow || q2.overflow) return kNever;
  const uint128 den = zone2 * permits;
  const uint128 frac = q1.r * zone2 + q2.r;  // < 2 * den < 2^128
  const uint128 whole = q1.q + q2.q;
  if (whole < q1.q || whole >= static_cast<uint128>(kMaxInt64)) return kNever;
  const uint128 c = whole + frac / den + (frac % den != 0 ? 1 : 0);
  return c >= static_cast<uint128>(kMaxInt64) ? kNever : static_cast<Nanos>(c);
}

WarmupAnswer Warmup::take(State& s, const Params& p, std::int64_t quantity, Nanos now) noexcept {
  resync(s, p, now);
  const int128 wait = s.nextFree > now ? int128{s.nextFree} - now : 0;
  WarmupAnswer a;
  a.cost = cost(p, s.stored, quantity);
  const int128 base = std::max<int128>(s.nextFree, now);
  if (a.cost == kNever || base + a.cost > kMaxInt64) {
    a.delay = kNever;
  } else if (wait > p.maxWait) {
    a.delay = limiter::saturate(wait);
  } else {
    a.granted = true;
    a.delay = static_cast<Nanos>(wait);
    s.nextFree = static_cast<Nanos>(base + a.cost);
    s.stored -= std::min(quantity, s.stored);
  }
  a.stored = s.stored;
  return a;
}

Nanos Warmup::expiresAt(const State& s, const Params& p) noexcept {
  const std::int64_t max = p.maxPermits();
  if (s.stored >= max || max == 0) return s.nextFree;
  const int128 need = (int128{max} - s.stored) * p.warmup - s.remainder;
  return limiter::saturate(int128{s.nextFree} + limiter::ceilDiv(need, max));
}

}  // namespace ingrid
