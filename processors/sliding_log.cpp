#include <ingrid/processors/sliding_log.h>

#include <algorithm>

namespace ingrid {

using limiter::int128;

std::optional<std::string> SlidingLogParams::invalidReason() const {
  if (limit < 1 || limit > kMaxLimit) {
    return "limit must be in [1, " + std::to_string(kMaxLimit) + "], got " + std::to_string(limit);
  }
  if (window <= 0) return "window must be > 0, got " + std::to_string(window);
  return std::nullopt;
}

std::optional<std::string> SlidingLog::invalidState(const State& s) {
  for (std::size_t i = 0; i < s.records.size(); ++i) {
    const LogRecord& r = s.records[i];
    if (r.count < 1 || r.count > Params::kMaxLimit) {
      return "record " + std::to_string(i) + " counts " + std::to_string(r.count);
    }
    if (i > 0 && r.at <= s.records[i - 1].at) {
      return "record " + std::to_string(i) + " is not later than the one before";
    }
  }
  return std::nullopt;
}

LimitAnswer SlidingLog::take(State& s, const Params& p, std::int64_t quantity, Nanos now) {
  auto& log = s.records;
  const auto inside = std::find_if(
      log.begin(), log.end(), [&](const LogRecord& r) { return int128{r.at} + p.window > now; });
  log.erase(log.begin(), inside);
  std::int64_t used = 0;  // at most kMaxLimit records of at most kMaxLimit each
  for (const LogRecord& r : log) used += r.count;

  LimitAnswer a;
  a.limit = p.limit;
  if (int128{used} + quantity <= p.limit) {
    a.granted = true;
    used += quantity;
    const Nanos at = log.empty() ? now : std::max(now, log.back().at);
    if (!log.empty() && log.back().at == at) {
      log.back().count += quantity;
    } else {
      log.push_back(LogRecord{at, quantity});
    }
  } else if (quantity > p.limit) {
    a.retryAfter = kNever;
  } else {
    const std::int64_t need = used + quantity - p.limit;
    std::int64_t freed = 0;
    for (const LogRecord& r : log) {
      freed += r.count;
      if (freed >= need) {
        a.retryAfter = limiter::until(int128{r.at} + p.window, now);
        break;
      }
    }
  }
  a.remaining = std::max<std::int64_t>(0, p.limit - used);
  a.resetAfter = log.empty() ? 0 : limiter::until(int128{log.back().at} + p.window, now);
  return a;
}

}  // namespace ingrid
