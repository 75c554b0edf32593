// TokenBucketReserve (docs/token-bucket.md "Reservations"): Guava's reserve with a bound on the
// wait, on the token bucket's own state, mixed with acquires.
#include <ingrid/processors/token_bucket.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ingrid/processors/limiter_support.h>

#include "processors/limiter_store.h"
#include "processors/reference_bucket.h"

namespace Catch {
template <>
struct StringMaker<ingrid::ReserveAnswer> {
  static std::string convert(const ingrid::ReserveAnswer& a) {
    std::ostringstream out;
    out << "{granted=" << a.granted << ", delay=" << a.delay << ", remaining=" << a.remaining
        << "}";
    return out.str();
  }
};
}  // namespace Catch

namespace ingrid {
namespace {

using testing::failureText;
using testing::LimiterStore;
using testing::ReferenceBucket;
using Change = MutableEntry::Change;

static_assert(EntryProcessor<TokenBucketReserve>);
static_assert(EntryProcessor<TokenBucketBatchReserve>);

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr Nanos kMs = 1'000'000;
constexpr Nanos kS = kNanosPerSecond;
const BucketParams kTenPerSecond = BucketParams::perPeriod(10, kS);

ReserveAnswer reserve(LimiterStore& s, const BucketParams& p, std::int64_t n, Nanos maxWait,
                      Nanos now) {
  return s.invoke(TokenBucketReserve{p, n, maxWait}, now);
}

TEST_CASE("reserve: invalid arguments name the field and the value",
          "[processors][token_bucket][reserve]") {
  CHECK(failureText(TokenBucketReserve{BucketParams{0, 1, 1, {}}, 1, 0}) ==
        "capacity must be > 0, got 0");
  CHECK(failureText(TokenBucketReserve{kTenPerSecond, 0, 0}) == "tokens must be > 0, got 0");
  CHECK(failureText(TokenBucketReserve{kTenPerSecond, 1, -1}) == "maxWait must be >= 0, got -1");
  CHECK(failureText(TokenBucketBatchReserve{kTenPerSecond, {1, 0}, 0}) ==
        "tokens[1] must be > 0, got 0");
  CHECK(failureText(TokenBucketBatchReserve{kTenPerSecond, {1}, -5}) ==
        "maxWait must be >= 0, got -5");
}

TEST_CASE("reserve: the worked example of docs/token-bucket.md",
          "[processors][token_bucket][reserve]") {
  LimiterStore s;
  CHECK(reserve(s, kTenPerSecond, 10, kS, 0) == ReserveAnswer{true, 0, 0});
  CHECK(reserve(s, kTenPerSecond, 5, kS, 0) == ReserveAnswer{true, 500 * kMs, 0});
  CHECK(s.state<BucketState>() == BucketState{0, 0, 500 * kMs});
  CHECK(reserve(s, kTenPerSecond, 6, kS, 100 * kMs) == ReserveAnswer{true, kS, 0});
  CHECK(s.state<BucketState>().lastRefill == 1100 * kMs);
  CHECK(s.entry->expiresAt == 2100 * kMs);  // in debt until 1.1 s, then 1 s to fill
  CHECK(s.invoke(TokenBucketAcquire{kTenPerSecond, 1}, 200 * kMs) == AcquireAnswer{false, 0, kS});
  CHECK(reserve(s, kTenPerSecond, 1, 500 * kMs, 200 * kMs) == ReserveAnswer{false, kS, 0});
  CHECK(s.lastChange == Change::kNone);
  CHECK(reserve(s, kTenPerSecond, 11, kNever, 200 * kMs) == ReserveAnswer{false, kNever, 0});
  // Once the debt is paid the bucket refills as ever.
  CHECK(s.invoke(TokenBucketAcquire{kTenPerSecond, 3}, 1400 * kMs) == AcquireAnswer{true, 0, 0});
}

TEST_CASE("reserve: a maxWait of 0 grants what an acquire grants",
          "[processors][token_bucket][reserve]") {
  LimiterStore a, r;
  std::mt19937_64 rng(3);
  Nanos now = 1'700'000'000 * kS;
  for (int i = 0; i < 3000; ++i) {
    now += std::uniform_int_distribution<Nanos>(0, 300 * kMs)(rng);
    const std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, 11)(rng);
    const AcquireAnswer acquired = a.invoke(TokenBucketAcquire{kTenPerSecond, n}, now);
    const ReserveAnswer reserved = reserve(r, kTenPerSecond, n, 0, now);
    INFO("step " << i);
    REQUIRE(acquired.granted == reserved.granted);
    REQUIRE(acquired.remaining == reserved.remaining);
    REQUIRE((acquired.granted || acquired.waitNanos == reserved.delay));
    REQUIRE(a.entry->value == r.entry->value);
  }
}

// Acquires and reservations mixed, against the reference; the debt never passes now + maxWait.
void runAgainstReference(const BucketParams& p, Nanos maxWait, bool jitter, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<Nanos> forward(0, p.refillPeriod);
  std::uniform_int_distribution<Nanos> backward(0, p.refillPeriod / 2);
  std::uniform_int_distribution<std::int64_t> want(1, p.capacity + 1);
  std::uniform_int_distribution<int> percent(0, 99);
  LimiterStore store;
  ReferenceBucket reference(p);
  Nanos now = 1'700'000'000 * kS;
  Nanos latest = now;
  for (int step = 0; step < 20000; ++step) {
    now += jitter && percent(rng) < 10 ? -backward(rng) : forward(rng);
    latest = std::max(latest, now);
    const std::int64_t n = want(rng);
    const bool reserving = percent(rng) < 60;
    INFO("step " << step << " now " << now << " want " << n << " reserve " << reserving);
    bool granted = false;
    if (reserving) {
      const ReserveAnswer expected = reference.reserve(n, maxWait, now);
      REQUIRE(reserve(store, p, n, maxWait, now) == expected);
      granted = expected.granted;
      if (granted) REQUIRE(expected.delay <= maxWait);
    } else {
      const AcquireAnswer expected = reference.acquire(n, now);
      REQUIRE(store.invoke(TokenBucketAcquire{p, n}, now) == expected);
      granted = expected.granted;
    }
    if (store.lastChange == Change::kPut) {
      const auto s = store.state<BucketState>();
      REQUIRE(s.tokens >= 0);
      REQUIRE((s.remainder >= 0 && s.remainder < p.refillPeriod));
      REQUIRE(limiter::int128{s.tokens} * p.refillPeriod + s.remainder == reference.level());
      REQUIRE(store.entry->expiresAt == reference.expiresAt());
      // The debt: at most maxWait past the latest clock seen (a clock behind may see more).
      if (granted && reserving) REQUIRE(s.lastRefill <= limiter::int128{latest} + maxWait);
    } else {
      REQUIRE_FALSE(granted);
    }
  }
}

TEST_CASE("reserve: matches the reference, mixed with acquires",
          "[processors][token_bucket][reserve]") {
  const std::vector<BucketParams> params = {
      kTenPerSecond,
      BucketParams{20, 7, 1000, std::nullopt},
      BucketParams{5, 3, 10 * kS, std::nullopt},
      BucketParams{1, 1, 1, std::nullopt},
      BucketParams{100, 1, 3, 0},
      BucketParams{3, 1'000'000'007, 999, std::nullopt},
  };
  std::uint64_t seed = 808;
  for (const BucketParams& p : params) {
    for (Nanos maxWait : {Nanos{0}, p.refillPeriod / 2, 3 * p.refillPeriod, kNever}) {
      INFO("capacity " << p.capacity << " refill " << p.refillTokens << " per " << p.refillPeriod
                       << " maxWait " << maxWait);
      runAgainstReference(p, maxWait, false, ++seed);
      runAgainstReference(p, maxWait, true, ++seed);
    }
  }
}

TEST_CASE("reserve: extremes", "[processors][token_bucket][reserve]") {
  SECTION("a wait past the end of int64 time is refused") {
    LimiterStore s;
    const BucketParams slow{2, 1, kMax, 0};  // 1 token per INT64_MAX ns, starts empty
    CHECK(reserve(s, slow, 1, kNever, kMax - 10) == ReserveAnswer{false, kNever, 0});
    LimiterStore early;
    CHECK(reserve(early, slow, 1, kNever, -kMax) == ReserveAnswer{true, kMax, 0});
    CHECK(early.state<BucketState>().lastRefill == 0);
    CHECK(reserve(early, slow, 1, kNever, -kMax) == ReserveAnswer{false, kNever, 0});
  }
  SECTION("a capacity of INT64_MAX, 1 ns periods") {
    LimiterStore s;
    const BucketParams huge{kMax, kMax, 1, 0};
    CHECK(reserve(s, huge, kMax, 0, 0) == ReserveAnswer{false, 1, 0});
    CHECK(reserve(s, huge, kMax, 1, 0) == ReserveAnswer{true, 1, 0});
    CHECK(reserve(s, huge, kMax, 1, 0) == ReserveAnswer{false, 2, 0});  // queued behind it
    CHECK(s.state<BucketState>().lastRefill == 1);
  }
  SECTION("10-year periods") {
    constexpr Nanos kTenYears = 315'360'000'000'000'000;
    LimiterStore s;
    const BucketParams p{3, 3, kTenYears, 0};
    CHECK(reserve(s, p, 3, kTenYears, 0) == ReserveAnswer{true, kTenYears, 0});
    CHECK(reserve(s, p, 3, kTenYears, 0) == ReserveAnswer{false, 2 * kTenYears, 0});
  }
}

TEST_CASE("reserve: a batch equals its reservations in order",
          "[processors][token_bucket][reserve]") {
  std::mt19937_64 rng(12);
  LimiterStore batched, single;
  Nanos now = 1'700'000'000 * kS;
  for (int step = 0; step < 2000; ++step) {
    now += std::uniform_int_distribution<Nanos>(0, 400 * kMs)(rng);
    TokenBucketBatchReserve batch{kTenPerSecond, {}, 700 * kMs};
    std::vector<ReserveAnswer> expected;
    const auto count = std::uniform_int_distribution<int>(1, 6)(rng);
    for (int i = 0; i < count; ++i) {
      batch.tokens.push_back(std::uniform_int_distribution<std::int64_t>(1, 11)(rng));
      expected.push_back(reserve(single, kTenPerSecond, batch.tokens.back(), 700 * kMs, now));
    }
    INFO("step " << step);
    REQUIRE(batched.invoke(batch, now) == expected);
    REQUIRE(batched.entry->value == single.entry->value);
    REQUIRE(batched.entry->expiresAt == single.entry->expiresAt);
  }
  TokenBucketBatchReserve tooLong{kTenPerSecond, std::vector<std::int64_t>(65537, 1), 0};
  TokenBucketBatchReserve decoded;
  CHECK_THROWS_AS(decodeInto(encode(tooLong), decoded), std::length_error);
  const TokenBucketBatchReserve round{kTenPerSecond, {1, 2}, 33};
  decodeInto(encode(round), decoded);
  CHECK((decoded.tokens == round.tokens && decoded.maxWait == 33));
  CHECK(decode<ReserveAnswer>(encode(ReserveAnswer{true, kNever, 4})) ==
        ReserveAnswer{true, kNever, 4});
}

}  // namespace
}  // namespace ingrid
