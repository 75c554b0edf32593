#include <ingrid/processors/token_bucket.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ingrid/processors/codec.h>

#include "processors/reference_bucket.h"

namespace Catch {
template <>
struct StringMaker<ingrid::AcquireAnswer> {
  static std::string convert(const ingrid::AcquireAnswer& a) {
    std::ostringstream out;
    out << "{granted=" << a.granted << ", remaining=" << a.remaining << ", wait=" << a.waitNanos
        << "}";
    return out.str();
  }
};
template <>
struct StringMaker<ingrid::BucketState> {
  static std::string convert(const ingrid::BucketState& s) {
    std::ostringstream out;
    out << "{tokens=" << s.tokens << ", remainder=" << s.remainder
        << ", lastRefill=" << s.lastRefill << "}";
    return out.str();
  }
};
}  // namespace Catch

namespace ingrid {
namespace {

__extension__ typedef __int128 int128;

static_assert(EntryProcessor<TokenBucketAcquire>);
static_assert(EntryProcessor<TokenBucketBatchAcquire>);

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr Nanos kMs = 1'000'000;
constexpr Nanos kTenYears = 315'360'000'000'000'000;

using Change = MutableEntry::Change;
using testing::ReferenceBucket;

// One key of a partition store: applies a processor's staged change, and hides an entry at and
// after its expiry (kNever: never).
struct Store {
  std::optional<Entry> entry;
  Change lastChange = Change::kNone;

  template <class P>
  typename P::Result invoke(const P& processor, Nanos now) {
    if (entry && entry->expiresAt != kNever && now >= entry->expiresAt) entry.reset();
    std::optional<ingrid::EntryView> current;
    if (entry) current = entry->view();
    MutableEntry view("bucket", current);
    typename P::Result result = processor.process(view, now);
    lastChange = view.change();
    if (lastChange == Change::kPut) entry = view.takeEntry();
    if (lastChange == Change::kRemove) entry.reset();
    return result;
  }
  AcquireAnswer acquire(const BucketParams& params, std::int64_t tokens, Nanos now) {
    return invoke(TokenBucketAcquire{params, tokens}, now);
  }
  BucketState state() const { return decode<BucketState>(entry.value().value); }
};

// The error a processor fails with, or nullopt if it returns.
template <class P>
std::optional<ProcessorError> failure(const P& processor, const Entry* current = nullptr) {
  std::optional<ingrid::EntryView> live;
  if (current != nullptr) live = current->view();
  MutableEntry view("bucket", live);
  try {
    processor.process(view, 0);
  } catch (const ProcessorError& e) {
    return e;
  }
  return std::nullopt;
}

std::string reason(const BucketParams& params) {
  return params.invalidReason().value_or("(valid)");
}

BucketParams tenPerSecond() { return BucketParams::perPeriod(10, kNanosPerSecond); }

std::vector<BucketParams> randomizedParams() {
  return {
      tenPerSecond(),
      BucketParams{20, 7, 1000, std::nullopt},                 // 7 does not divide 1000
      BucketParams{5, 3, 10 * kNanosPerSecond, std::nullopt},  // 3 per 10 s
      BucketParams{1, 1, 1, std::nullopt},
      BucketParams{100, 1, 3, 0},                         // starts empty
      BucketParams{1000, 999, 1'000'003, 37},             // starts part full, prime period
      BucketParams{3, 1'000'000'007, 999, std::nullopt},  // refills faster than 1 per ns
  };
}

// Steps are forward by 0..2 periods, or, with `jitter`, sometimes back by up to one period.
void runAgainstReference(const BucketParams& params, bool jitter, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<Nanos> forward(0, 2 * params.refillPeriod);
  std::uniform_int_distribution<Nanos> backward(0, params.refillPeriod);
  std::uniform_int_distribution<std::int64_t> want(1, params.capacity + 1);
  std::uniform_int_distribution<int> percent(0, 99);
  Store store;
  ReferenceBucket reference(params);
  Nanos now = 1'700'000'000 * kNanosPerSecond;
  for (int step = 0; step < 20000; ++step) {
    now += jitter && percent(rng) < 10 ? -backward(rng) : forward(rng);
    const std::int64_t n = want(rng);
    INFO("step " << step << " now " << now << " want " << n);
    const AcquireAnswer expected = reference.acquire(n, now);
    REQUIRE(store.acquire(params, n, now) == expected);
    if (store.lastChange == Change::kPut) {
      const BucketState s = store.state();
      REQUIRE(s.tokens >= 0);
      REQUIRE((s.remainder >= 0 && s.remainder < params.refillPeriod));
      REQUIRE(int128{s.tokens} * params.refillPeriod + s.remainder == reference.level());
      REQUIRE(store.entry->expiresAt == reference.expiresAt());
    } else {
      REQUIRE(store.lastChange == Change::kNone);
      REQUIRE_FALSE(expected.granted);
    }
  }
}

TEST_CASE("invalidReason names the field and the value", "[processors][token_bucket]") {
  CHECK(reason(tenPerSecond()) == "(valid)");
  CHECK(reason({0, 1, 1, std::nullopt}) == "capacity must be > 0, got 0");
  CHECK(reason({-5, 1, 1, std::nullopt}) == "capacity must be > 0, got -5");
  CHECK(reason({1, 0, 1, std::nullopt}) == "refillTokens must be > 0, got 0");
  CHECK(reason({1, 1, -1, std::nullopt}) == "refillPeriod must be > 0, got -1");
  CHECK(reason({10, 1, 1, -1}) == "initialTokens must be in [0, capacity=10], got -1");
  CHECK(reason({10, 1, 1, 11}) == "initialTokens must be in [0, capacity=10], got 11");
  CHECK(reason({10, 1, 1, 0}) == "(valid)");
  CHECK(reason({10, 1, 1, 10}) == "(valid)");
  CHECK(reason({kMax, kMax, kMax, kMax}) == "(valid)");
}

TEST_CASE("bad arguments fail with invalid_argument and change nothing",
          "[processors][token_bucket]") {
  const BucketParams bad{10, 0, kNanosPerSecond, std::nullopt};
  auto e = failure(TokenBucketAcquire{bad, 1});
  REQUIRE(e);
  CHECK(e->code() == Errc::invalid_argument);
  CHECK(std::string(e->what()) == "refillTokens must be > 0, got 0");

  for (std::int64_t tokens : {std::int64_t{0}, std::int64_t{-3}, kMin}) {
    e = failure(TokenBucketAcquire{tenPerSecond(), tokens});
    REQUIRE(e);
    CHECK(e->code() == Errc::invalid_argument);
    CHECK(std::string(e->what()) == "tokens must be > 0, got " + std::to_string(tokens));
  }

  e = failure(TokenBucketBatchAcquire{bad, {1}});
  REQUIRE(e);
  CHECK(e->code() == Errc::invalid_argument);
  e = failure(TokenBucketBatchAcquire{tenPerSecond(), {}});
  REQUIRE(e);
  CHECK(e->code() == Errc::invalid_argument);
  CHECK(std::string(e->what()) == "tokens must hold at least one want");
  e = failure(TokenBucketBatchAcquire{tenPerSecond(), {1, 2, 0, 4}});
  REQUIRE(e);
  CHECK(e->code() == Errc::invalid_argument);
  CHECK(std::string(e->what()) == "tokens[2] must be > 0, got 0");

  // A failure leaves the existing entry as it was.
  Store store;
  store.acquire(tenPerSecond(), 4, 0);
  const Entry before = *store.entry;
  CHECK_THROWS_AS(store.acquire(tenPerSecond(), 0, kMs), ProcessorError);
  CHECK(store.entry->value == before.value);
  CHECK(store.entry->expiresAt == before.expiresAt);
}

TEST_CASE("an entry that is not a bucket fails with processor_failed",
          "[processors][token_bucket]") {
  const Entry garbage{"not a bucket", kNever};
  auto e = failure(TokenBucketAcquire{tenPerSecond(), 1}, &garbage);
  REQUIRE(e);
  CHECK(e->code() == Errc::processor_failed);
  CHECK(std::string(e->what()).rfind("entry does not hold a token bucket: ", 0) == 0);

  const Entry negative{encode(BucketState{-1, 0, 0}), kNever};
  e = failure(TokenBucketBatchAcquire{tenPerSecond(), {1}}, &negative);
  REQUIRE(e);
  CHECK(e->code() == Errc::processor_failed);
}

TEST_CASE("a want above capacity is denied forever", "[processors][token_bucket]") {
  Store store;
  CHECK(store.acquire(tenPerSecond(), 11, 0) == AcquireAnswer{false, 10, kNever});
  CHECK(store.acquire(tenPerSecond(), kMax, 0) == AcquireAnswer{false, 10, kNever});
  CHECK(store.acquire(tenPerSecond(), 10, 0) == AcquireAnswer{true, 0, 0});
  CHECK(store.acquire(tenPerSecond(), 11, 5 * kNanosPerSecond) == AcquireAnswer{false, 10, kNever});
}

TEST_CASE("the worked example of docs/token-bucket.md", "[processors][token_bucket]") {
  const BucketParams params = tenPerSecond();
  Store store;

  CHECK(store.acquire(params, 6, 300 * kMs) == AcquireAnswer{true, 4, 0});
  CHECK(store.lastChange == Change::kPut);
  CHECK(store.state() == BucketState{4, 0, 300 * kMs});
  CHECK(store.entry->expiresAt == 900 * kMs);

  // 200 ms refill 2 tokens: 4 + 2 - 5 = 1.
  CHECK(store.acquire(params, 5, 500 * kMs) == AcquireAnswer{true, 1, 0});
  CHECK(store.state() == BucketState{1, 0, 500 * kMs});
  CHECK(store.entry->expiresAt == 1400 * kMs);

  // 2 more tokens take 200 ms; a denial on an existing bucket writes nothing.
  const Entry before = *store.entry;
  CHECK(store.acquire(params, 3, 500 * kMs) == AcquireAnswer{false, 1, 200 * kMs});
  CHECK(store.lastChange == Change::kNone);
  CHECK(store.entry->value == before.value);

  // Taking exactly what is left succeeds.
  Store copy = store;
  CHECK(copy.acquire(params, 1, 500 * kMs) == AcquireAnswer{true, 0, 0});

  // Full again at 1.4 s, not a nanosecond earlier.
  CHECK(store.acquire(params, 10, 1400 * kMs - 1) == AcquireAnswer{false, 9, 1});
  CHECK(store.acquire(params, 10, 1400 * kMs) == AcquireAnswer{true, 0, 0});
}

TEST_CASE("refill carries the fraction of a token", "[processors][token_bucket]") {
  const BucketParams params{20, 7, 1000, 0};
  BucketState s = token_bucket::create(params, 0);
  token_bucket::refill(s, params, 100);
  CHECK(s == BucketState{0, 700, 100});
  CHECK(token_bucket::nanosUntil(s, params, 1) == 43);  // (1000 - 700) / 7, rounded up
  token_bucket::refill(s, params, 200);
  CHECK(s == BucketState{1, 400, 200});
  // Refilling in many small steps gives what one step gives.
  BucketState once = token_bucket::create(params, 0);
  BucketState often = once;
  token_bucket::refill(once, params, 2857);
  for (Nanos t = 1; t <= 2857; t += 3) token_bucket::refill(often, params, t);
  token_bucket::refill(often, params, 2857);
  CHECK(once == often);
  CHECK(once == BucketState{19, 999, 2857});  // 2857 * 7 = 19999

  // Reaching capacity drops the fraction: a full bucket accrues nothing.
  BucketState nearlyFull{9, 0, 0};
  token_bucket::refill(nearlyFull, tenPerSecond(), 150 * kMs);  // 1.5 tokens
  CHECK(nearlyFull == BucketState{10, 0, 150 * kMs});
}

TEST_CASE("acquire matches an independent model", "[processors][token_bucket]") {
  std::uint64_t seed = 20240601;
  for (const BucketParams& params : randomizedParams()) {
    INFO("capacity " << params.capacity << " refill " << params.refillTokens << " per "
                     << params.refillPeriod);
    runAgainstReference(params, false, ++seed);  // time moves forward
    runAgainstReference(params, true, ++seed);   // the clock sometimes steps back
  }
}

TEST_CASE("refill at the extremes neither overflows nor goes negative",
          "[processors][token_bucket]") {
  SECTION("capacity and rate INT64_MAX per ns, 2^64 - 1 ns elapsed") {
    const BucketParams params{kMax, kMax, 1, 0};
    BucketState s{0, 0, kMin};
    token_bucket::refill(s, params, kMax);
    CHECK(s == BucketState{kMax, 0, kMax});
    s = BucketState{0, 0, 0};
    token_bucket::refill(s, params, 1);
    CHECK(s == BucketState{kMax, 0, 1});

    Store store;
    store.entry = Entry{encode(BucketState{0, 0, kMin}), kNever};
    CHECK(store.acquire(params, kMax, kMax) == AcquireAnswer{true, 0, 0});
    CHECK(store.entry->expiresAt == kNever);  // full at kMax + 1: saturates
  }
  SECTION("the largest accumulator: (2^64 - 1) * (2^63 - 1) + 2^63 - 2") {
    const BucketParams params{kMax, kMax, kMax, 0};
    BucketState s{0, kMax - 1, kMin};
    token_bucket::refill(s, params, kMax);
    CHECK(s == BucketState{kMax, 0, kMax});
  }
  SECTION("a huge elapsed time that does not fill the bucket") {
    const BucketParams params{kMax, 1, kMax, 0};
    BucketState s{0, kMax - 1, kMin};
    token_bucket::refill(s, params, kMax);
    CHECK(s == BucketState{3, 0, kMax});  // (2^64 - 1) + (2^63 - 2) = 3 * (2^63 - 1)
  }
  SECTION("a 10-year period") {
    const BucketParams slow{kMax - 1, 1, kTenYears, 0};
    BucketState s = token_bucket::create(slow, 0);
    token_bucket::refill(s, slow, kTenYears / 2);
    CHECK(s == BucketState{0, kTenYears / 2, kTenYears / 2});
    CHECK(token_bucket::nanosUntil(s, slow, 1) == kTenYears / 2);
    CHECK(token_bucket::nanosUntil(s, slow, 2) == kTenYears / 2 + kTenYears);
    CHECK(token_bucket::nanosUntil(s, slow, kMax - 1) == kNever);
    token_bucket::refill(s, slow, kTenYears);
    CHECK(s == BucketState{1, 0, kTenYears});

    const BucketParams fast{kMax, kMax, kTenYears, 0};
    s = token_bucket::create(fast, kMin);
    token_bucket::refill(s, fast, kMin + 1);
    CHECK(s == BucketState{kMax / kTenYears, kMax % kTenYears, kMin + 1});
    token_bucket::refill(s, fast, kMax);
    CHECK(s == BucketState{kMax, 0, kMax});

    Store store;
    CHECK(store.acquire(slow, 1, 0) == AcquireAnswer{false, 0, kTenYears});
    CHECK(store.entry->expiresAt == kNever);
    Store early;  // kNever to full stays kNever from a negative lastRefill
    CHECK(early.acquire(slow, 1, kMin) == AcquireAnswer{false, 0, kTenYears});
    CHECK(early.entry->expiresAt == kNever);
  }
  SECTION("nanosUntil saturates at kNever") {
    const BucketParams params{kMax, 1, kMax, 0};
    const BucketState empty{0, 0, 0};
    CHECK(token_bucket::nanosUntil(empty, params, 1) == kMax);
    CHECK(token_bucket::nanosUntil(empty, BucketParams{kMax, 1, kMax - 1, 0}, 1) == kMax - 1);
    CHECK(token_bucket::nanosUntil(empty, params, 2) == kNever);
    CHECK(token_bucket::nanosUntil(empty, params, kMax) == kNever);
    const BucketParams twice{kMax, 2, kMax, 0};
    CHECK(token_bucket::nanosUntil(empty, twice, 1) == kMax / 2 + 1);
    CHECK(token_bucket::nanosUntil(BucketState{0, kMax - 1, 0}, params, 1) == 1);
    CHECK(token_bucket::nanosUntil(BucketState{5, 0, 0}, params, 5) == 0);
  }
}

TEST_CASE("a clock stepping back delays refill and never adds", "[processors][token_bucket]") {
  const BucketParams params = tenPerSecond();
  BucketState s{4, 0, kNanosPerSecond};
  token_bucket::refill(s, params, 500 * kMs);
  CHECK(s == BucketState{4, 0, kNanosPerSecond});
  CHECK(token_bucket::tryTake(s, params, 3) == AcquireAnswer{true, 1, 0});
  token_bucket::refill(s, params, 1200 * kMs);  // from 1 s, not from 0.5 s
  CHECK(s == BucketState{3, 0, 1200 * kMs});

  Store store;
  store.entry = Entry{encode(BucketState{1, 0, kNanosPerSecond}), kNever};
  // 2 tokens accrue by 1.2 s on the writer's clock: 0.7 s from this clock's 0.5 s.
  CHECK(store.acquire(params, 3, 500 * kMs) == AcquireAnswer{false, 1, 700 * kMs});
  CHECK(store.lastChange == Change::kNone);
  CHECK(store.acquire(params, 1, 500 * kMs) == AcquireAnswer{true, 0, 0});
  CHECK(store.state() == BucketState{0, 0, kNanosPerSecond});
  CHECK(store.entry->expiresAt == 2 * kNanosPerSecond);
  CHECK(store.acquire(params, 1, 999 * kMs) == AcquireAnswer{false, 0, 101 * kMs});

  // A denial is not stored, so after a step back the next request refills from the stored
  // lastRefill (1 s), not from the denial's time (1.5 s).
  store.entry = Entry{encode(BucketState{0, 0, kNanosPerSecond}), kNever};
  CHECK(store.acquire(params, 6, 1500 * kMs) == AcquireAnswer{false, 5, 100 * kMs});
  CHECK(store.acquire(params, 2, 1200 * kMs) == AcquireAnswer{true, 0, 0});
  CHECK(store.state() == BucketState{0, 0, 1200 * kMs});

  // The farthest step back: the wait saturates.
  store.entry = Entry{encode(BucketState{0, 0, kMax}), kNever};
  CHECK(store.acquire(params, 1, kMin) == AcquireAnswer{false, 0, kNever});
}

TEST_CASE("parameters changed since the state was written", "[processors][token_bucket]") {
  Store store;
  store.entry = Entry{encode(BucketState{10, 500, 0}), kNever};
  const BucketParams lower{4, 10, kNanosPerSecond, std::nullopt};
  CHECK(store.acquire(lower, 5, 0) == AcquireAnswer{false, 4, kNever});
  CHECK(store.acquire(lower, 4, 0) == AcquireAnswer{true, 0, 0});
  CHECK(store.state() == BucketState{0, 0, 0});

  // A shorter period: a remainder that no longer fits is dropped.
  const BucketParams shorter{10, 1, 100, std::nullopt};
  BucketState s{2, 500, 0};
  token_bucket::refill(s, shorter, 0);
  CHECK(s == BucketState{2, 0, 0});
  CHECK(token_bucket::nanosUntil(s, shorter, 3) == 100);
}

TEST_CASE("batch answers in order and equals sequential acquires", "[processors][token_bucket]") {
  const BucketParams params = tenPerSecond();
  Store store;
  const auto answers = store.invoke(TokenBucketBatchAcquire{params, {5, 20, 3, 4}}, 0);
  CHECK(answers == std::vector<AcquireAnswer>{
                       {true, 5, 0}, {false, 5, kNever}, {true, 2, 0}, {false, 2, 200 * kMs}});
  CHECK(store.lastChange == Change::kPut);
  CHECK(store.state() == BucketState{2, 0, 0});
  CHECK(store.entry->expiresAt == 800 * kMs);

  // All denied on an existing bucket: nothing written.
  CHECK(store.invoke(TokenBucketBatchAcquire{params, {3, 11}}, 0) ==
        std::vector<AcquireAnswer>{{false, 2, 100 * kMs}, {false, 2, kNever}});
  CHECK(store.lastChange == Change::kNone);

  std::uint64_t seed = 7;
  for (const BucketParams& p : randomizedParams()) {
    std::mt19937_64 rng(++seed);
    std::uniform_int_distribution<Nanos> forward(0, 2 * p.refillPeriod);
    std::uniform_int_distribution<std::int64_t> want(1, p.capacity + 1);
    std::uniform_int_distribution<std::size_t> count(1, 8);
    Store batched, single;
    Nanos now = 0;
    for (int step = 0; step < 3000; ++step) {
      now += forward(rng);
      TokenBucketBatchAcquire batch{p, std::vector<std::int64_t>(count(rng))};
      for (auto& t : batch.tokens) t = want(rng);
      INFO("capacity " << p.capacity << " step " << step);
      std::vector<AcquireAnswer> expected;
      for (std::int64_t t : batch.tokens) expected.push_back(single.acquire(p, t, now));
      REQUIRE(batched.invoke(batch, now) == expected);
      REQUIRE(batched.entry.has_value() == single.entry.has_value());
      if (batched.entry) {
        REQUIRE(batched.entry->value == single.entry->value);
        REQUIRE(batched.entry->expiresAt == single.entry->expiresAt);
      }
    }
  }
}

TEST_CASE("batch size is bounded", "[processors][token_bucket]") {
  const std::size_t limit = TokenBucketBatchAcquire::kMaxWants;
  TokenBucketBatchAcquire tooLong{tenPerSecond(), std::vector<std::int64_t>(limit + 1, 1)};
  const std::string bytes = encode(tooLong);
  TokenBucketBatchAcquire decoded;
  CHECK_THROWS_AS(decodeInto(bytes, decoded), std::length_error);

  auto e = failure(tooLong);
  REQUIRE(e);
  CHECK(e->code() == Errc::invalid_argument);

  TokenBucketBatchAcquire atLimit{BucketParams::perPeriod(kMax, 1), {}};
  atLimit.tokens.assign(limit, 1);
  decoded = decode<TokenBucketBatchAcquire>(encode(atLimit));
  CHECK(decoded.tokens == atLimit.tokens);
  Store store;
  const auto answers = store.invoke(decoded, 0);
  REQUIRE(answers.size() == limit);
  CHECK(answers.back() == AcquireAnswer{true, kMax - static_cast<std::int64_t>(limit), 0});
}

TEST_CASE("expiry: an idle bucket expires when it would be full", "[processors][token_bucket]") {
  const BucketParams params{10, 10, kNanosPerSecond, 2};
  Store store;
  CHECK(store.acquire(params, 1, 0) == AcquireAnswer{true, 1, 0});
  CHECK(store.entry->expiresAt == 900 * kMs);
  // A denial on an existing bucket leaves the entry, expiry included, unchanged.
  CHECK(store.acquire(params, 5, 100 * kMs) == AcquireAnswer{false, 2, 300 * kMs});
  CHECK(store.lastChange == Change::kNone);
  CHECK(store.entry->expiresAt == 900 * kMs);
  // A denial on a new bucket creates it.
  Store fresh;
  CHECK(fresh.acquire(params, 5, 0) == AcquireAnswer{false, 2, 300 * kMs});
  CHECK(fresh.lastChange == Change::kPut);
  CHECK(fresh.entry->expiresAt == 800 * kMs);
  // After expiry the bucket is re-created from initialTokens (2), not from a full bucket.
  CHECK(store.acquire(params, 3, 900 * kMs) == AcquireAnswer{false, 2, 100 * kMs});
  CHECK(store.state() == BucketState{2, 0, 900 * kMs});
}

TEST_CASE("state, answers and processors round-trip through the codec",
          "[processors][token_bucket]") {
  for (const BucketState& s : {BucketState{}, BucketState{kMax, kMax - 1, kMin},
                               BucketState{3, 700, 1'700'000'000 * kNanosPerSecond}}) {
    CHECK(decode<BucketState>(encode(s)) == s);
  }
  for (const AcquireAnswer& a : {AcquireAnswer{true, 5, 0}, AcquireAnswer{false, 0, kNever}}) {
    CHECK(decode<AcquireAnswer>(encode(a)) == a);
  }
  const TokenBucketAcquire acquire{BucketParams{10, 7, 1000, 3}, 4};
  const auto back = decode<TokenBucketAcquire>(encode(acquire));
  CHECK(back.bucket.capacity == 10);
  CHECK(back.bucket.refillTokens == 7);
  CHECK(back.bucket.refillPeriod == 1000);
  CHECK(back.bucket.initialTokens == std::optional<std::int64_t>(3));
  CHECK(back.tokens == 4);
  CHECK_THROWS(decode<BucketState>(encode(BucketState{}) + "x"));
}

}  // namespace
}  // namespace ingrid
