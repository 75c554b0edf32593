#include <ingrid/processors/gcra.h>

#include <algorithm>

namespace ingrid {

using limiter::int128;
using limiter::kMaxInt64;

// docs/gcra.md "Overflow bounds": tau and inc are below 2^126, so newTat - tau - now and
// now - allowAt stay inside signed 128-bit for any int64 tat and now.
static_assert(int128{kMaxInt64} * kMaxInt64 + kMaxInt64 + (int128{1} << 64) > 0,
              "GCRA intermediates overflow");

std::optional<std::string> GcraParams::invalidReason() const {
  if (maxBurst < 0 || maxBurst == kMaxInt64) {
    return "maxBurst must be in [0, " + std::to_string(kMaxInt64 - 1) + "], got " +
           std::to_string(maxBurst);
  }
  if (count <= 0) return "count must be > 0, got " + std::to_string(count);
  if (period <= 0) return "period must be > 0, got " + std::to_string(period);
  return std::nullopt;
}

GcraAnswer Gcra::take(State& tat, const Params& params, std::int64_t quantity, Nanos now) noexcept {
  const int128 e = params.emissionInterval();
  const int128 tau = int128{params.maxBurst + 1} * e;
  const int128 base = std::max(tat, now);
  const int128 inc = quantity * e;
  const int128 newTat = base + inc;
  const int128 allowAt = newTat - tau;
  const bool fits = newTat <= kMaxInt64;

  GcraAnswer answer;
  answer.limit = params.maxBurst + 1;
  int128 ttl = 0;
  if (allowAt <= now && fits) {
    tat = static_cast<std::int64_t>(newTat);
    ttl = newTat - now;
  } else {
    answer.limited = true;
    ttl = base - now;
    answer.retryAfter = inc <= tau && fits ? limiter::saturate(allowAt - now) : kNever;
  }
  const int128 next = tau - ttl;
  answer.remaining = next > 0 ? static_cast<std::int64_t>(next / e) : 0;
  answer.resetAfter = limiter::saturate(ttl);
  return answer;
}

}  // namespace ingrid
