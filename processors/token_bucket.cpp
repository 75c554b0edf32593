#include <ingrid/processors/token_bucket.h>

#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>

#include <ingrid/processors/limiter_support.h>

namespace ingrid {

// Signed 128-bit intermediates (docs/token-bucket.md "Overflow bounds").
using limiter::int128;
using limiter::kMaxInt64;

namespace {

// The largest refill accumulator: elapsed <= 2^64 - 1, refillTokens <= 2^63 - 1 and
// remainder <= refillPeriod - 1 <= 2^63 - 2. Overflow would make this not a constant expression.
constexpr int128 kMaxElapsed = (int128{1} << 64) - 1;
static_assert(kMaxElapsed * kMaxInt64 + (kMaxInt64 - 1) > 0, "refill accumulator overflows");
// The largest nanosUntil numerator: deficit * refillPeriod + refillTokens - 1.
static_assert(int128{kMaxInt64} * kMaxInt64 + kMaxInt64 > 0, "nanosUntil overflows");

Nanos saturate(int128 nanos) noexcept {
  return nanos >= kMaxInt64 ? kNever : static_cast<Nanos>(nanos);
}

void checkParams(const BucketParams& params) {
  if (auto reason = params.invalidReason()) throwInvalidArgument(*reason);
}

void checkWants(const std::vector<std::int64_t>& tokens, std::size_t max) {
  if (tokens.empty()) throwInvalidArgument("tokens must hold at least one want");
  if (tokens.size() > max) {
    throwInvalidArgument("tokens has " + std::to_string(tokens.size()) +
                         " wants, more than the limit of " + std::to_string(max));
  }
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] <= 0) {
      throwInvalidArgument("tokens[" + std::to_string(i) + "] must be > 0, got " +
                           std::to_string(tokens[i]));
    }
  }
}

void checkMaxWait(Nanos maxWait) {
  if (maxWait < 0) throwInvalidArgument("maxWait must be >= 0, got " + std::to_string(maxWait));
}

// The bucket at the entry, or nullopt if there is none. Fails the processor on bytes that are
// not a BucketState or a state no valid bucket can be in.
std::optional<BucketState> readState(const MutableEntry& entry) {
  if (!entry.exists()) return std::nullopt;
  BucketState state;
  try {
    state = decode<BucketState>(entry.value());
  } catch (const std::exception& e) {
    throw ProcessorError(Errc::processor_failed,
                         std::string("entry does not hold a token bucket: ") + e.what());
  }
  if (state.tokens < 0 || state.remainder < 0) {
    throw ProcessorError(Errc::processor_failed,
                         "entry does not hold a token bucket: negative tokens " +
                             std::to_string(state.tokens) + " or remainder " +
                             std::to_string(state.remainder));
  }
  return state;
}

// A denial's wait counted from `now` rather than from lastRefill, which is later than `now`
// when the clock is behind the one that last wrote the bucket.
void waitFromNow(AcquireAnswer& answer, const BucketState& state, Nanos now) noexcept {
  if (answer.granted || state.lastRefill <= now) return;
  answer.waitNanos = saturate(int128{answer.waitNanos} + state.lastRefill - now);
}

// Stores the state; the entry expires when the idle bucket would be full.
void writeState(MutableEntry& entry, const BucketState& state, const BucketParams& params) {
  entry.setValue(encode(state));
  const Nanos untilFull = token_bucket::nanosUntil(state, params, params.capacity);
  entry.setExpiresAt(untilFull == kNever ? kNever : saturate(int128{state.lastRefill} + untilFull));
}

}  // namespace

std::optional<std::string> BucketParams::invalidReason() const {
  if (capacity <= 0) return "capacity must be > 0, got " + std::to_string(capacity);
  if (refillTokens <= 0) return "refillTokens must be > 0, got " + std::to_string(refillTokens);
  if (refillPeriod <= 0) return "refillPeriod must be > 0, got " + std::to_string(refillPeriod);
  if (initialTokens && (*initialTokens < 0 || *initialTokens > capacity)) {
    return "initialTokens must be in [0, capacity=" + std::to_string(capacity) + "], got " +
           std::to_string(*initialTokens);
  }
  return std::nullopt;
}

namespace token_bucket {

BucketState create(const BucketParams& params, Nanos now) noexcept {
  return BucketState{params.initialTokens.value_or(params.capacity), 0, now};
}

void refill(BucketState& state, const BucketParams& params, Nanos now) noexcept {
  // The parameters may have changed since the state was written; both fixes only lose tokens.
  if (state.tokens > params.capacity) {
    state.tokens = params.capacity;
    state.remainder = 0;
  }
  if (state.remainder >= params.refillPeriod) state.remainder = 0;
  if (now <= state.lastRefill) return;  // a clock behind lastRefill delays refill, never adds

  const int128 elapsed = int128{now} - state.lastRefill;
  const int128 acc = elapsed * params.refillTokens + state.remainder;
  const int128 whole = acc / params.refillPeriod;
  if (whole >= params.capacity - state.tokens) {
    state.tokens = params.capacity;
    state.remainder = 0;
  } else {
    state.tokens += static_cast<std::int64_t>(whole);
    state.remainder = static_cast<std::int64_t>(acc % params.refillPeriod);
  }
  state.lastRefill = now;
}

Nanos nanosUntil(const BucketState& state, const BucketParams& params,
                 std::int64_t tokens) noexcept {
  if (tokens > params.capacity) return kNever;
  if (tokens <= state.tokens) return 0;
  const int128 need = int128{tokens - state.tokens} * params.refillPeriod - state.remainder;
  const int128 nanos = (need + params.refillTokens - 1) / params.refillTokens;
  return nanos > kMaxInt64 ? kNever : static_cast<Nanos>(nanos);
}

AcquireAnswer tryTake(BucketState& state, const BucketParams& params,
                      std::int64_t tokens) noexcept {
  if (tokens <= state.tokens) {
    state.tokens -= tokens;
    return AcquireAnswer{true, state.tokens, 0};
  }
  return AcquireAnswer{false, state.tokens, nanosUntil(state, params, tokens)};
}

ReserveAnswer reserve(BucketState& state, const BucketParams& params, std::int64_t tokens,
                      Nanos maxWait, Nanos now) noexcept {
  if (tokens > params.capacity) return ReserveAnswer{false, kNever, state.tokens};
  if (tokens <= state.tokens) {
    state.tokens -= tokens;
    return ReserveAnswer{true, 0, state.tokens};
  }
  const int128 ahead = state.lastRefill > now ? int128{state.lastRefill} - now : 0;
  const int128 wait = ahead + nanosUntil(state, params, tokens);
  if (int128{now} + wait > kMaxInt64) return ReserveAnswer{false, kNever, state.tokens};
  if (wait > maxWait) return ReserveAnswer{false, saturate(wait), state.tokens};
  refill(state, params, static_cast<Nanos>(now + wait));
  state.tokens -= tokens;  // refill() to that instant yields at least `tokens`
  return ReserveAnswer{true, static_cast<Nanos>(wait), state.tokens};
}

}  // namespace token_bucket

TokenBucketAcquire::Result TokenBucketAcquire::process(MutableEntry& entry, Nanos now) const {
  checkParams(bucket);
  if (tokens <= 0) throwInvalidArgument("tokens must be > 0, got " + std::to_string(tokens));

  const std::optional<BucketState> stored = readState(entry);
  BucketState state = stored.value_or(token_bucket::create(bucket, now));
  token_bucket::refill(state, bucket, now);
  AcquireAnswer answer = token_bucket::tryTake(state, bucket, tokens);
  waitFromNow(answer, state, now);
  // A denial on an existing bucket changes nothing that a later refill would not redo.
  if (!stored || answer.granted) writeState(entry, state, bucket);
  return answer;
}

TokenBucketBatchAcquire::Result TokenBucketBatchAcquire::process(MutableEntry& entry,
                                                                 Nanos now) const {
  checkParams(bucket);
  checkWants(tokens, kMaxWants);

  const std::optional<BucketState> stored = readState(entry);
  BucketState state = stored.value_or(token_bucket::create(bucket, now));
  token_bucket::refill(state, bucket, now);
  Result answers;
  answers.reserve(tokens.size());
  bool anyGranted = false;
  for (const std::int64_t want : tokens) {
    answers.push_back(token_bucket::tryTake(state, bucket, want));
    waitFromNow(answers.back(), state, now);
    anyGranted = anyGranted || answers.back().granted;
  }
  if (!stored || anyGranted) writeState(entry, state, bucket);
  return answers;
}

TokenBucketReserve::Result TokenBucketReserve::process(MutableEntry& entry, Nanos now) const {
  checkParams(bucket);
  if (tokens <= 0) throwInvalidArgument("tokens must be > 0, got " + std::to_string(tokens));
  checkMaxWait(maxWait);

  const std::optional<BucketState> stored = readState(entry);
  BucketState state = stored.value_or(token_bucket::create(bucket, now));
  token_bucket::refill(state, bucket, now);
  const ReserveAnswer answer = token_bucket::reserve(state, bucket, tokens, maxWait, now);
  if (!stored || answer.granted) writeState(entry, state, bucket);
  return answer;
}

TokenBucketBatchReserve::Result TokenBucketBatchReserve::process(MutableEntry& entry,
                                                                 Nanos now) const {
  checkParams(bucket);
  checkWants(tokens, kMaxWants);
  checkMaxWait(maxWait);

  const std::optional<BucketState> stored = readState(entry);
  BucketState state = stored.value_or(token_bucket::create(bucket, now));
  token_bucket::refill(state, bucket, now);
  Result answers;
  answers.reserve(tokens.size());
  bool anyGranted = false;
  for (const std::int64_t want : tokens) {
    answers.push_back(token_bucket::reserve(state, bucket, want, maxWait, now));
    anyGranted = anyGranted || answers.back().granted;
  }
  if (!stored || anyGranted) writeState(entry, state, bucket);
  return answers;
}

}  // namespace ingrid
