// RateLimiter: a token bucket at one key, checked on every request a server handles.
//
// Three implementations with one interface:
//   RateLimiter<Invoker>          one request per call on the key's primary, through an embedded
//                                 Node or a thin Client (the Invoker);
//   BatchingRateLimiter<Invoker>  the same through Batchers (include/ingrid/batcher.h): while one
//                                 call for the key is in flight, later ones queue and go as one
//                                 batch (for hot keys);
//   LocalTokenBucket              a lock-free bucket in this process only (no cluster;
//                                 include/ingrid/local_token_bucket.h): tryAcquire only.
// Each has tryAcquire(n) (blocking) and tryAcquireAsync(n, token) (completion signature
// void(Result<AcquireAnswer>); a handler with an associated executor runs there; one without
// runs on a Client's I/O thread, where it must not block, or, over a Node, on its completion
// threads (RateLimiter) or the system executor (BatchingRateLimiter)). A denial is an answer
// (granted == false, waitNanos), not an error. The two cluster limiters also reserve (Guava's
// acquire with a timeout, docs/token-bucket.md "Reservations"): acquire(n, maxWait) and
// acquireAsync(n, maxWait, token) take n tokens now if they will exist within maxWait, and return
// or complete once they are the caller's. They take LimiterOptions
// (include/ingrid/limiter_policy.h): dry-run, fail-open or fail-closed, each outcome counted
// (counts()); and warm-up, which paces permits instead (WarmupAcquire on the bucket's refill rate,
// docs/warm-up.md), answering in the same types (remaining is then 0: a warm-up limiter holds no
// burst). Both build their requests and complete their calls with the code of limiter_detail below,
// so they answer alike. Bad use is refused before anything is sent: tokens <= 0, maxWait < 0 and
// unusable BucketParams or warm-up are Errc::invalid_argument, an empty or oversize key
// Errc::invalid_key, all naming the problem.
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

namespace limiter_detail {

// What RateLimiter and BatchingRateLimiter (include/ingrid/batcher.h) share, so that both answer
// alike: the request a call sends, and the asynchronous calls from the request to the caller's
// handler (the policy, the answer types, the wait of a reservation).

// The request a token-bucket limiter sends for `tokens`, passed to send(request, refusal) with
// why it cannot be sent (nullopt if it can): with LimiterOptions::warmup a WarmupAcquire whose
// turn must come within maxWait (checkWarmup), else a TokenBucketReserve (kReserve: checkReserve)
// or a TokenBucketAcquire (checkAcquire, maxWait unused). Returns what send returns.
template <bool kReserve, class Send>
auto withRequest(const std::string& key, const BucketParams& params, const LimiterOptions& options,
                 std::int64_t tokens, std::chrono::nanoseconds maxWait, Send&& send) {
  if (const auto& warm = options.warmup) {
    const WarmupParams w =
        WarmupParams::of(params, warm->period.count(), warm->coldFactor, maxWait.count());
    return send(WarmupAcquire{w, tokens}, checkWarmup(key, params, w, tokens, maxWait));
  } else if constexpr (kReserve) {
    return send(TokenBucketReserve{params, tokens, maxWait.count()},
                checkReserve(key, params, tokens, maxWait));
  } else {
    return send(TokenBucketAcquire{params, tokens}, checkAcquire(key, params, tokens));
  }
}

// A reservation granted with a delay: the caller waits (unless in dry-run).
inline bool mustWait(const Result<ReserveAnswer>& r) { return r && r->granted && r->delay > 0; }

// Whether a handler has an associated executor of its own (asio::bind_executor, a coroutine's).
struct NoExecutor {};
template <class Handler>
inline constexpr bool hasOwnExecutor =
    !std::is_same_v<asio::associated_executor_t<Handler, NoExecutor>, NoExecutor>;

// tryAcquireAsync: sends `req` (TokenBucketAcquire or WarmupAcquire) to `entryKey` through
// `target` (an Invoker, or a Batcher: anything with invokeAsync(std::string, Request, token)),
// or refuses it with `refusal`, and completes `token` (void(Result<AcquireAnswer>)) with the
// answer as AcquireAnswer, after the policy: on the handler's associated executor; without one,
// where the target runs such handlers (a refusal: on the system executor). `target` must be alive
// when the token initiates.
template <class Target, class Request, class CompletionToken>
auto initiateAcquire(Target& target, std::shared_ptr<LimiterPolicy> limiterPolicy,
                     std::string entryKey, Request req, std::optional<Error> refusal,
                     CompletionToken&& token) {
  using Signature = void(Result<AcquireAnswer>);
  return asio::async_initiate<CompletionToken, Signature>(
      [](auto handler, Target* to, std::shared_ptr<LimiterPolicy> policy, std::optional<Error> bad,
         std::string key, Request request) {
        auto ex = asio::get_associated_executor(handler, asio::system_executor());
        if (bad) {
          auto posting = asio::make_work_guard(ex);
          asio::post(ex, [handler = std::move(handler),
                          r = policy->apply(Result<AcquireAnswer>(std::move(*bad)))]() mutable {
            std::move(handler)(std::move(r));
          });
          return;
        }
        auto complete = [handler = std::move(handler),
                         policy](Result<typename Request::Result> r) mutable {
          std::move(handler)(policy->apply(asAcquire(std::move(r))));
        };
        if constexpr (hasOwnExecutor<decltype(handler)>) {
          // Bound to the handler's executor: the target runs it there (invariant 9).
          to->invokeAsync(std::move(key), request, asio::bind_executor(ex, std::move(complete)));
        } else {
          // The target's own default, with no hop of the limiter's: a Client's I/O thread, a
          // Node's completion threads (never a partition's), a Batcher's
          // (include/ingrid/batcher.h).
          to->invokeAsync(std::move(key), request, std::move(complete));
        }
      },
      token, &target, std::move(limiterPolicy), std::move(refusal), std::move(entryKey),
      std::move(req));
}

// acquireAsync: sends `req` (TokenBucketReserve or WarmupAcquire) as initiateAcquire does,
// and completes `token` (void(Result<ReserveAnswer>)) once a granted reservation's delay has
// passed (at once for a refusal, an error, or in dry-run). The delay is waited on an
// asio::steady_timer on the handler's associated executor when that is an I/O executor (else the
// system executor's), never on a partition's thread; the handler runs on its executor.
template <class Target, class Request, class CompletionToken>
auto initiateReserve(Target& target, std::shared_ptr<LimiterPolicy> limiterPolicy,
                     std::string entryKey, Request req, std::optional<Error> refusal,
                     CompletionToken&& token) {
  using Signature = void(Result<ReserveAnswer>);
  return asio::async_initiate<CompletionToken, Signature>(
      [](auto handler, Target* to, std::shared_ptr<LimiterPolicy> policy, std::optional<Error> bad,
         std::string key, Request request) {
        auto ex = asio::get_associated_executor(handler, asio::system_executor());
        auto work = asio::make_work_guard(ex);
        auto deliver = [handler = std::move(handler), work = std::move(work),
                        policy](Result<ReserveAnswer> r) mutable {
          auto at = work.get_executor();
          asio::dispatch(at,
                         [handler = std::move(handler), r = policy->apply(std::move(r)),
                          work = std::move(work)]() mutable { std::move(handler)(std::move(r)); });
        };
        if (bad) {
          asio::post(ex, [deliver = std::move(deliver), bad = std::move(*bad)]() mutable {
            deliver(Result<ReserveAnswer>(std::move(bad)));
          });
          return;
        }
        to->invokeAsync(
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
                timer = std::make_shared<asio::steady_timer>(asio::any_io_executor(target), delay);
              } else {
                timer = std::make_shared<asio::steady_timer>(
                    asio::any_io_executor(asio::system_executor()), delay);
              }
              timer->async_wait([timer, deliver = std::move(deliver), r = std::move(r)](
                                    std::error_code) mutable { deliver(std::move(r)); });
            });
      },
      token, &target, std::move(limiterPolicy), std::move(refusal), std::move(entryKey),
      std::move(req));
}

}  // namespace limiter_detail

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
    return limiter_detail::withRequest<false>(
        key_, params_, options(), tokens, std::chrono::nanoseconds(0),
        [&](auto request, std::optional<Error> bad) {
          if (bad) return policy_->apply(Result<AcquireAnswer>(std::move(*bad)));
          return policy_->apply(asAcquire(invoker_.invoke(key_, request)));
        });
  }

  template <class CompletionToken>
  auto tryAcquireAsync(std::int64_t tokens, CompletionToken&& token) {
    return limiter_detail::withRequest<false>(
        key_, params_, options(), tokens, std::chrono::nanoseconds(0),
        [&](auto request, std::optional<Error> bad) {
          return limiter_detail::initiateAcquire(invoker_, policy_, key_, std::move(request),
                                                 std::move(bad),
                                                 std::forward<CompletionToken>(token));
        });
  }

  // Reserves `tokens` if they will exist within `maxWait` (TokenBucketReserve; with warm-up, a
  // WarmupAcquire whose turn comes within maxWait) and, when granted, sleeps this thread for the
  // answer's delay before returning it: on return the tokens are the caller's. A refusal returns
  // at once (granted == false, delay: the wait it would have needed); in dry-run it returns at
  // once as a grant. For plain threads: never call it where sleeping stalls others (an
  // executor's thread).
  Result<ReserveAnswer> acquire(std::int64_t tokens, std::chrono::nanoseconds maxWait) {
    Result<ReserveAnswer> r = limiter_detail::withRequest<true>(
        key_, params_, options(), tokens, maxWait,
        [&](auto request, std::optional<Error> bad) -> Result<ReserveAnswer> {
          if (bad) return std::move(*bad);
          return asReserve(invoker_.invoke(key_, request));
        });
    if (!options().dryRun && limiter_detail::mustWait(r))
      std::this_thread::sleep_for(std::chrono::nanoseconds(r->delay));
    return policy_->apply(std::move(r));
  }

  // acquire without blocking: completion signature void(Result<ReserveAnswer>), completing once
  // the reservation's delay has passed (at once for a refusal, an error, or in dry-run). The
  // delay is waited on an asio::steady_timer on the handler's associated executor when that is an
  // I/O executor (else the system executor's), never on a partition's thread, and the handler
  // runs on its executor (invariant 9). The delay counts from when the answer arrived: at
  // least the node's delay.
  template <class CompletionToken>
  auto acquireAsync(std::int64_t tokens, std::chrono::nanoseconds maxWait,
                    CompletionToken&& token) {
    return limiter_detail::withRequest<true>(
        key_, params_, options(), tokens, maxWait, [&](auto request, std::optional<Error> bad) {
          return limiter_detail::initiateReserve(invoker_, policy_, key_, std::move(request),
                                                 std::move(bad),
                                                 std::forward<CompletionToken>(token));
        });
  }

  const std::string& key() const noexcept { return key_; }
  const BucketParams& params() const noexcept { return params_; }
  const LimiterOptions& options() const noexcept { return policy_->options(); }
  // What this limiter has answered so far (include/ingrid/limiter_policy.h).
  LimiterCounts counts() const noexcept { return policy_->counts(); }

 private:
  Invoker& invoker_;
  std::string key_;
  BucketParams params_;
  // Shared with pending completions, which count into it.
  std::shared_ptr<LimiterPolicy> policy_;
};

}  // namespace ingrid
