// RateLimitedService: the service under test in the examples beside it: a small HTTP-like API
// whose handler checks a per-API-key limit on the node its process embeds (node.invokeAsync on a
// token bucket) and answers 200, 429 (with Retry-After), or 503 when the limiter cannot answer.
// In a real server handle() would be called by the HTTP library (see
// examples/http_rate_limit_server.cpp); the tests call it directly, one replica per node.
//
// Thread safety: handle() from any thread; `respond` runs where the node completes the call (a
// completion thread, or in a simulation the test's thread).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include <ingrid/node.h>
#include <ingrid/processors/token_bucket.h>

namespace example {

struct Request {
  std::string path;    // "/v1/things"
  std::string apiKey;  // the caller's key: the limit is per key, across every replica
};

struct Response {
  int status = 0;  // 200, 429 or 503
  std::string body;
};

class RateLimitedService {
 public:
  // `limit`: each API key's bucket (for example 100 per day).
  RateLimitedService(ingrid::Node& node, ingrid::BucketParams limit) : node_(node), limit_(limit) {}

  void handle(const Request& request, std::function<void(Response)> respond) {
    node_.invokeAsync(
        "api:" + request.apiKey, ingrid::TokenBucketAcquire{limit_, 1},
        [respond = std::move(respond)](ingrid::Result<ingrid::AcquireAnswer> r) {
          if (!r) return respond({503, r.error().message()});
          if (!r->granted) {
            const auto wait = std::chrono::nanoseconds(r->waitNanos);
            return respond(
                {429, "Retry-After: " +
                          std::to_string(std::chrono::ceil<std::chrono::seconds>(wait).count())});
          }
          respond({200, "ok"});
        });
  }

 private:
  ingrid::Node& node_;
  ingrid::BucketParams limit_;
};

}  // namespace example
