#include <ingrid/processors/sliding_window.h>

#include <algorithm>
#include <optional>

namespace ingrid {

using limiter::int128;

std::optional<std::string> SlidingWindow::invalidState(const State& s) {
  if (s.current < 0 || s.previous < 0) {
    return "negative count " + std::to_string(std::min(s.current, s.previous));
  }
  return std::nullopt;
}

Nanos SlidingWindow::expiresAt(const State& s, const Params& p) noexcept {
  const int128 end = limiter::windowEnd(s.windowStart, p.window);
  if (s.current > 0) return limiter::saturate(end + p.window);
  return limiter::saturate(s.previous > 0 ? end : end - p.window);
}

LimitAnswer SlidingWindow::take(State& s, const Params& p, std::int64_t quantity,
                                Nanos now) noexcept {
  const int128 w = p.window;
  const int128 storedEnd = limiter::windowEnd(s.windowStart, p.window);
  if (now >= storedEnd + w) {
    s = create(p, now);
  } else if (now >= storedEnd) {
    s = State{static_cast<Nanos>(storedEnd), 0, s.current};
  }
  const int128 start = limiter::windowEnd(s.windowStart, p.window) - w;  // aligned, maybe < MIN
  const int128 e = std::max<int128>(0, now - start);                     // in [0, window)
  const int128 weighted = int128{s.previous} * (w - e);

  LimitAnswer a;
  a.limit = p.limit;
  if (int128{s.current} + quantity <= p.limit &&
      weighted + (int128{s.current} + quantity) * w <= int128{p.limit} * w) {
    a.granted = true;
    s.current += quantity;
  } else if (quantity > p.limit) {
    a.retryAfter = kNever;
  } else {
    // In this window, once the previous window's weight has fallen far enough.
    const int128 r = int128{p.limit} - s.current - quantity;
    std::optional<int128> at;
    if (r >= 0 && s.previous > 0) {
      const int128 e1 = w - r * w / s.previous;  // > e, or this request would be granted
      if (e1 < w) at = start + e1;
    }
    if (!at) {
      // Else in the next window, where this window's count is the previous one.
      const int128 left = int128{p.limit} - quantity;
      at = start + w + (s.current == 0 ? 0 : std::max<int128>(0, w - left * w / s.current));
    }
    a.retryAfter = limiter::until(*at, now);
  }
  const int128 room = limiter::floorDiv(int128{p.limit} * w - weighted, w) - s.current;
  a.remaining = room > 0 ? static_cast<std::int64_t>(room) : 0;
  const int128 resetAt = s.current > 0 ? start + 2 * w : s.previous > 0 ? start + w : now;
  a.resetAfter = limiter::until(resetAt, now);
  return a;
}

}  // namespace ingrid
