#include <ingrid/local_token_bucket.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <catch2/catch.hpp>

namespace ingrid {
namespace {

__extension__ typedef __int128 int128;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr Nanos kMs = 1'000'000;
constexpr Nanos kSecond = kNanosPerSecond;
constexpr Nanos kTenYears = 315'360'000'000'000'000;
constexpr Nanos kEpoch2024 = 1'704'067'200 * kSecond;

std::string str(const AcquireAnswer& a) {
  std::ostringstream out;
  out << "{granted=" << a.granted << ", remaining=" << a.remaining << ", wait=" << a.waitNanos
      << "}";
  return out.str();
}

Nanos saturatingAdd(Nanos t, int128 d) {
  const int128 sum = int128{t} + d;
  return sum > kMax ? kMax : sum < kMin ? kMin : static_cast<Nanos>(sum);
}

// The answer, REQUIRing that there is one.
AcquireAnswer take(LocalTokenBucket& bucket, std::int64_t tokens) {
  Result<AcquireAnswer> r = bucket.tryAcquire(tokens);
  REQUIRE(r.ok());
  return *r;
}

// Parameters worth comparing: everyday ones, the remainder carry, and the int64 extremes.
std::vector<BucketParams> paramsUnderTest() {
  return {
      BucketParams::perPeriod(10, kSecond),
      BucketParams{20, 7, 1000, 0},               // 7 tokens per 1000 ns, starting empty
      BucketParams{5, 3, 10 * kSecond, 2},        // 3 tokens per 10 s
      BucketParams{1, 1, 1, std::nullopt},        // the smallest bucket
      BucketParams{kMax, kMax, 1, std::nullopt},  // capacity and refill INT64_MAX per 1 ns
      BucketParams{kMax, 1, kMax, 0},             // 1 token per INT64_MAX ns
      BucketParams{kMax, kMax, kMax, 7},
      BucketParams{3, kMax, 1, 1},          // full again 1 ns after any take
      BucketParams{100, 1, kTenYears, 50},  // 1 token per 10 years
      BucketParams{kMax, kMax, kTenYears, std::nullopt},
  };
}

// A random want: small, up to what the spec bucket holds, exactly that or one more, up to
// capacity, exactly capacity, or more than capacity.
std::int64_t randomWant(std::mt19937_64& rng, const BucketParams& p, std::int64_t held) {
  auto upTo = [&](std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(1, hi)(rng);
  };
  switch (rng() % 8) {
    case 0:
      return upTo(std::min<std::int64_t>(p.capacity, 3));
    case 1:
      return upTo(std::max<std::int64_t>(held, 1));
    case 2:
      return std::max<std::int64_t>(held, 1);
    case 3:
      return held < kMax ? held + 1 : held;
    case 4:
      return upTo(p.capacity);
    case 5:
      return p.capacity;
    case 6:
      return p.capacity < kMax ? p.capacity + 1 : p.capacity;
    default:
      return 1;
  }
}

// A random forward step: mostly none, a few ns, up to one token's time or up to a period; now and
// then up to ten or a hundred periods, or an arbitrary jump.
int128 randomStep(std::mt19937_64& rng, const BucketParams& p) {
  auto upTo = [&](int128 hi) {
    const auto top = static_cast<std::uint64_t>(std::min<int128>(hi, kMax));
    return int128{std::uniform_int_distribution<std::uint64_t>(0, top)(rng)};
  };
  const std::uint64_t dice = rng() % 32;
  if (dice < 6) return 0;
  if (dice < 12) return upTo(10);
  if (dice < 20) return upTo(int128{p.refillPeriod} / p.refillTokens + 1);
  if (dice < 26) return upTo(p.refillPeriod);
  if (dice < 30) return upTo(int128{p.refillPeriod} * 10);
  if (dice < 31) return upTo(int128{p.refillPeriod} * 100);
  return upTo(kMax / 64);
}

TEST_CASE("LocalTokenBucket follows the spec's worked example", "[limiters][local_bucket]") {
  auto clock = std::make_shared<ManualClock>(300 * kMs);
  auto made = LocalTokenBucket::create(BucketParams::perPeriod(10, kSecond), clock);
  REQUIRE(made.ok());
  LocalTokenBucket& bucket = **made;
  REQUIRE(bucket.params().capacity == 10);

  CHECK(take(bucket, 6) == AcquireAnswer{true, 4, 0});
  clock->set(500 * kMs);
  CHECK(bucket.available() == 6);
  CHECK(take(bucket, 5) == AcquireAnswer{true, 1, 0});
  CHECK(take(bucket, 3) == AcquireAnswer{false, 1, 200 * kMs});
  CHECK(take(bucket, 11) == AcquireAnswer{false, 1, kNever});

  clock->set(1400 * kMs - 1);
  CHECK(bucket.available() == 9);
  clock->set(1400 * kMs);
  CHECK(bucket.available() == 10);
  clock->set(5 * kSecond);
  CHECK(bucket.available() == 10);                       // a full bucket accrues nothing
  CHECK(take(bucket, 10) == AcquireAnswer{true, 0, 0});  // exactly what is left
  CHECK(take(bucket, 1) == AcquireAnswer{false, 0, 100 * kMs});
}

TEST_CASE("LocalTokenBucket carries the remainder", "[limiters][local_bucket]") {
  // 7 tokens per 1000 ns: 100 ns give 0 tokens and 700/1000 of one; 100 ns more give 1.
  auto clock = std::make_shared<ManualClock>(0);
  LocalTokenBucket bucket(BucketParams{20, 7, 1000, 0}, clock);
  clock->set(100);
  CHECK(bucket.available() == 0);
  CHECK(take(bucket, 1) == AcquireAnswer{false, 0, 43});  // ceil(300 / 7)
  clock->set(200);
  CHECK(take(bucket, 1) == AcquireAnswer{true, 0, 0});
  clock->set(1000);
  CHECK(bucket.available() == 6);  // 7 accrued, 1 taken

  // Taking every nanosecond loses nothing to rounding.
  auto other = std::make_shared<ManualClock>(0);
  LocalTokenBucket often(BucketParams{1000, 7, 1000, 0}, other);
  std::int64_t taken = 0;
  for (Nanos t = 1; t <= 100'000; ++t) {
    other->set(t);
    if (often.available() > 0) taken += take(often, 1).granted ? 1 : 0;
  }
  CHECK(taken == 700);
}

TEST_CASE("LocalTokenBucket equals the spec's refill and tryTake on a forward clock",
          "[limiters][local_bucket]") {
  std::int64_t grants = 0, denials = 0, fulls = 0, waitsChecked = 0;
  for (const BucketParams& p : paramsUnderTest()) {
    for (const Nanos start : {Nanos{0}, kEpoch2024, kMin, kMax - kTenYears}) {
      for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        std::mt19937_64 rng(seed);
        auto clock = std::make_shared<ManualClock>(start);
        LocalTokenBucket bucket(p, clock);
        BucketState spec = token_bucket::create(p, start);
        Nanos now = start;
        for (int step = 0; step < 400; ++step) {
          now = saturatingAdd(now, randomStep(rng, p));
          clock->set(now);
          token_bucket::refill(spec, p, now);
          INFO("capacity " << p.capacity << " refill " << p.refillTokens << " per "
                           << p.refillPeriod << ", start " << start << ", seed " << seed
                           << ", step " << step << ", now " << now);
          REQUIRE(bucket.available() == spec.tokens);
          fulls += spec.tokens == p.capacity ? 1 : 0;

          const std::int64_t want = randomWant(rng, p, spec.tokens);
          const AcquireAnswer expected = token_bucket::tryTake(spec, p, want);
          const AcquireAnswer got = take(bucket, want);
          INFO("want " << want << ": local " << str(got) << ", spec " << str(expected));
          REQUIRE(got == expected);
          REQUIRE(bucket.available() == spec.tokens);
          (got.granted ? grants : denials) += 1;

          // A wait is exact: the tokens are there after it and not one nanosecond sooner.
          if (!got.granted && got.waitNanos != kNever && int128{now} + got.waitNanos <= kMax) {
            clock->set(now + got.waitNanos);
            REQUIRE(bucket.available() >= want);
            clock->set(now + got.waitNanos - 1);
            REQUIRE(bucket.available() < want);
            ++waitsChecked;
          }
        }
      }
    }
  }
  CHECK(grants > 5'000);
  CHECK(denials > 10'000);
  CHECK(fulls > 5'000);
  CHECK(waitsChecked > 3'000);
}

TEST_CASE("LocalTokenBucket never grants extra when the clock steps back",
          "[limiters][local_bucket]") {
  auto clock = std::make_shared<ManualClock>(10 * kSecond);
  LocalTokenBucket bucket(BucketParams::perPeriod(10, kSecond), clock);
  CHECK(take(bucket, 4) == AcquireAnswer{true, 6, 0});

  // 500 ms behind the grant the bucket holds 5 tokens less than at the grant (the spec, which
  // stops the clock at the grant, would still grant from 6): less, never more.
  clock->set(9500 * kMs);
  CHECK(bucket.available() == 1);
  CHECK(take(bucket, 2) == AcquireAnswer{false, 1, 100 * kMs});
  CHECK(take(bucket, 7) == AcquireAnswer{false, 1, 600 * kMs});  // the spec's wait, too
  // Far behind: empty, never negative; the wait runs until 9.5 s.
  clock->set(0);
  CHECK(bucket.available() == 0);
  CHECK(take(bucket, 1) == AcquireAnswer{false, 0, 9500 * kMs});
  clock->set(kMin);
  CHECK(take(bucket, 10) == AcquireAnswer{false, 0, kNever});

  // A grant behind the last one counts as made at the last one: back at 10 s, 6 - 1 are left.
  clock->set(9500 * kMs);
  CHECK(take(bucket, 1) == AcquireAnswer{true, 0, 0});
  clock->set(10 * kSecond);
  CHECK(bucket.available() == 5);
}

// The spec's bucket as TokenBucketAcquire keeps it (docs/token-bucket.md, "Acquire"): the stored
// state is refilled and taken from; a denial is not stored; a denial's wait counts from `now`.
struct StoredSpecBucket {
  BucketParams params;
  BucketState stored;

  // Whole tokens at `now`, as the next acquire sees them.
  std::int64_t held(Nanos now) const {
    BucketState state = stored;
    token_bucket::refill(state, params, now);
    return state.tokens;
  }
  // The answer at `now`, and the state a grant stores.
  std::pair<AcquireAnswer, BucketState> ask(std::int64_t tokens, Nanos now) const {
    BucketState state = stored;
    token_bucket::refill(state, params, now);
    AcquireAnswer answer = token_bucket::tryTake(state, params, tokens);
    if (!answer.granted && state.lastRefill > now) {
      answer.waitNanos = saturatingAdd(answer.waitNanos, int128{state.lastRefill} - now);
    }
    return {answer, state};
  }
};

TEST_CASE(
    "LocalTokenBucket equals the spec's processor at or after its last grant, and is "
    "stricter before it",
    "[limiters][local_bucket]") {
  std::int64_t exact = 0, behind = 0, stricter = 0;
  for (const BucketParams& p : paramsUnderTest()) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      std::mt19937_64 rng(seed);
      const Nanos start = seed % 2 ? kEpoch2024 : kMin + kTenYears;
      auto clock = std::make_shared<ManualClock>(start);
      LocalTokenBucket bucket(p, clock);
      StoredSpecBucket spec{p, token_bucket::create(p, start)};
      Nanos now = start;
      for (int step = 0; step < 1000; ++step) {
        // Mostly forward; sometimes back a little, back a lot, or anywhere in int64.
        const std::uint64_t dice = rng() % 32;
        if (dice < 4) {
          now = saturatingAdd(now, -randomStep(rng, p));
        } else if (dice < 5) {
          now = static_cast<Nanos>(rng());
        } else {
          now = saturatingAdd(now, randomStep(rng, p));
        }
        clock->set(now);
        const std::int64_t held = spec.held(now);
        const std::int64_t want = randomWant(rng, p, held);
        const auto [expected, after] = spec.ask(want, now);
        const std::int64_t availableBefore = bucket.available();
        const AcquireAnswer got = take(bucket, want);
        INFO("capacity " << p.capacity << " refill " << p.refillTokens << " per " << p.refillPeriod
                         << ", seed " << seed << ", step " << step << ", now " << now
                         << ", last grant " << spec.stored.lastRefill << ", want " << want
                         << ": local " << str(got) << ", spec " << str(expected));
        if (now >= spec.stored.lastRefill) {
          REQUIRE(got == expected);
          REQUIRE(availableBefore == held);
          ++exact;
        } else {
          ++behind;
          REQUIRE(availableBefore <= held);
          REQUIRE(got.remaining >= 0);
          if (got.granted == expected.granted) {
            REQUIRE(got.remaining <= expected.remaining);
            if (!got.granted) REQUIRE(got.waitNanos == expected.waitNanos);
          } else {
            // The spec grants from the tokens held at its last grant; this bucket holds fewer.
            REQUIRE(expected.granted);
            REQUIRE(got.remaining < want);
            ++stricter;
          }
        }
        if (got.granted) spec.stored = after;
      }
    }
  }
  CHECK(exact > 5'000);
  CHECK(behind > 5'000);
  CHECK(stricter > 1'000);
}

TEST_CASE("LocalTokenBucket waits are exact and saturate", "[limiters][local_bucket]") {
  auto clock = std::make_shared<ManualClock>(0);
  LocalTokenBucket sevens(BucketParams{20, 7, 1000, 0}, clock);
  CHECK(take(sevens, 1) == AcquireAnswer{false, 0, 143});    // ceil(1000 / 7)
  CHECK(take(sevens, 20) == AcquireAnswer{false, 0, 2858});  // ceil(20000 / 7)
  CHECK(take(sevens, 21) == AcquireAnswer{false, 0, kNever});

  // A wait of exactly INT64_MAX ns is kNever; one that is longer saturates to it.
  LocalTokenBucket slowest(BucketParams{2, 1, kMax, 0}, clock);
  CHECK(take(slowest, 1) == AcquireAnswer{false, 0, kNever});
  LocalTokenBucket tenYears(BucketParams{kMax, 1, kTenYears, 0}, clock);
  CHECK(take(tenYears, 1) == AcquireAnswer{false, 0, kTenYears});
  CHECK(take(tenYears, 29) == AcquireAnswer{false, 0, 29 * kTenYears});
  CHECK(take(tenYears, 30) == AcquireAnswer{false, 0, kNever});
  CHECK(take(tenYears, kMax) == AcquireAnswer{false, 0, kNever});

  LocalTokenBucket fastest(BucketParams{kMax, kMax, 1, 0}, clock);
  CHECK(take(fastest, kMax) == AcquireAnswer{false, 0, 1});
  clock->set(1);
  CHECK(take(fastest, kMax) == AcquireAnswer{true, 0, 0});
}

TEST_CASE("LocalTokenBucket refuses bad use with invalid_argument", "[limiters][local_bucket]") {
  auto clock = std::make_shared<ManualClock>(0);
  auto zero = LocalTokenBucket::create(BucketParams{0, 1, 1, std::nullopt}, clock);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error() == Errc::invalid_argument);
  CHECK(zero.error().detail() == "capacity must be > 0, got 0");
  auto tooMany = LocalTokenBucket::create(BucketParams{10, 1, kSecond, 11});
  REQUIRE_FALSE(tooMany.ok());
  CHECK(tooMany.error().detail() == "initialTokens must be in [0, capacity=10], got 11");

  auto made = LocalTokenBucket::create(BucketParams::perPeriod(10, kSecond), clock);
  REQUIRE(made.ok());
  for (const std::int64_t bad : {std::int64_t{0}, std::int64_t{-3}, kMin}) {
    Result<AcquireAnswer> r = (*made)->tryAcquire(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::invalid_argument);
    CHECK(r.error().detail() == "tokens must be > 0, got " + std::to_string(bad));
  }
  CHECK((*made)->available() == 10);  // nothing was taken

  // The constructor does not abort on bad params; the bucket refuses every acquire instead.
  LocalTokenBucket broken(BucketParams{10, 0, kSecond, std::nullopt}, clock);
  Result<AcquireAnswer> r = broken.tryAcquire(1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == Errc::invalid_argument);
  CHECK(r.error().detail() == "refillTokens must be > 0, got 0");
  CHECK(broken.available() == 0);
  std::future<Result<AcquireAnswer>> f = broken.tryAcquireAsync(1, asio::use_future);
  Result<AcquireAnswer> async = f.get();
  REQUIRE_FALSE(async.ok());
  CHECK(async.error() == Errc::invalid_argument);
}

TEST_CASE("LocalTokenBucket defaults to the system clock", "[limiters][local_bucket]") {
  auto made = LocalTokenBucket::create(BucketParams::perPeriod(5, 3600 * kSecond));
  REQUIRE(made.ok());
  CHECK(take(**made, 5) == AcquireAnswer{true, 0, 0});
  const AcquireAnswer denied = take(**made, 1);
  CHECK_FALSE(denied.granted);
  CHECK(denied.waitNanos > 700 * kSecond);  // one token takes 720 s
  CHECK(denied.waitNanos <= 720 * kSecond);
}

// Catch2 assertions are not thread-safe: threads only count; the main thread asserts.
TEST_CASE("LocalTokenBucket grants exactly the capacity to racing threads on a frozen clock",
          "[limiters][local_bucket]") {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  constexpr std::int64_t kCapacity = 5000;
  auto clock = std::make_shared<ManualClock>(kEpoch2024);
  LocalTokenBucket bucket(BucketParams::perPeriod(kCapacity, kSecond), clock);

  std::atomic<std::int64_t> granted{0}, grants{0}, denials{0}, wrong{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      for (int k = 0; k < kPerThread; ++k) {
        const std::int64_t want = i % 2 ? 1 : 1 + k % 3;  // some want 1, some 1..3
        Result<AcquireAnswer> r = bucket.tryAcquire(want);
        if (!r.ok() || r->remaining < 0 || r->remaining > kCapacity) {
          ++wrong;
        } else if (r->granted) {
          granted += want;
          ++grants;
        } else {
          ++denials;
          if (r->waitNanos <= 0 || r->remaining >= want) ++wrong;
        }
        if (k % 64 == 0 && bucket.available() > kCapacity) ++wrong;
      }
    });
  }
  go = true;
  for (auto& t : threads) t.join();

  CHECK(wrong == 0);
  CHECK(grants + denials == kThreads * kPerThread);
  CHECK(granted + bucket.available() == kCapacity);
  CHECK(bucket.available() < 3);  // every thread kept asking until it was refused
}

TEST_CASE("LocalTokenBucket never grants more than it accrues while the clock moves",
          "[limiters][local_bucket]") {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 5000;
  constexpr std::int64_t kInitial = 100;
  // 1 token per microsecond; the main thread moves the clock 1 µs at a time while threads take.
  auto clock = std::make_shared<ManualClock>(kEpoch2024);
  LocalTokenBucket bucket(BucketParams{1000, 1, 1000, kInitial}, clock);
  std::atomic<std::int64_t> granted{0}, errors{0};
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < kPerThread; ++k) {
        Result<AcquireAnswer> r = bucket.tryAcquire(1);
        if (!r.ok()) {
          ++errors;
        } else if (r->granted) {
          ++granted;
        }
      }
      ++finished;
    });
  }
  std::int64_t ticks = 0;
  while (finished.load() < kThreads) {
    clock->advance(1000);
    ++ticks;
  }
  for (auto& t : threads) t.join();

  CHECK(errors == 0);
  CHECK(granted + bucket.available() <= kInitial + ticks);
}

TEST_CASE("LocalTokenBucket completes tryAcquireAsync without running it inline",
          "[limiters][local_bucket]") {
  auto clock = std::make_shared<ManualClock>(0);
  LocalTokenBucket bucket(BucketParams::perPeriod(10, kSecond), clock);

  asio::io_context io;
  std::optional<Result<AcquireAnswer>> got;
  bucket.tryAcquireAsync(
      3, asio::bind_executor(io, [&](Result<AcquireAnswer> r) { got.emplace(std::move(r)); }));
  CHECK_FALSE(got.has_value());    // posted to the handler's executor, not run inline
  CHECK(bucket.available() == 7);  // but decided already
  io.run();
  REQUIRE(got.has_value());
  REQUIRE(got->ok());
  CHECK(**got == AcquireAnswer{true, 7, 0});

  std::future<Result<AcquireAnswer>> granted = bucket.tryAcquireAsync(7, asio::use_future);
  std::future<Result<AcquireAnswer>> denied = bucket.tryAcquireAsync(1, asio::use_future);
  Result<AcquireAnswer> first = granted.get();
  Result<AcquireAnswer> second = denied.get();
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(*first == AcquireAnswer{true, 0, 0});
  CHECK(*second == AcquireAnswer{false, 0, 100 * kMs});
}

}  // namespace
}  // namespace ingrid
