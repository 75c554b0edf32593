// The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers-10), as ingrid's HTTP
// front ends write them (examples/http_rate_limit_server, the gubernator-style gateway):
//   RateLimit-Policy: "<name>";q=<quota>;w=<window seconds>
//   RateLimit: "<name>";r=<remaining>;t=<seconds until reset>
// Several policies go in one field as a list, items separated by ", ".
//
// Thread safety: pure functions, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <ingrid/clock.h>
#include <ingrid/entry.h>
#include <ingrid/processors/limiter_support.h>

namespace ingrid {

// Whole seconds in `n`, rounded up (kNever stays far in the future). REQUIRES: n >= 0.
constexpr std::int64_t ceilSeconds(Nanos n) noexcept {
  return n / kNanosPerSecond + (n % kNanosPerSecond != 0);
}

// Nanoseconds until a token bucket of `quota` tokens, refilled at `quota` per `window` ns and
// holding `remaining`, is full again, rounded up; saturates at kNever.
// REQUIRES: quota > 0, window > 0, 0 <= remaining <= quota.
constexpr Nanos untilFull(std::int64_t quota, Nanos window, std::int64_t remaining) noexcept {
  const limiter::int128 deficit = quota - remaining;
  return limiter::saturate((deficit * window + quota - 1) / quota);
}

// `s` as a structured-field string (RFC 8941 sf-string): quoted, with '"' and '\' escaped; a
// byte outside printable ASCII becomes '?' (an sf-string cannot hold it).
inline std::string sfString(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c >= 0x20 && c < 0x7f ? c : '?';
    }
  }
  return out + "\"";
}

// One item of RateLimit-Policy: "name";q=quota;w=windowSeconds.
inline std::string rateLimitPolicyItem(std::string_view name, std::int64_t quota,
                                       std::int64_t windowSeconds) {
  return sfString(name) + ";q=" + std::to_string(quota) + ";w=" + std::to_string(windowSeconds);
}

// One item of RateLimit: "name";r=remaining;t=resetSeconds.
inline std::string rateLimitItem(std::string_view name, std::int64_t remaining,
                                 std::int64_t resetSeconds) {
  return sfString(name) + ";r=" + std::to_string(remaining) + ";t=" + std::to_string(resetSeconds);
}

}  // namespace ingrid
