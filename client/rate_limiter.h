// RateLimiter: a token bucket at one key, checked on every request a server handles.
//
// Three implementations with one interface:
//   RateLimiter<Invoker>          one TokenBucketAcquire per call on the key's primary, through an
//                                 embedded Node or a thin Client (the Invoker);
//   BatchingRateLimiter<Invoker>  the same through a Batcher: while one acquire for the key is in
//                                 flight, later ones queue and go as one TokenBucketBatchAcquire
//                                 (for hot keys);
//   LocalTokenBucket              a lock-free bucket in this process only (no cluster;
//                                 limiters/local_token_bucket.h).
// Each has tryAcquire(n) (blocking) and tryAcquireAsync(n, token) (completion signature
// void(Result<AcquireAnswer>)). A denial is an answer (granted == false, waitNanos), not an
// error. RateLimiter also reserves (Guava's acquire with a timeout, docs/token-bucket.md
// "Reservations"): acquire(n, maxWait) and acquireAsync(n, maxWait, token) take n tokens now if
// they will exist within maxWait, and return or complete once they are the caller's. Bad use is
// refused before anything is sent: tokens <= 0 and unusable BucketParams are
// Errc::invalid_argument, an empty or oversize key Errc::invalid_key, all naming the problem.
//
// Thread safety: every member is safe from any thread; the invoker must outlive the limiter and
// every pending acquireAsync.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include <asio/any_io_executor.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/bind_executor.hpp>
#include <asio/dispatch.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/system_executor.hpp>

#include <ingrid/client/limiter_policy.h>
#include <ingrid/grid/hash.h>
#include <ingrid/grid/result.h>
#include <ingrid/limiters/complete_now.h>
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

// checkAcquire, and a maxWait >= 0.
inline std::optional<Error> checkReserve(const std::string& key, const BucketParams& params,
                                         std::int64_t tokens, std::chrono::nanoseconds maxWait) {
  if (auto bad = checkAcquire(key, params, tokens)) return bad;
  if (maxWait.count() < 0) {
    return Error(Errc::invalid_argument, "bucket '" + key + "': maxWait must be >= 0, got " +
                                             std::to_string(maxWait.count()) + " ns");
  }
  return std::nullopt;
}

template <class Invoker>
class RateLimiter {
 public:
  // `options`: dry-run and fail-open / fail-closed (client/limiter_policy.h). Default: neither.
  RateLimiter(Invoker& invoker, std::string key, BucketParams params, LimiterOptions options = {})
      : invoker_(invoker),
        key_(std::move(key)),
        params_(params),
        policy_(std::make_shared<LimiterPolicy>(options)) {}

  Result<AcquireAnswer> tryAcquire(std::int64_t tokens = 1) {
    if (auto bad = checkAcquire(key_, params_, tokens)) {
      return policy_->apply(Result<AcquireAnswer>(std::move(*bad)));
    }
    return policy_->apply(invoker_.invoke(key_, TokenBucketAcquire{params_, tokens}));
  }

  template <class CompletionToken>
  auto tryAcquireAsync(std::int64_t tokens, CompletionToken&& token) {
    using Signature = void(Result<AcquireAnswer>);
    return asio::async_initiate<CompletionToken, Signature>(
        [](auto handler, Invoker* invoker, std::shared_ptr<LimiterPolicy> policy,
           std::optional<Error> bad, std::string key, TokenBucketAcquire request) {
          auto ex = asio::get_associated_executor(handler, asio::system_executor());
          if (bad) {
            auto posting = asio::make_work_guard(ex);
            asio::post(ex, [handler = std::move(handler),
                            r = policy->apply(Result<AcquireAnswer>(std::move(*bad)))]() mutable {
              std::move(handler)(std::move(r));
            });
            return;
          }
          // Bound to the handler's executor: the invoker runs it there (DESIGN invariant 9).
          invoker->invokeAsync(std::move(key), request,
                               asio::bind_executor(ex, [handler = std::move(handler),
                                                        policy](Result<AcquireAnswer> r) mutable {
                                 std::move(handler)(policy->apply(std::move(r)));
                               }));
        },
        token, &invoker_, policy_, checkAcquire(key_, params_, tokens), key_,
        TokenBucketAcquire{params_, tokens});
  }

  // Reserves `tokens` if they will exist within `maxWait` (TokenBucketReserve) and, when granted,
  // sleeps this thread for the answer's delay before returning it: on return the tokens are the
  // caller's. A refusal returns at once (granted == false, delay: the wait it would have needed);
  // in dry-run it returns at once as a grant. For plain threads: never call it where sleeping
  // stalls others (an executor's thread).
  Result<ReserveAnswer> acquire(std::int64_t tokens, std::chrono::nanoseconds maxWait) {
    if (auto bad = checkReserve(key_, params_, tokens, maxWait)) {
      return policy_->apply(Result<ReserveAnswer>(std::move(*bad)));
    }
    auto r = invoker_.invoke(key_, TokenBucketReserve{params_, tokens, maxWait.count()});
    if (!options().dryRun && mustWait(r))
      std::this_thread::sleep_for(std::chrono::nanoseconds(r->delay));
    return policy_->apply(std::move(r));
  }

  // acquire without blocking: completion signature void(Result<ReserveAnswer>), completing once
  // the reservation's delay has passed (at once for a refusal, an error, or in dry-run). The
  // delay is waited on an asio::steady_timer on the handler's associated executor when that is an
  // I/O executor (else the system executor's), never on a partition's thread, and the handler
  // runs on its executor (DESIGN invariant 9). The delay counts from when the answer arrived: at
  // least the node's delay.
  template <class CompletionToken>
  auto acquireAsync(std::int64_t tokens, std::chrono::nanoseconds maxWait,
                    CompletionToken&& token) {
    using Signature = void(Result<ReserveAnswer>);
    return asio::async_initiate<CompletionToken, Signature>(
        [](auto handler, Invoker* invoker, std::shared_ptr<LimiterPolicy> policy,
           std::optional<Error> bad, std::string key, TokenBucketReserve request) {
          auto ex = asio::get_associated_executor(handler, asio::system_executor());
          auto work = asio::make_work_guard(ex);
          auto deliver = [handler = std::move(handler), work = std::move(work),
                          policy](Result<ReserveAnswer> r) mutable {
            auto to = work.get_executor();
            asio::dispatch(
                to, [handler = std::move(handler), r = policy->apply(std::move(r)),
                     work = std::move(work)]() mutable { std::move(handler)(std::move(r)); });
          };
          if (bad) {
            asio::post(ex, [deliver = std::move(deliver), bad = std::move(*bad)]() mutable {
              deliver(Result<ReserveAnswer>(std::move(bad)));
            });
            return;
          }
          invoker->invokeAsync(
              std::move(key), request,
              [deliver = std::move(deliver), target = ex,
               dryRun = policy->options().dryRun](Result<ReserveAnswer> r) mutable {
                if (dryRun || !mustWait(r)) {
                  deliver(std::move(r));
                  return;
                }
                const std::chrono::nanoseconds delay(r->delay);
                std::shared_ptr<asio::steady_timer> timer;
                if constexpr (std::is_constructible_v<asio::any_io_executor, decltype(target)>) {
                  timer =
                      std::make_shared<asio::steady_timer>(asio::any_io_executor(target), delay);
                } else {
                  timer = std::make_shared<asio::steady_timer>(
                      asio::any_io_executor(asio::system_executor()), delay);
                }
                timer->async_wait([timer, deliver = std::move(deliver), r = std::move(r)](
                                      std::error_code) mutable { deliver(std::move(r)); });
              });
        },
        token, &invoker_, policy_, checkReserve(key_, params_, tokens, maxWait), key_,
        TokenBucketReserve{params_, tokens, maxWait.count()});
  }

  const std::string& key() const noexcept { return key_; }
  const BucketParams& params() const noexcept { return params_; }
  const LimiterOptions& options() const noexcept { return policy_->options(); }
  // What this limiter has answered so far (client/limiter_policy.h).
  LimiterCounts counts() const noexcept { return policy_->counts(); }

 private:
  // A reservation the cluster granted with a delay: the caller waits (unless in dry-run).
  static bool mustWait(const Result<ReserveAnswer>& r) { return r && r->granted && r->delay > 0; }

  Invoker& invoker_;
  std::string key_;
  BucketParams params_;
  // Shared with pending completions, which count into it.
  std::shared_ptr<LimiterPolicy> policy_;
};

}  // namespace ingrid
