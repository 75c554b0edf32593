// LocalTokenBucket: the token bucket of docs/token-bucket.md in this process only (no cluster),
// exact and lock-free, behind the RateLimiter surface (tryAcquire / tryAcquireAsync).
//
// Same BucketParams, same integer math and same AcquireAnswer as TokenBucketAcquire; the whole
// state is one 128-bit word updated by compare-and-swap (docs/token-bucket.md, "The in-process
// bucket"). The bucket is created, holding initialTokens, when the object is constructed. A clock
// stepping back never grants extra: behind the last grant the bucket only holds less.
//
// Thread safety: every member is safe from any thread, concurrently, without locks. The .cpp
// needs a 16-byte CAS: on x86-64 compile it with -mcx16 (it refuses to build without).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <ingrid/clock.h>
#include <ingrid/complete_now.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/result.h>

namespace ingrid {

class LocalTokenBucket {
 public:
  // A bucket created at clock->now() (default clock: SystemClock). Prefer create(): unusable
  // params (params.invalidReason()) do not abort here, but make every tryAcquire fail with
  // Errc::invalid_argument naming the reason, as RateLimiter does, and available() return 0.
  explicit LocalTokenBucket(BucketParams params, std::shared_ptr<const Clock> clock = nullptr);

  // A bucket, or Errc::invalid_argument naming the first bad field ("capacity must be > 0,
  // got 0").
  static Result<std::unique_ptr<LocalTokenBucket>> create(
      BucketParams params, std::shared_ptr<const Clock> clock = nullptr);

  LocalTokenBucket(const LocalTokenBucket&) = delete;
  LocalTokenBucket& operator=(const LocalTokenBucket&) = delete;

  // Takes `tokens` at clock->now() if the bucket holds them. A denial is an answer (granted ==
  // false, waitNanos until they will be there, kNever if tokens > capacity), not an error.
  // Errc::invalid_argument if tokens <= 0 ("tokens must be > 0, got 0") or params are unusable.
  Result<AcquireAnswer> tryAcquire(std::int64_t tokens = 1);

  // tryAcquire with completion signature void(Result<AcquireAnswer>). The answer is decided when
  // this is called; the completion is posted (completeNow), never run inline.
  template <class CompletionToken>
  auto tryAcquireAsync(std::int64_t tokens, CompletionToken&& token) {
    return completeNow<AcquireAnswer>(tryAcquire(tokens), std::forward<CompletionToken>(token));
  }

  const BucketParams& params() const noexcept { return params_; }

  // Whole tokens the bucket holds at clock->now(), in [0, capacity]. Changes nothing.
  std::int64_t available() const noexcept;

 private:
  __extension__ typedef unsigned __int128 Word;

  BucketParams params_;
  // params_.invalidReason(), computed once.
  std::optional<std::string> invalid_;
  std::shared_ptr<const Clock> clock_;
  // The virtual empty time V, a signed 128-bit count of 1/refillTokens ns stored as its two's
  // complement: at time t the bucket holds min(capacity, floor((t * refillTokens - V) /
  // refillPeriod)) tokens, 0 if negative. Accessed only by 16-byte CAS, which is also how it is
  // read, hence mutable.
  alignas(16) mutable Word state_ = 0;
};

}  // namespace ingrid
