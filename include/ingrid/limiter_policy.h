// LimiterPolicy: what a rate-limiter facade does with an answer before its caller sees it, and
// the counts of what it did. Two options users ask for:
//   dry-run (shadow) mode: decide and report, never deny. A denial reaches the caller as a grant
//     that still carries the limiter's wait (granted == true, waitNanos / delay > 0: what it
//     would have been), so the limiter can be measured on live traffic before it is enforced;
//     a reservation is never waited for. Counted in shadowDenied.
//   when the cluster cannot answer in time (the errors cannotAnswer() lists: the deadline passed,
//     no member reachable, the partition unavailable or without quorum, an indeterminate write,
//     the client stopping): report the error (default), grant (fail-open) or deny (fail-closed).
//     Bad use (an invalid argument or key, an unknown processor) is always reported.
// And one option of the limiter itself, warm-up (docs/warm-up.md), which RateLimiter reads.
//
// Thread safety: apply() and counts() are safe from any thread at once (relaxed atomic counters).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include <ingrid/error.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/result.h>

namespace ingrid {

enum class OnUnavailable : std::uint8_t {
  kReportError,  // the caller gets the Error
  kGrant,        // fail-open: granted (waitNanos 0, remaining 0)
  kDeny,         // fail-closed: denied (waitNanos 0: unknown, remaining 0)
};

// Guava's SmoothWarmingUp on a token bucket's rate (docs/warm-up.md).
struct WarmupOption {
  // Guava's warmupPeriod: how long a cold limiter used at full speed takes to reach the stable
  // rate. REQUIRES: > 0.
  std::chrono::nanoseconds period{0};
  // A cold permit costs coldFactor stable intervals. REQUIRES: 1..1000. Default: 3 (Guava's).
  std::int64_t coldFactor = 3;
};

struct LimiterOptions {
  // Never deny: report denials as grants (see above). Default: false.
  bool dryRun = false;
  // What a call the cluster could not answer returns. Default: kReportError.
  OnUnavailable onUnavailable = OnUnavailable::kReportError;
  // Warm-up: the limiter paces permits at the bucket's refill rate (refillTokens per
  // refillPeriod), slower after an idle period, instead of granting from a bucket: a
  // WarmupAcquire on the key, not a TokenBucketAcquire (a warm-up limiter has no burst, so the
  // bucket's capacity and initialTokens are unused). Default: none.
  std::optional<WarmupOption> warmup = std::nullopt;
};

// What a facade answered, each call counted once.
struct LimiterCounts {
  std::uint64_t granted = 0;       // granted by the limiter
  std::uint64_t denied = 0;        // denied by the limiter and reported as denied
  std::uint64_t shadowDenied = 0;  // denied by the limiter, reported as granted (dry-run)
  std::uint64_t failedOpen = 0;    // the cluster could not answer: granted (kGrant)
  std::uint64_t failedClosed = 0;  // the cluster could not answer: denied (kDeny)
  std::uint64_t errors = 0;        // reported as an Error (bad use, or kReportError)
  friend bool operator==(const LimiterCounts&, const LimiterCounts&) = default;
};

// Whether `e` means the cluster could not answer (as opposed to bad use).
inline bool cannotAnswer(const Error& e) {
  for (const Errc c :
       {Errc::timeout, Errc::shutting_down, Errc::not_running, Errc::overloaded, Errc::not_owner,
        Errc::unavailable, Errc::unreachable, Errc::indeterminate, Errc::no_quorum}) {
    if (e == c) return true;
  }
  return false;
}

class LimiterPolicy {
 public:
  explicit LimiterPolicy(LimiterOptions options = {}) : options_(options) {}

  const LimiterOptions& options() const noexcept { return options_; }

  Result<AcquireAnswer> apply(Result<AcquireAnswer> r) {
    if (!r) return onError(std::move(r).error(), AcquireAnswer{true, 0, 0}, AcquireAnswer{});
    return decided(std::move(*r));
  }
  Result<ReserveAnswer> apply(Result<ReserveAnswer> r) {
    if (!r) return onError(std::move(r).error(), ReserveAnswer{true, 0, 0}, ReserveAnswer{});
    return decided(std::move(*r));
  }

  LimiterCounts counts() const noexcept {
    return LimiterCounts{granted_.load(kRelaxed),      denied_.load(kRelaxed),
                         shadowDenied_.load(kRelaxed), failedOpen_.load(kRelaxed),
                         failedClosed_.load(kRelaxed), errors_.load(kRelaxed)};
  }

 private:
  static constexpr auto kRelaxed = std::memory_order_relaxed;

  template <class Answer>
  Result<Answer> decided(Answer a) {
    if (a.granted) {
      granted_.fetch_add(1, kRelaxed);
    } else if (options_.dryRun) {
      shadowDenied_.fetch_add(1, kRelaxed);
      a.granted = true;
    } else {
      denied_.fetch_add(1, kRelaxed);
    }
    return a;
  }

  template <class Answer>
  Result<Answer> onError(Error e, Answer open, Answer closed) {
    if (cannotAnswer(e) && options_.onUnavailable == OnUnavailable::kGrant) {
      failedOpen_.fetch_add(1, kRelaxed);
      return open;
    }
    if (cannotAnswer(e) && options_.onUnavailable == OnUnavailable::kDeny) {
      failedClosed_.fetch_add(1, kRelaxed);
      return closed;
    }
    errors_.fetch_add(1, kRelaxed);
    return e;
  }

  const LimiterOptions options_;
  std::atomic<std::uint64_t> granted_{0}, denied_{0}, shadowDenied_{0}, failedOpen_{0},
      failedClosed_{0}, errors_{0};
};

}  // namespace ingrid
