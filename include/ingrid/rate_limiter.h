// RateLimiter: a token bucket at one key, checked on every request a server handles.
//
// Three implementations with one interface:
//   RateLimiter<Invoker>          one TokenBucketAcquire per call on the key's primary, through an
//                                 embedded Node or a thin Client (the Invoker);
//   BatchingRateLimiter<Invoker>  the same through a Batcher: while one acquire for the key is in
//                                 flight, later ones queue and go as one TokenBucketBatchAcquire
//                                 (for hot keys);
//   LocalTokenBucket              a lock-free bucket in this process only (no cluster;
//                                 include/ingrid/local_token_bucket.h).
// Each has tryAcquire(n) (blocking) and tryAcquireAsync(n, token) (completion signature
// void(Result<AcquireAnswer>)). A denial is an answer (granted == false, waitNanos), not an
// error. With LimiterOptions::warmup, RateLimiter paces permits with a warm-up instead
// (WarmupAcquire on the bucket's refill rate, docs/warm-up.md), answering in the same types
// (remaining is then 0: a warm-up limiter holds no burst). RateLimiter also reserves (Guava's
// acquire with a timeout, docs/token-bucket.md "Reservations"): acquire(n, maxWait) and
// acquireAsync(n, maxWait, token) take n tokens now if they will exist within maxWait, and return
// or complete once they are the caller's. Bad use is refused before anything is sent: tokens <= 0
// and unusable BucketParams are Errc::invalid_argument, an empty or oversize key Errc::invalid_key,
// all naming the problem.
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

#include <ingrid/complete_now.h>
#include <ingrid/hash.h>
#include <ingrid/limiter_policy.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/processors/warmup.h>
#include <ingrid/result.h>

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

// checkReserve, and usable warm-up parameters.
inline std::optional<Error> checkWarmup(const std::string& key, const BucketParams& bucket,
                                        const WarmupParams& params, std::int64_t tokens,
                                        std::chrono::nanoseconds maxWait) {
  if (auto bad = checkReserve(key, bucket, tokens, maxWait)) return bad;
  if (auto reason = params.invalidReason()) {
    return Error(Errc::invalid_argument, "warm-up '" + key + "': " + *reason);
  }
  return std::nullopt;
}

// A warm-up answer in the token bucket's answer types.
inline Result<AcquireAnswer> asAcquire(Result<AcquireAnswer> r) { return r; }
inline Result<AcquireAnswer> asAcquire(Result<WarmupAnswer> r) {
  if (!r) return std::move(r).error();
  return AcquireAnswer{r->granted, 0, r->granted ? 0 : r->delay};
}
inline Result<ReserveAnswer> asReserve(Result<ReserveAnswer> r) { return r; }
inline Result<ReserveAnswer> asReserve(Result<WarmupAnswer> r) {
  if (!r) return std::move(r).error();
  return ReserveAnswer{r->granted, r->delay, 0};
}

template <class Invoker>
class RateLimiter {
 public:
  // `options`: dry-run, fail-open / fail-closed and warm-up (include/ingrid/limiter_policy.h).
  // Default: none of them.
  RateLimiter(Invoker& invoker, std::string key, BucketParams params, LimiterOptions options = {})
      : invoker_(invoker),
        key_(std::move(key)),
        params_(params),
        policy_(std::make_shared<LimiterPolicy>(options)) {}

  Result<AcquireAnswer> tryAcquire(std::int64_t tokens = 1) {
    if (auto w = warmupParams(std::chrono::nanoseconds(0))) {
      if (auto bad = checkWarmup(key_, params_, *w, tokens, std::chrono::nanoseconds(0))) {
        return policy_->apply(Result<AcquireAnswer>(std::move(*bad)));
      }
      return policy_->apply(asAcquire(invoker_.invoke(key_, WarmupAcquire{*w, tokens})));
    }
    if (auto bad = checkAcquire(key_, params_, tokens)) {
      return policy_->apply(Result<AcquireAnswer>(std::move(*bad)));
    }
    return policy_->apply(invoker_.invoke(key_, TokenBucketAcquire{params_, tokens}));
  }

  template <class CompletionToken>
  auto tryAcquireAsync(std::int64_t tokens, CompletionToken&& token) {
    if (auto w = warmupParams(std::chrono::nanoseconds(0))) {
      return initiateAcquire(WarmupAcquire{*w, tokens},
                             checkWarmup(key_, params_, *w, tokens, std::chrono::nanoseconds(0)),
                             std::forward<CompletionToken>(token));
    }
    return initiateAcquire(TokenBucketAcquire{params_, tokens}, checkAcquire(key_, params_, tokens),
                           std::forward<CompletionToken>(token));
  }

  // Reserves `tokens` if they will exist within `maxWait` (TokenBucketReserve; with warm-up, a
  // WarmupAcquire whose turn comes within maxWait) and, when granted, sleeps this thread for the
  // answer's delay before returning it: on return the tokens are the caller's. A refusal returns
  // at once (granted == false, delay: the wait it would have needed); in dry-run it returns at
  // once as a grant. For plain threads: never call it where sleeping stalls others (an
  // executor's thread).
  Result<ReserveAnswer> acquire(std::int64_t tokens, std::chrono::nanoseconds maxWait) {
    Result<ReserveAnswer> r = reserve(tokens, maxWait);
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
    if (auto w = warmupParams(maxWait)) {
      return initiateReserve(WarmupAcquire{*w, tokens},
                             checkWarmup(key_, params_, *w, tokens, maxWait),
                             std::forward<CompletionToken>(token));
    }
    return initiateReserve(TokenBucketReserve{params_, tokens, maxWait.count()},
                           checkReserve(key_, params_, tokens, maxWait),
                           std::forward<CompletionToken>(token));
  }

  const std::string& key() const noexcept { return key_; }
  const BucketParams& params() const noexcept { return params_; }
  const LimiterOptions& options() const noexcept { return policy_->options(); }
  // What this limiter has answered so far (include/ingrid/limiter_policy.h).
  LimiterCounts counts() const noexcept { return policy_->counts(); }

 private:
  // A reservation the cluster granted with a delay: the caller waits (unless in dry-run).
  static bool mustWait(const Result<ReserveAnswer>& r) { return r && r->granted && r->delay > 0; }

  // The warm-up request's parameters, if this limiter has the option.
  std::optional<WarmupParams> warmupParams(std::chrono::nanoseconds maxWait) const {
    const auto& w = options().warmup;
    if (!w) return std::nullopt;
    return WarmupParams::of(params_, w->period.count(), w->coldFactor, maxWait.count());
  }

  // The reservation's answer, before the policy: an Error for bad use.
  Result<ReserveAnswer> reserve(std::int64_t tokens, std::chrono::nanoseconds maxWait) {
    if (auto w = warmupParams(maxWait)) {
      if (auto bad = checkWarmup(key_, params_, *w, tokens, maxWait)) return std::move(*bad);
      return asReserve(invoker_.invoke(key_, WarmupAcquire{*w, tokens}));
    }
    if (auto bad = checkReserve(key_, params_, tokens, maxWait)) return std::move(*bad);
    return invoker_.invoke(key_, TokenBucketReserve{params_, tokens, maxWait.count()});
  }

  // tryAcquireAsync for `request` (TokenBucketAcquire or WarmupAcquire), refused with `bad`.
  template <class Request, class CompletionToken>
  auto initiateAcquire(Request req, std::optional<Error> refusal, CompletionToken&& token) {
    using Signature = void(Result<AcquireAnswer>);
    return asio::async_initiate<CompletionToken, Signature>(
        [](auto handler, Invoker* invoker, std::shared_ptr<LimiterPolicy> policy,
           std::optional<Error> bad, std::string key, Request request) {
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
          invoker->invokeAsync(
              std::move(key), request,
              asio::bind_executor(ex, [handler = std::move(handler),
                                       policy](Result<typename Request::Result> r) mutable {
                std::move(handler)(policy->apply(asAcquire(std::move(r))));
              }));
        },
        token, &invoker_, policy_, std::move(refusal), key_, std::move(req));
  }

  // acquireAsync for `request` (TokenBucketReserve or WarmupAcquire), refused with `bad`.
  template <class Request, class CompletionToken>
  auto initiateReserve(Request req, std::optional<Error> refusal, CompletionToken&& token) {
    using Signature = void(Result<ReserveAnswer>);
    return asio::async_initiate<CompletionToken, Signature>(
        [](auto handler, Invoker* invoker, std::shared_ptr<LimiterPolicy> policy,
           std::optional<Error> bad, std::string key, Request request) {
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
               dryRun = policy->options().dryRun](Result<typename Request::Result> answer) mutable {
                Result<ReserveAnswer> r = asReserve(std::move(answer));
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
        token, &invoker_, policy_, std::move(refusal), key_, std::move(req));
  }

  Invoker& invoker_;
  std::string key_;
  BucketParams params_;
  // Shared with pending completions, which count into it.
  std::shared_ptr<LimiterPolicy> policy_;
};

}  // namespace ingrid
