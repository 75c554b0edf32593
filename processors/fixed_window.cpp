#include <ingrid/processors/fixed_window.h>

namespace ingrid {

using limiter::int128;

std::optional<std::string> WindowParams::invalidReason() const {
  if (limit <= 0) return "limit must be > 0, got " + std::to_string(limit);
  if (window <= 0) return "window must be > 0, got " + std::to_string(window);
  return std::nullopt;
}

std::optional<std::string> FixedWindow::invalidState(const State& s) {
  if (s.count < 0) return "negative count " + std::to_string(s.count);
  return std::nullopt;
}

LimitAnswer FixedWindow::take(State& s, const Params& p, std::int64_t quantity,
                              Nanos now) noexcept {
  if (now >= limiter::windowEnd(s.windowStart, p.window)) s = create(p, now);
  const int128 end = limiter::windowEnd(s.windowStart, p.window);
  LimitAnswer a;
  a.limit = p.limit;
  if (int128{s.count} + quantity <= p.limit) {
    a.granted = true;
    s.count += quantity;
  } else {
    a.retryAfter = quantity > p.limit ? kNever : limiter::until(end, now);
  }
  a.remaining = s.count < p.limit ? p.limit - s.count : 0;
  a.resetAfter = s.count > 0 ? limiter::until(end, now) : 0;
  return a;
}

}  // namespace ingrid
