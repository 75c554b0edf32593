#include <ingrid/processors/warmup.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "processors/limiter_store.h"

namespace Catch {
template <>
struct StringMaker<ingrid::WarmupAnswer> {
  static std::string convert(const ingrid::WarmupAnswer& a) {
    std::ostringstream out;
    out << "{granted=" << a.granted << ", delay=" << a.delay << ", cost=" << a.cost
        << ", stored=" << a.stored << "}";
    return out.str();
  }
};
}  // namespace Catch

namespace ingrid {
namespace {

using limiter::int128;
using limiter::kMaxInt64;
using limiter::kMinInt64;
using testing::failure;
using testing::failureText;
using testing::LimiterStore;
using Change = MutableEntry::Change;

static_assert(EntryProcessor<WarmupAcquire>);
static_assert(EntryProcessor<WarmupBatchAcquire>);

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kS = kNanosPerSecond;
constexpr Nanos kTenYears = 315'360'000'000'000'000;

// docs/warm-up.md's example: 10 per second, 2 s of warm-up, cold factor 3.
const WarmupParams kExample{10, kS, 2 * kS, 3, 0};

WarmupParams withWait(WarmupParams p, Nanos maxWait) {
  p.maxWait = maxWait;
  return p;
}

WarmupAnswer take(LimiterStore& s, const WarmupParams& p, std::int64_t n, Nanos now) {
  return s.invoke(WarmupAcquire{p, n}, now);
}

// The reference: Guava's SmoothWarmingUp written the plain way, for small parameters. The stored
// permits are one exact rational (`level_`, in units of 1/warmup permit); a request's cost is
// summed permit by permit, each the integral of the cost line over its own unit of height, in
// units of 1/(2 * zone * permits) ns, then rounded up once. The entry's life is modelled too: it
// exists after a grant and is forgotten at its expiry.
class ReferenceWarmup {
 public:
  explicit ReferenceWarmup(const WarmupParams& p)
      : p_(p),
        threshold_(int128{p.warmup} * p.permits / (2 * int128{p.period})),
        zone_(2 * int128{p.warmup} * p.permits / ((1 + int128{p.coldFactor}) * p.period)),
        max_(threshold_ + zone_) {}

  WarmupAnswer take(std::int64_t n, Nanos maxWait, Nanos now) {
    if (exists_ && now >= expiry()) exists_ = false;
    if (!exists_) {
      level_ = max_ * p_.warmup;
      nextFree_ = now;
    }
    int128 level = level_;
    int128 nextFree = nextFree_;
    if (now > nextFree) {
      level = std::min(max_ * p_.warmup, level + (int128{now} - nextFree) * max_);
      nextFree = now;
    }
    const int128 stored = level / p_.warmup;
    const int128 zz = std::max<int128>(zone_, 1);
    int128 units = 0;
    int128 s = stored;
    for (std::int64_t i = 0; i < n; ++i) {
      units += 2 * zz * p_.period;
      if (s > threshold_)
        units += int128{p_.coldFactor - 1} * p_.period * (2 * (s - threshold_) - 1);
      if (s > 0) --s;
    }
    const int128 den = 2 * zz * p_.permits;
    const int128 cost = (units + den - 1) / den;
    WarmupAnswer a;
    a.cost = cost >= kMaxInt64 ? kNever : static_cast<Nanos>(cost);
    const int128 wait = nextFree - now;
    if (a.cost == kNever || nextFree + cost > kMaxInt64) {
      a.delay = kNever;
    } else if (wait > maxWait) {
      a.delay = wait >= kMaxInt64 ? kNever : static_cast<Nanos>(wait);
    } else {
      a.granted = true;
      a.delay = static_cast<Nanos>(wait);
      level -= std::min<int128>(n, stored) * p_.warmup;
      nextFree += cost;
      level_ = level;
      nextFree_ = nextFree;
      exists_ = true;
    }
    a.stored = static_cast<std::int64_t>(level / p_.warmup);
    return a;
  }

  bool exists() const { return exists_; }
  // When the idle limiter's level reaches maxPermits, cooling from nextFree.
  int128 expiry() const {
    if (max_ == 0) return nextFree_;
    return nextFree_ + (max_ * p_.warmup - level_ + max_ - 1) / max_;
  }
  WarmupState state() const {
    return WarmupState{static_cast<std::int64_t>(level_ / p_.warmup),
                       static_cast<std::int64_t>(level_ % p_.warmup),
                       static_cast<Nanos>(nextFree_)};
  }

 private:
  WarmupParams p_;
  int128 threshold_, zone_, max_;
  int128 level_ = 0;
  int128 nextFree_ = 0;
  bool exists_ = false;
};

void runAgainstReference(const WarmupParams& p, bool jitter, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::int64_t maxPermits = p.maxPermits();
  // Steps of up to a few cold costs; quantities up to past maxPermits.
  const Nanos coldCost = Warmup::cost(p, maxPermits, 1);
  const Nanos span = std::min<Nanos>(kMaxInt64 / 4, coldCost * 6 + p.warmup);
  std::uniform_int_distribution<Nanos> step(0, span);
  std::uniform_int_distribution<std::int64_t> quantity(1, maxPermits + 3);
  std::uniform_int_distribution<Nanos> wait(0, span * 2);
  std::uniform_int_distribution<int> percent(0, 99);
  LimiterStore store;
  ReferenceWarmup reference(p);
  Nanos now = 1'700'000'000 * kS;
  for (int i = 0; i < 5000; ++i) {
    const bool back = jitter && percent(rng) < 10;
    const Nanos d = step(rng);
    if (back ? now < kMinInt64 + d : now > kMaxInt64 - d) break;  // stay inside int64 time
    now += back ? -d : d;
    const std::int64_t n = percent(rng) < 50 ? 1 : quantity(rng);
    const Nanos maxWait = percent(rng) < 50 ? 0 : wait(rng);
    INFO("step " << i << " now " << now << " n " << n << " maxWait " << maxWait);
    const WarmupAnswer expected = reference.take(n, maxWait, now);
    REQUIRE(take(store, withWait(p, maxWait), n, now) == expected);
    if (store.lastChange == Change::kPut) {
      REQUIRE(expected.granted);
      REQUIRE(store.state<WarmupState>() == reference.state());
      REQUIRE(store.entry->expiresAt == reference.expiry());
    } else {
      REQUIRE(store.lastChange == Change::kNone);
      REQUIRE_FALSE(expected.granted);
    }
    REQUIRE(store.entry.has_value() == reference.exists());
  }
}

TEST_CASE("Warm-up: invalidReason names the field and the value", "[processors][warmup]") {
  auto reason = [](WarmupParams p) { return p.invalidReason().value_or("(valid)"); };
  CHECK(reason(kExample) == "(valid)");
  CHECK(reason({0, kS, kS, 3, 0}) == "permits must be > 0, got 0");
  CHECK(reason({1, -1, kS, 3, 0}) == "period must be > 0, got -1");
  CHECK(reason({1, kS, 0, 3, 0}) == "warmup must be > 0, got 0");
  CHECK(reason({1, kS, kS, 0, 0}) == "coldFactor must be in [1, 1000], got 0");
  CHECK(reason({1, kS, kS, 1001, 0}) == "coldFactor must be in [1, 1000], got 1001");
  CHECK(reason({1, kS, kS, 3, -1}) == "maxWait must be >= 0, got -1");
  CHECK(reason({kMaxInt64, 1, kMaxInt64, 3, 0}) ==
        "the warm-up stores more than INT64_MAX permits (warmup * permits / period is too "
        "large): shorten warmup or lower the rate");
  CHECK(reason({kMaxInt64, kTenYears, kTenYears, 3, 0}) == "(valid)");

  CHECK(failureText(WarmupAcquire{{0, kS, kS, 3, 0}, 1}) == "permits must be > 0, got 0");
  CHECK(failureText(WarmupAcquire{kExample, 0}) == "quantity must be > 0, got 0");
  CHECK(failureText(WarmupBatchAcquire{kExample, {}}) ==
        "quantities must hold at least one request");
  CHECK(failureText(WarmupBatchAcquire{kExample, {1, -2}}) == "quantities[1] must be > 0, got -2");
  auto e = failure(WarmupAcquire{kExample, kMinInt64});
  REQUIRE(e);
  CHECK(e->code() == Errc::invalid_argument);
}

TEST_CASE("Warm-up: an entry that is not a warm-up state fails with processor_failed",
          "[processors][warmup]") {
  const Entry garbage{"abc", kNever};
  auto e = failure(WarmupAcquire{kExample, 1}, &garbage);
  REQUIRE(e);
  CHECK(e->code() == Errc::processor_failed);
  CHECK(std::string(e->what()).rfind("entry does not hold a warm-up limiter: ", 0) == 0);
  const Entry negative{encode(WarmupState{-1, 0, 0}), kNever};
  CHECK(failureText(WarmupAcquire{kExample, 1}, &negative) ==
        "entry does not hold a warm-up limiter: negative stored permits -1 or remainder 0");
}

TEST_CASE("Warm-up: the derived permits follow Guava's shape", "[processors][warmup]") {
  CHECK(kExample.thresholdPermits() == 10);
  CHECK(kExample.maxPermits() == 20);
  // Guava's default: threshold = warmup / (2 I), zone = warmup / (2 I) for a cold factor of 3.
  CHECK(WarmupParams{100, kS, 10 * kS, 3, 0}.thresholdPermits() == 500);
  CHECK(WarmupParams{100, kS, 10 * kS, 3, 0}.maxPermits() == 1000);
  // A cold factor of 1: no slope, the zone is warmup / I.
  CHECK(WarmupParams{100, kS, 10 * kS, 1, 0}.maxPermits() == 1500);
  // Cost of the first cold permit: close to coldFactor stable intervals, falling to I.
  CHECK(Warmup::cost(kExample, 20, 1) == 290 * kMs);
  CHECK(Warmup::cost(kExample, 11, 1) == 110 * kMs);
  CHECK(Warmup::cost(kExample, 10, 1) == 100 * kMs);
  CHECK(Warmup::cost(kExample, 0, 3) == 300 * kMs);
  // The whole zone costs the trapezoid: 10 permits from 300 ms down to 100 ms.
  CHECK(Warmup::cost(kExample, 20, 10) == 2 * kS);
  CHECK(Warmup::cost(kExample, 20, 20) == 3 * kS);
  // 3 per 10 ns: each stable permit costs 10/3 ns, rounded up per request.
  CHECK(Warmup::cost(WarmupParams{3, 10, 1, 3, 0}, 0, 1) == 4);
  CHECK(Warmup::cost(WarmupParams{3, 10, 1, 3, 0}, 0, 3) == 10);
}

TEST_CASE("Warm-up: the worked example of docs/warm-up.md", "[processors][warmup]") {
  LimiterStore s;
  const Nanos t = 10 * kS;
  CHECK(take(s, kExample, 1, t) == WarmupAnswer{true, 0, 290 * kMs, 19});
  CHECK(s.state<WarmupState>() == WarmupState{19, 0, t + 290 * kMs});
  // Cold again (20 stored) 1/20 of the warm-up after nextFree: 100 ms.
  CHECK(s.entry->expiresAt == t + 390 * kMs);
  CHECK(take(s, kExample, 1, t) == WarmupAnswer{false, 290 * kMs, 270 * kMs, 19});
  CHECK(s.lastChange == Change::kNone);
  CHECK(take(s, kExample, 1, t + 290 * kMs) == WarmupAnswer{true, 0, 270 * kMs, 18});
  CHECK(take(s, withWait(kExample, kS), 10, t + 290 * kMs) ==
        WarmupAnswer{true, 270 * kMs, 1640 * kMs, 8});
  CHECK(s.state<WarmupState>() == WarmupState{8, 0, t + 2200 * kMs});
  CHECK(take(s, kExample, 1, t + 2200 * kMs) == WarmupAnswer{true, 0, 100 * kMs, 7});
  // Idle for 10 s: fully cold again (the entry expired and is created anew).
  CHECK(take(s, kExample, 1, t + 12300 * kMs) == WarmupAnswer{true, 0, 290 * kMs, 19});
  CHECK(s.state<WarmupState>() == WarmupState{19, 0, t + 12590 * kMs});
}

TEST_CASE("Warm-up: cooling carries its remainder and is additive", "[processors][warmup]") {
  // 20 permits per 2 s: one stored permit per 100 ms of idle time.
  LimiterStore s;
  const Nanos t = 10 * kS;
  CHECK(take(s, withWait(kExample, 10 * kS), 20, t).granted);  // cost 3 s, 0 stored
  CHECK(s.state<WarmupState>() == WarmupState{0, 0, t + 3 * kS});
  // 150 ms idle: 1.5 permits; a denial writes nothing, and the next grant sees 250 ms of idling.
  CHECK(take(s, kExample, 1, t + 3150 * kMs) == WarmupAnswer{true, 0, 100 * kMs, 0});
  CHECK(s.state<WarmupState>() == WarmupState{0, kS, t + 3250 * kMs});
  CHECK_FALSE(take(s, kExample, 1, t + 3200 * kMs).granted);
  CHECK(take(s, kExample, 2, t + 3300 * kMs) == WarmupAnswer{true, 0, 200 * kMs, 0});
  CHECK(s.state<WarmupState>() == WarmupState{0, 0, t + 3500 * kMs});
}

TEST_CASE("Warm-up: matches the reference on random sequences", "[processors][warmup]") {
  const std::vector<WarmupParams> params = {
      kExample,
      {1, 1, 10, 3, 0},       // one per nanosecond
      {3, 10, 50, 3, 0},      // 3 per 10 ns: the interval is not whole
      {7, 1000, 3000, 5, 0},  // 7 does not divide 1000
      {5, kS, kS, 1, 0},      // a cold factor of 1: no slope
      {1000, 10, 1, 3, 0},    // a warm-up shorter than a nanosecond of permits
      {2, 3, 1, 2, 0},        // no stored permits at all
      {4, 7, 13, 1000, 0},    // the largest cold factor, no zone
      {9, 100, 250, 7, 0},    // zone 5 above threshold 11
      {13, 17 * kMs, 400 * kMs, 4, 0},
  };
  for (std::size_t i = 0; i < params.size(); ++i) {
    for (const bool jitter : {false, true}) {
      INFO("params " << i << " jitter " << jitter);
      runAgainstReference(params[i], jitter, 1000 + i * 2 + (jitter ? 1 : 0));
    }
  }
}

TEST_CASE("Warm-up: a batch is its requests one by one", "[processors][warmup]") {
  testing::checkBatchEqualsSingles<WarmupAcquire>(kExample, 1, 25, 400 * kMs, 2000, 7);
  testing::checkBatchEqualsSingles<WarmupAcquire>(withWait(kExample, kS), 1, 25, 400 * kMs, 2000,
                                                  8);
  testing::checkBatchEqualsSingles<WarmupAcquire>({3, 10, 50, 3, 40}, 1, 12, 60, 2000, 9);
}

TEST_CASE("Warm-up: the extremes", "[processors][warmup]") {
  const Nanos t = 1'700'000'000 * kS;

  SECTION("maxPermits near INT64_MAX, a period of 10 years") {
    const WarmupParams p{kMaxInt64, kTenYears, kTenYears, 3, 0};
    const std::int64_t max = p.maxPermits();
    CHECK(max == kMaxInt64 / 2 + kMaxInt64 / 2);
    CHECK(p.thresholdPermits() == kMaxInt64 / 2);
    // The whole cold store at once: n + (c - 1) * zone / 2 stable intervals, exactly.
    const std::int64_t zone = max - p.thresholdPermits();
    const int128 stable = int128{kTenYears} * (int128{kMaxInt64} + zone);
    CHECK(Warmup::cost(p, max, kMaxInt64) ==
          static_cast<Nanos>((stable + kMaxInt64 - 1) / kMaxInt64));
    CHECK(Warmup::cost(p, max, 1) == 1);  // a permit is 0.1 ns even cold: rounded up
    CHECK(Warmup::cost(p, 0, kMaxInt64) == kTenYears);
    LimiterStore s;
    CHECK(take(s, p, kMaxInt64, t) == WarmupAnswer{true, 0, Warmup::cost(p, max, kMaxInt64), 0});
    CHECK(take(s, p, 1, t + kTenYears) == WarmupAnswer{false, kTenYears / 2, 1, 0});
    // Expiry: fully cold again warmup after nextFree.
    const Nanos nextFree = t + Warmup::cost(p, max, kMaxInt64);
    CHECK(s.entry->expiresAt == nextFree + kTenYears);
  }

  SECTION("a period of 1 ns and a warm-up of 10 years") {
    const WarmupParams p{1, 1, kTenYears, 3, 0};
    CHECK(p.maxPermits() == kTenYears);
    CHECK(Warmup::cost(p, kTenYears, 1) == 3);  // the cold interval, ceil(3 - 1/zone)
    CHECK(Warmup::cost(p, kTenYears / 2, 1) == 1);
    CHECK(Warmup::cost(p, 0, kMaxInt64) == kNever);
    LimiterStore s;
    CHECK(take(s, p, kMaxInt64, t) == WarmupAnswer{false, kNever, kNever, kTenYears});
    CHECK_FALSE(s.entry.has_value());
    CHECK(take(s, p, 1, t) == WarmupAnswer{true, 0, 3, kTenYears - 1});
    CHECK(take(s, p, 1, t + 3) == WarmupAnswer{true, 0, 3, kTenYears - 2});
  }

  SECTION("a period of 1 ns, no stored permits") {
    const WarmupParams p{1, 1, 1, 3, 0};
    CHECK(p.maxPermits() == 0);
    LimiterStore s;
    CHECK(take(s, p, 5, t) == WarmupAnswer{true, 0, 5, 0});
    CHECK(s.entry->expiresAt == t + 5);
    CHECK(take(s, p, 1, t + 4) == WarmupAnswer{false, 1, 1, 0});
    CHECK(take(s, p, kMaxInt64 - t - 5, t + 5) == WarmupAnswer{true, 0, kMaxInt64 - t - 5, 0});
    // The schedule ends at INT64_MAX: nothing more fits in int64 time.
    CHECK(take(s, withWait(p, kNever), 1, t + 5) == WarmupAnswer{false, kNever, 1, 0});
  }

  SECTION("a period of 10 years, one permit each") {
    const WarmupParams p{1, kTenYears, kTenYears, 3, 0};
    LimiterStore s;
    CHECK(take(s, p, 1, t) == WarmupAnswer{true, 0, kTenYears, 0});
    CHECK(take(s, p, 1, t + kTenYears - 1) == WarmupAnswer{false, 1, kTenYears, 0});
    CHECK(take(s, p, 30, t + kTenYears) == WarmupAnswer{false, kNever, kNever, 0});
    CHECK(take(s, p, 2, t + kTenYears) == WarmupAnswer{true, 0, 2 * kTenYears, 0});
  }

  SECTION("a clock that steps back waits longer and cools nothing") {
    LimiterStore s;
    CHECK(take(s, withWait(kExample, 10 * kS), 20, t).granted);  // nextFree t + 3 s, 0 stored
    CHECK(take(s, kExample, 1, t - kS) == WarmupAnswer{false, 4 * kS, 100 * kMs, 0});
    CHECK(take(s, withWait(kExample, 5 * kS), 1, t - kS) ==
          WarmupAnswer{true, 4 * kS, 100 * kMs, 0});
    CHECK(s.state<WarmupState>() == WarmupState{0, 0, t + 3100 * kMs});
    // Far behind: the wait saturates.
    CHECK(take(s, withWait(kExample, kNever), 1, kMinInt64) ==
          WarmupAnswer{false, kNever, 100 * kMs, 0});
    CHECK(take(s, kExample, 1, kMaxInt64) == WarmupAnswer{false, kNever, 290 * kMs, 20});
  }
}

}  // namespace
}  // namespace ingrid
