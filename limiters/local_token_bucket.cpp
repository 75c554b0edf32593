#include <ingrid/local_token_bucket.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <ingrid/entry.h>

// The CAS must be one instruction (cmpxchg16b), not a libatomic call that may take a lock. GCC and
// Clang define this macro when they can inline __sync builtins on 16 bytes: with -mcx16 on x86-64.
#if !defined(__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16)
#error "LocalTokenBucket needs a 16-byte compare-and-swap: compile this file with -mcx16 (x86-64)"
#endif

namespace ingrid {
namespace {

__extension__ typedef __int128 int128;
__extension__ typedef unsigned __int128 uint128;

constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();

// Overflow bounds (docs/token-bucket.md, "The in-process bucket"). Every product is an int64 times
// a positive int64: now * refillTokens is in [kMinProduct, kMaxProduct] and capacity *
// refillPeriod, tokens * refillPeriod in [1, kMaxProduct], all of magnitude < 2^126. V, base and
// avail stay in [kMinProduct - kMaxProduct, kMaxProduct]; a wait's numerator is below
// 2 * kMaxProduct - kMinProduct + kMaxInt64 < 2^128, unsigned. Overflow would make these
// static_asserts not constant expressions.
constexpr int128 kMaxProduct = int128{kMaxInt64} * kMaxInt64;
constexpr int128 kMinProduct = int128{std::numeric_limits<std::int64_t>::min()} * kMaxInt64;
static_assert(kMaxProduct < (int128{1} << 126) && kMinProduct > -(int128{1} << 126));
static_assert(kMinProduct - kMaxProduct < 0, "the lowest V overflows");
static_assert(uint128(kMaxProduct) * 2 + uint128(-kMinProduct) + kMaxInt64 > uint128(kMaxProduct),
              "the largest wait numerator overflows");

// The 16-byte CAS; returns the value it found (== expected on success). Full barrier.
template <class Word>
Word compareAndSwap(Word* word, Word expected, Word desired) noexcept {
  return __sync_val_compare_and_swap(word, expected, desired);
}

// The state's lowest point at `nowR` (now * refillTokens): V raised to where a full bucket's would
// be, so credit beyond capacity is dropped. The bucket holds (nowR - base) / refillPeriod tokens.
int128 baseAt(int128 v, const BucketParams& params, int128 nowR) noexcept {
  return std::max(v, nowR - int128{params.capacity} * params.refillPeriod);
}

// Whole tokens in `avail` (units of 1/refillPeriod token); 0 when the clock is behind V.
std::int64_t wholeTokens(int128 avail, const BucketParams& params) noexcept {
  return avail <= 0 ? 0 : static_cast<std::int64_t>(avail / params.refillPeriod);
}

// Nanoseconds until `want` (> avail) is there: ceil((want - avail) / refillTokens), kNever if it
// exceeds int64. want - avail can reach 3 * 2^126 when the clock stepped far back: unsigned.
Nanos waitFor(int128 want, int128 avail, const BucketParams& params) noexcept {
  const uint128 need = uint128(want) - uint128(avail);
  const uint128 nanos = (need + uint128(params.refillTokens) - 1) / uint128(params.refillTokens);
  return nanos >= uint128(kMaxInt64) ? kNever : static_cast<Nanos>(nanos);
}

}  // namespace

LocalTokenBucket::LocalTokenBucket(BucketParams params, std::shared_ptr<const Clock> clock)
    : params_(std::move(params)),
      invalid_(params_.invalidReason()),
      clock_(clock ? std::move(clock) : std::make_shared<SystemClock>()) {
  if (invalid_) return;
  const std::int64_t initial = params_.initialTokens.value_or(params_.capacity);
  const int128 v =
      int128{clock_->now()} * params_.refillTokens - int128{initial} * params_.refillPeriod;
  state_ = static_cast<Word>(v);
}

Result<std::unique_ptr<LocalTokenBucket>> LocalTokenBucket::create(
    BucketParams params, std::shared_ptr<const Clock> clock) {
  if (auto reason = params.invalidReason()) {
    return Error(Errc::invalid_argument, std::move(*reason));
  }
  return std::make_unique<LocalTokenBucket>(std::move(params), std::move(clock));
}

Result<AcquireAnswer> LocalTokenBucket::tryAcquire(std::int64_t tokens) {
  if (invalid_) return Error(Errc::invalid_argument, *invalid_);
  if (tokens <= 0) {
    return Error(Errc::invalid_argument, "tokens must be > 0, got " + std::to_string(tokens));
  }
  if (tokens > params_.capacity) return AcquireAnswer{false, available(), kNever};

  const int128 want = int128{tokens} * params_.refillPeriod;
  Word seen = compareAndSwap<Word>(&state_, 0, 0);  // an atomic load
  while (true) {
    // The clock is read after the state it is applied to: a CAS that succeeds saw no grant after
    // its load, so with a monotonic clock the grants' times increase in the order they land.
    const int128 nowR = int128{clock_->now()} * params_.refillTokens;
    const int128 base = baseAt(static_cast<int128>(seen), params_, nowR);
    const int128 avail = nowR - base;
    if (avail < want) {
      return AcquireAnswer{false, wholeTokens(avail, params_), waitFor(want, avail, params_)};
    }
    const int128 next = base + want;  // <= nowR
    const Word found = compareAndSwap(&state_, seen, static_cast<Word>(next));
    if (found == seen) return AcquireAnswer{true, wholeTokens(nowR - next, params_), 0};
    seen = found;  // another grant landed first; V only grows, so no ABA
  }
}

std::int64_t LocalTokenBucket::available() const noexcept {
  if (invalid_) return 0;
  const auto v = static_cast<int128>(compareAndSwap<Word>(&state_, 0, 0));
  const int128 nowR = int128{clock_->now()} * params_.refillTokens;
  return wholeTokens(nowR - baseAt(v, params_, nowR), params_);
}

}  // namespace ingrid
