// RateLimiter: a token bucket at one key, checked on every request a server handles.
//
// Three implementations with one interface:
//   RateLimiter<Invoker>          one TokenBucketAcquire per call on the key's primary, through an
//                                 embedded Node or a thin Client (the Invoker);
//   BatchingRateLimiter<Invoker>  the same through a Batcher: while one acquire for the key is in
//                                 flight, later ones queue and go as one TokenBucketBatchAcquire
//                                 (for hot keys);
//   LocalTokenBucket              a lock-free bucket in this process only (no cluster).
// Each has tryAcquire(n) (blocking) and tryAcquireAsync(n, token) (completion signature
// void(Result<AcquireAnswer>)). A denial is an answer (granted == false, waitNanos), not an
// error. Bad use is refused before anything is sent: tokens <= 0 and unusable BucketParams are
// Errc::invalid_argument, an empty or oversize key Errc::invalid_key, all naming the problem.
//
// Thread safety: every member is safe from any thread; the invoker must outlive the limiter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>

#include <ingrid/grid/hash.h>
#include <ingrid/grid/result.h>
#include <ingrid/processors/token_bucket.h>

namespace ingrid {

// Why (key, params, tokens) cannot be sent, or nullopt if they can.
inline std::optional<Error> checkAcquire(const std::string& key, const BucketParams& params,
                                         std::int64_t tokens) {
  if (key.empty()) return Error(Errc::invalid_key, "a rate limiter key must not be empty");
  if (auto bad = keyError(key)) return bad;
  if (auto reason = params.invalidReason()) {
    return Error(Errc::invalid_argument, "bucket '" + key + "': " + *reason);
  }
  if (tokens <= 0) {
    return Error(Errc::invalid_argument,
                 "bucket '" + key + "': tokens must be > 0, got " + std::to_string(tokens));
  }
  return std::nullopt;
}

// Completes `token` with an immediate result without running it inline (Asio's rule): posted to
// the handler's associated executor, else to the system executor.
template <class T, class CompletionToken>
auto completeNow(Result<T> result, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(Result<T>)>(
      [](auto handler, Result<T> r) {
        auto ex = asio::get_associated_executor(handler, asio::system_executor());
        // Guards the target until post() has returned (see cluster/invoke_async.h).
        auto posting = asio::make_work_guard(ex);
        asio::post(ex, [handler = std::move(handler), r = std::move(r)]() mutable {
          std::move(handler)(std::move(r));
        });
      },
      token, std::move(result));
}

template <class Invoker>
class RateLimiter {
 public:
  RateLimiter(Invoker& invoker, std::string key, BucketParams params)
      : invoker_(invoker), key_(std::move(key)), params_(params) {}

  Result<AcquireAnswer> tryAcquire(std::int64_t tokens = 1) {
    if (auto bad = checkAcquire(key_, params_, tokens)) return std::move(*bad);
    return invoker_.invoke(key_, TokenBucketAcquire{params_, tokens});
  }

  template <class CompletionToken>
  auto tryAcquireAsync(std::int64_t tokens, CompletionToken&& token) {
    if (auto bad = checkAcquire(key_, params_, tokens)) {
      return completeNow<AcquireAnswer>(std::move(*bad), std::forward<CompletionToken>(token));
    }
    return invoker_.invokeAsync(key_, TokenBucketAcquire{params_, tokens},
                                std::forward<CompletionToken>(token));
  }

  const std::string& key() const noexcept { return key_; }
  const BucketParams& params() const noexcept { return params_; }

 private:
  Invoker& invoker_;
  std::string key_;
  BucketParams params_;
};

}  // namespace ingrid
