// The token bucket: parameters, state, the pure refill math, and the two processors.
//
// docs/token-bucket.md is the specification (state, units, refill formula, rounding, overflow
// bounds, a clock stepping backwards); this header is its code. All arithmetic is integer:
// tokens are int64, time is int64 nanoseconds, intermediate products are 128-bit, and no
// operation overflows for any valid parameters and any pair of timestamps.
//
// Thread safety: pure value types and functions. The processors are pure (entry, args, now).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cereal/types/optional.hpp>
#include <cereal/types/vector.hpp>

#include <ingrid/entry.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>

namespace ingrid {

// What a request says a bucket is. Sent with every request; a bucket is created on first use.
struct BucketParams {
  // Maximum tokens the bucket holds. REQUIRES: > 0.
  std::int64_t capacity = 0;
  // Tokens added every refillPeriod, continuously (greedy refill). REQUIRES: > 0.
  std::int64_t refillTokens = 0;
  // Nanoseconds in which refillTokens are added. REQUIRES: > 0.
  Nanos refillPeriod = 0;
  // Tokens of a newly created bucket. Default (nullopt): capacity. REQUIRES: 0 <= it <= capacity.
  std::optional<std::int64_t> initialTokens;

  // `capacity` tokens, refilled at `capacity` per `period`: "capacity per period".
  static BucketParams perPeriod(std::int64_t capacity, Nanos period) {
    return BucketParams{capacity, capacity, period, std::nullopt};
  }

  // nullopt if the parameters are usable, else the reason they are not ("capacity must be > 0,
  // got 0"). The processors run it and fail with Errc::invalid_argument on a reason.
  std::optional<std::string> invalidReason() const;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(capacity, refillTokens, refillPeriod, initialTokens);
  }
  friend bool operator==(const BucketParams&, const BucketParams&) = default;
};

// A bucket's state, as stored in its entry.
struct BucketState {
  // Whole tokens available, 0 <= tokens <= capacity.
  std::int64_t tokens = 0;
  // Fraction of a token accumulated but not yet whole, in units of 1/refillPeriod token:
  // 0 <= remainder < refillPeriod. Carried so that refill never loses time to rounding.
  std::int64_t remainder = 0;
  // Clock time up to which refill has been accounted. Never moves backwards.
  Nanos lastRefill = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(tokens, remainder, lastRefill);
  }
  friend bool operator==(const BucketState&, const BucketState&) = default;
};

// The answer to one acquire. A denial is a normal answer, not an error.
struct AcquireAnswer {
  bool granted = false;
  // Tokens left in the bucket after this acquire.
  std::int64_t remaining = 0;
  // If denied: nanoseconds until the wanted tokens will be available (kNever if the want exceeds
  // the capacity, so it can never be granted). 0 if granted.
  Nanos waitNanos = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(granted, remaining, waitNanos);
  }
  friend bool operator==(const AcquireAnswer&, const AcquireAnswer&) = default;
};

// The answer to one reservation (docs/token-bucket.md "Reservations"). A refusal is an answer.
struct ReserveAnswer {
  bool granted = false;
  // Granted: nanoseconds to wait before using the tokens (0: at once). Refused: the wait the
  // reservation would have needed, more than its maxWait (kNever if tokens > capacity).
  Nanos delay = 0;
  // Tokens left after this request, at max(now, the bucket's lastRefill).
  std::int64_t remaining = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(granted, delay, remaining);
  }
  friend bool operator==(const ReserveAnswer&, const ReserveAnswer&) = default;
};

// The pure math of docs/token-bucket.md. Every function REQUIRES valid params (no
// invalidReason()) and a state that satisfies BucketState's invariants for them.
namespace token_bucket {

// A new bucket at `now`: initialTokens (default capacity), no remainder.
BucketState create(const BucketParams& params, Nanos now) noexcept;
// Adds the tokens accrued from state.lastRefill to now, capped at capacity. A `now` earlier than
// lastRefill adds nothing and leaves lastRefill where it is. Also clamps tokens to capacity when
// the capacity was lowered since the state was written.
void refill(BucketState& state, const BucketParams& params, Nanos now) noexcept;
// Nanoseconds from state.lastRefill until `tokens` would be available (0 if they are now);
// kNever if tokens > capacity. Saturates at kNever.
Nanos nanosUntil(const BucketState& state, const BucketParams& params,
                 std::int64_t tokens) noexcept;
// Takes `tokens` if available. REQUIRES: refill() was called for the current time; tokens > 0.
AcquireAnswer tryTake(BucketState& state, const BucketParams& params, std::int64_t tokens) noexcept;
// Reserves `tokens` if they exist by now + maxWait (docs/token-bucket.md "Reservations"): the
// state moves to the instant they exist. REQUIRES: refill() was called for `now`; tokens > 0;
// maxWait >= 0.
ReserveAnswer reserve(BucketState& state, const BucketParams& params, std::int64_t tokens,
                      Nanos maxWait, Nanos now) noexcept;

}  // namespace token_bucket

struct TokenBucketBatchAcquire;

// Takes `tokens` tokens from the bucket at the entry's key if it has them.
struct TokenBucketAcquire {
  static constexpr std::string_view kName = "ingrid.TokenBucketAcquire";
  using Result = AcquireAnswer;
  // The batch form, for include/ingrid/batcher.h (BatchableProcessor).
  using Batch = TokenBucketBatchAcquire;

  BucketParams bucket;
  // Tokens wanted. REQUIRES: > 0.
  std::int64_t tokens = 1;

  Result process(MutableEntry& entry, Nanos now) const;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(bucket, tokens);
  }

  // Whether `other` may share a batch with `first`: only acquires on the same BucketParams.
  static bool joinable(const TokenBucketAcquire& first, const TokenBucketAcquire& other);
  // One batch of the items' wants, in order. REQUIRES: items non-empty, all joinable with the
  // first.
  static TokenBucketBatchAcquire batch(std::vector<TokenBucketAcquire> items);
};

// Several acquires on one bucket, answered in order; reads the state once and writes it once.
// Equivalent to running TokenBucketAcquire for each want in order at the same `now`.
struct TokenBucketBatchAcquire {
  static constexpr std::string_view kName = "ingrid.TokenBucketBatchAcquire";
  using Result = std::vector<AcquireAnswer>;
  // Most wants one batch may carry; a longer one is refused as invalid_argument.
  static constexpr std::size_t kMaxWants = 65536;

  BucketParams bucket;
  // Tokens wanted by each acquire, in order. REQUIRES: each > 0; 1..kMaxWants of them.
  std::vector<std::int64_t> tokens;

  Result process(MutableEntry& entry, Nanos now) const;
  template <class Archive>
  void save(Archive& ar) const {
    ar(bucket, tokens);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(bucket);
    tokens.resize(loadBoundedSize(ar, kMaxWants, "TokenBucketBatchAcquire.tokens"));
    for (auto& t : tokens) ar(t);
  }
};

struct TokenBucketBatchReserve;

// Takes `tokens` now, before they exist if need be, if they will exist within maxWait; answers
// how long to wait before using them. Mixes with TokenBucketAcquire on one bucket.
struct TokenBucketReserve {
  static constexpr std::string_view kName = "ingrid.TokenBucketReserve";
  using Result = ReserveAnswer;
  using Batch = TokenBucketBatchReserve;

  BucketParams bucket;
  // Tokens wanted. REQUIRES: > 0.
  std::int64_t tokens = 1;
  // The longest wait accepted, in nanoseconds; a longer one is refused. REQUIRES: >= 0.
  Nanos maxWait = 0;

  Result process(MutableEntry& entry, Nanos now) const;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(bucket, tokens, maxWait);
  }
  static bool joinable(const TokenBucketReserve& first, const TokenBucketReserve& other) {
    return first.bucket == other.bucket && first.maxWait == other.maxWait;
  }
  static TokenBucketBatchReserve batch(std::vector<TokenBucketReserve> items);
};

// Several reservations on one bucket with one maxWait, in order at the same `now`; read once,
// written once.
struct TokenBucketBatchReserve {
  static constexpr std::string_view kName = "ingrid.TokenBucketBatchReserve";
  using Result = std::vector<ReserveAnswer>;
  static constexpr std::size_t kMaxWants = 65536;

  BucketParams bucket;
  // REQUIRES: each > 0; 1..kMaxWants of them.
  std::vector<std::int64_t> tokens;
  // REQUIRES: >= 0.
  Nanos maxWait = 0;

  Result process(MutableEntry& entry, Nanos now) const;
  template <class Archive>
  void save(Archive& ar) const {
    ar(bucket, tokens, maxWait);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(bucket);
    tokens.resize(loadBoundedSize(ar, kMaxWants, "TokenBucketBatchReserve.tokens"));
    for (auto& t : tokens) ar(t);
    ar(maxWait);
  }
};

inline TokenBucketBatchReserve TokenBucketReserve::batch(std::vector<TokenBucketReserve> items) {
  TokenBucketBatchReserve out;
  if (!items.empty()) {
    out.bucket = items.front().bucket;
    out.maxWait = items.front().maxWait;
  }
  out.tokens.reserve(items.size());
  for (const auto& item : items) out.tokens.push_back(item.tokens);
  return out;
}

inline bool TokenBucketAcquire::joinable(const TokenBucketAcquire& first,
                                         const TokenBucketAcquire& other) {
  return first.bucket == other.bucket;
}

inline TokenBucketBatchAcquire TokenBucketAcquire::batch(std::vector<TokenBucketAcquire> items) {
  TokenBucketBatchAcquire out;
  if (!items.empty()) out.bucket = items.front().bucket;
  out.tokens.reserve(items.size());
  for (const auto& item : items) out.tokens.push_back(item.tokens);
  return out;
}

}  // namespace ingrid
