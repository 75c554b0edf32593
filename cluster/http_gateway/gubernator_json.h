// The gubernator-style request and response of POST /v1/GetRateLimits, and their mapping onto
// ingrid's limiters (docs/gateways.md has the rules). Pure functions of their arguments (no I/O,
// no clock but the `now` passed in): the HTTP gateway (http_gateway.h) runs the requests.
//
// Request: {"requests": [{"name", "unique_key", "hits", "limit", "duration" (ms), "algorithm"
// (TOKEN_BUCKET = 0, LEAKY_BUCKET = 1), "behavior" (gubernator's bit flags), "burst",
// "metadata", "created_at"}]}; lowerCamel spellings (uniqueKey, createdAt) are read too, and
// int64 fields as JSON numbers or decimal strings (protobuf's JSON mapping).
// Response: {"responses": [{"status" (UNDER_LIMIT, OVER_LIMIT), "limit", "remaining",
// "reset_time" (unix ms), "error", "metadata"}]}, one per request in order; int64 fields as
// decimal strings, as protobuf's JSON mapping writes them.
//
// Thread safety: pure functions, any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <ingrid/limiter_request.h>
#include <ingrid/result.h>

namespace ingrid {

// Gubernator's behaviour flags (gubernator.proto Behavior).
enum GubernatorBehavior : std::int64_t {
  kNoBatching = 1,
  kGlobal = 2,
  kDurationIsGregorian = 4,
  kResetRemaining = 8,
  kMultiRegion = 16,
  kDrainOverLimit = 32,
};

// One request of the list, mapped.
struct GubernatorItem {
  std::string name;
  std::string uniqueKey;
  // name "_" unique_key, as gubernator hashes it: the entry's key.
  std::string key;
  std::int64_t hits = 0;
  std::int64_t limit = 0;
  std::int64_t durationMs = 0;
  std::int64_t algorithm = 0;  // 0 token bucket, 1 leaky bucket
  std::int64_t burst = 0;
  // What runs: a TokenBucketAcquire or a LeakyMeterAcquire (hits 0 asks for limit + 1, which
  // takes nothing and reads what remains). Empty when `error` says why it does not run.
  std::optional<LimiterRequest> request;
  bool peek = false;  // hits == 0
  std::string error;
};

// The body's requests, or why the body is refused (400): the field's path and the reason, as
// "requests[2].hits: must be a whole number in [0, 1000000000], got -1".
std::variant<std::vector<GubernatorItem>, std::string> parseGetRateLimits(std::string_view body);

// What one request answered.
struct GubernatorAnswer {
  bool over = false;
  std::int64_t limit = 0;
  std::int64_t remaining = 0;
  // Nanoseconds from now to reset_time: until the limit is whole again (under the limit), or
  // until this request would have been granted (over it; when never, until whole again).
  Nanos resetAfter = 0;
  std::string error;
};

// The answer to `item` from its limiter's answer (AcquireAnswer for a token bucket, LimitAnswer
// for a leaky bucket), or its error.
GubernatorAnswer gubernatorAnswer(const GubernatorItem& item, const Result<AcquireAnswer>& r);
GubernatorAnswer gubernatorAnswer(const GubernatorItem& item, const Result<LimitAnswer>& r);
// An item refused before it ran (item.error).
GubernatorAnswer gubernatorRefusal(const GubernatorItem& item);

// The response body; `nowMs` is the wall clock in unix milliseconds (reset_time's origin).
std::string getRateLimitsResponse(const std::vector<GubernatorAnswer>& answers, std::int64_t nowMs);

// The most requests in one call (gubernator's maxBatchSize), and the bounds on a request's
// numbers: what keeps the header arithmetic and limit + 1 within int64.
inline constexpr std::size_t kMaxGubernatorRequests = 1000;
inline constexpr std::int64_t kMaxGubernatorLimit = 1'000'000'000;
inline constexpr std::int64_t kMaxGubernatorDurationMs = 10LL * 365 * 24 * 3600 * 1000;
inline constexpr std::size_t kMaxGubernatorKeyBytes = 1024;

}  // namespace ingrid
