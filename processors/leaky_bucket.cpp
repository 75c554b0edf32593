#include <ingrid/processors/leaky_bucket.h>

#include <algorithm>

namespace ingrid {

using limiter::int128;

// docs/leaky-bucket.md "Expiry, clock, overflow": the leak accumulator
// (2^64 - 1) * (2^63 - 1) + (2^63 - 2) stays below 2^127.
static_assert(((int128{1} << 64) - 1) * limiter::kMaxInt64 + (limiter::kMaxInt64 - 1) > 0,
              "leak accumulator overflows");

std::optional<std::string> LeakyMeterParams::invalidReason() const {
  if (capacity <= 0) return "capacity must be > 0, got " + std::to_string(capacity);
  if (leakCount <= 0) return "leakCount must be > 0, got " + std::to_string(leakCount);
  if (leakPeriod <= 0) return "leakPeriod must be > 0, got " + std::to_string(leakPeriod);
  return std::nullopt;
}

std::optional<std::string> LeakyMeter::invalidState(const State& s) {
  if (s.level < 0 || s.drained < 0) {
    return "negative level " + std::to_string(s.level) + " or drained " + std::to_string(s.drained);
  }
  return std::nullopt;
}

void LeakyMeter::leak(State& s, const Params& p, Nanos now) noexcept {
  if (s.drained >= p.leakPeriod || s.level == 0) s.drained = 0;  // a shortened period, or empty
  if (now <= s.lastLeak) return;  // a clock behind lastLeak leaks nothing
  const int128 acc = (int128{now} - s.lastLeak) * p.leakCount + s.drained;
  const int128 whole = acc / p.leakPeriod;
  if (whole >= s.level) {
    s.level = 0;
    s.drained = 0;
  } else {
    s.level -= static_cast<std::int64_t>(whole);
    s.drained = static_cast<std::int64_t>(acc % p.leakPeriod);
  }
  s.lastLeak = now;
}

int128 LeakyMeter::untilAtMost(const State& s, const Params& p, std::int64_t target) noexcept {
  if (s.level <= target) return 0;
  const int128 need = int128{s.level - target} * p.leakPeriod - s.drained;
  return limiter::ceilDiv(need, p.leakCount);
}

LimitAnswer LeakyMeter::take(State& s, const Params& p, std::int64_t quantity, Nanos now) noexcept {
  leak(s, p, now);
  const int128 gap = s.lastLeak > now ? int128{s.lastLeak} - now : 0;  // a clock behind
  LimitAnswer a;
  a.limit = p.capacity;
  if (int128{s.level} + quantity <= p.capacity) {
    a.granted = true;
    s.level += quantity;
  } else if (quantity > p.capacity) {
    a.retryAfter = kNever;
  } else {
    a.retryAfter = limiter::saturate(gap + untilAtMost(s, p, p.capacity - quantity));
  }
  a.remaining = std::max<std::int64_t>(0, p.capacity - s.level);
  a.resetAfter = limiter::saturate(s.level == 0 ? 0 : gap + untilAtMost(s, p, 0));
  return a;
}

std::optional<std::string> LeakyShaperParams::invalidReason() const {
  if (capacity <= 0) return "capacity must be > 0, got " + std::to_string(capacity);
  if (count <= 0) return "count must be > 0, got " + std::to_string(count);
  if (period <= 0) return "period must be > 0, got " + std::to_string(period);
  return std::nullopt;
}

ShaperAnswer LeakyShaper::take(State& tat, const Params& p, std::int64_t quantity,
                               Nanos now) noexcept {
  const Nanos base = std::max(tat, now);
  const GcraAnswer g = Gcra::take(tat, p.asGcra(), quantity, now);
  // base - now reaches 2^64 - 1 for a clock far behind: 128-bit, saturated (found by
  // fuzz/fuzz_processors).
  const Nanos delay = g.granted() ? limiter::until(base, now) : 0;
  return ShaperAnswer{g.granted(), delay, g.limit, g.remaining, g.retryAfter, g.resetAfter};
}

}  // namespace ingrid
