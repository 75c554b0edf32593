#include <ingrid/processors/composite_bucket.h>

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
struct StringMaker<ingrid::CompositeAnswer> {
  static std::string convert(const ingrid::CompositeAnswer& a) {
    std::ostringstream out;
    out << "{granted=" << a.granted << ", remaining=" << a.remaining << ", wait=" << a.waitNanos
        << ", version=" << a.version << "}";
    return out.str();
  }
};
}  // namespace Catch

namespace ingrid {
namespace {

using limiter::int128;
using limiter::kMaxInt64;
using testing::failure;
using testing::failureText;
using testing::LimiterStore;
using Change = MutableEntry::Change;

static_assert(EntryProcessor<CompositeBucketAcquire>);
static_assert(EntryProcessor<CompositeBucketBatchAcquire>);

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kS = kNanosPerSecond;
constexpr Nanos kTenYears = 315'360'000'000'000'000;

CompositeParams twoBands(std::int64_t version, Replacement rule = Replacement::kProportional) {
  return CompositeParams{
      {BucketParams::perPeriod(10, kS), BucketParams::perPeriod(15, 60 * kS)}, version, rule};
}

CompositeAnswer acquire(LimiterStore& s, const CompositeParams& p, std::int64_t n, Nanos now) {
  return s.invoke(CompositeBucketAcquire{p, n}, now);
}

TEST_CASE("composite bucket: invalid arguments name the field and the value",
          "[processors][composite_bucket]") {
  CHECK(failureText(CompositeBucketAcquire{CompositeParams{{}, 0, Replacement::kAsIs}, 1}) ==
        "bandwidths must hold 1 to 8, got 0");
  CompositeParams p = twoBands(0);
  p.bandwidths[1].capacity = 0;
  CHECK(failureText(CompositeBucketAcquire{p, 1}) == "bandwidths[1]: capacity must be > 0, got 0");
  CHECK(failureText(CompositeBucketAcquire{twoBands(-1), 1}) == "version must be >= 0, got -1");
  CHECK(failureText(CompositeBucketAcquire{twoBands(0, static_cast<Replacement>(3)), 1}) ==
        "replacement must be 0 (as-is), 1 (proportional) or 2 (reset), got 3");
  CHECK(failureText(CompositeBucketAcquire{twoBands(0), 0}) == "tokens must be > 0, got 0");
  CHECK(failureText(CompositeBucketBatchAcquire{twoBands(0), {1, -1}}) ==
        "tokens[1] must be > 0, got -1");
  CHECK(failure(CompositeBucketAcquire{twoBands(0), 0})->code() == Errc::invalid_argument);
  const Entry empty{encode(CompositeState{1, {}}), kNever};
  CHECK(failureText(CompositeBucketAcquire{twoBands(0), 1}, &empty) ==
        "entry does not hold a composite bucket: no bandwidth");
  const Entry negative{encode(CompositeState{1, {Band{BucketParams::perPeriod(1, 1), {-1, 0, 0}}}}),
                       kNever};
  CHECK(failureText(CompositeBucketAcquire{twoBands(0), 1}, &negative) ==
        "entry does not hold a composite bucket: band 0 holds negative tokens or remainder");
  CHECK(failure(CompositeBucketAcquire{twoBands(0), 1}, &negative)->code() ==
        Errc::processor_failed);
}

TEST_CASE("composite bucket: the worked example of docs/composite-bucket.md",
          "[processors][composite_bucket]") {
  LimiterStore s;
  CHECK(acquire(s, twoBands(1), 8, 0) == CompositeAnswer{true, 2, 0, 1});
  CHECK(acquire(s, twoBands(1), 3, 0) == CompositeAnswer{false, 2, 100 * kMs, 1});
  CHECK(s.lastChange == Change::kNone);
  CHECK(acquire(s, twoBands(1), 7, kS) == CompositeAnswer{true, 0, 0, 1});
  CHECK(acquire(s, twoBands(1), 1, kS) == CompositeAnswer{false, 0, 3 * kS, 1});
  const CompositeParams v2{{BucketParams::perPeriod(20, kS), BucketParams::perPeriod(30, 60 * kS)},
                           2,
                           Replacement::kProportional};
  CHECK(acquire(s, v2, 1, kS) == CompositeAnswer{false, 0, 2 * kS, 2});
  CHECK(s.lastChange == Change::kPut);
  const auto state = s.state<CompositeState>();
  CHECK(state.version == 2);
  CHECK(state.bands[0].level.tokens == 6);
  CHECK(state.bands[1].level == BucketState{0, 0, kS});
  CHECK(acquire(s, twoBands(1), 4, kS) == CompositeAnswer{false, 0, 8 * kS, 2});
}

TEST_CASE("composite bucket: the replacement rules", "[processors][composite_bucket]") {
  // One band of 10, 4 taken at 0; replaced at 0 by a band of 20 and a new second band.
  const CompositeParams one{{BucketParams::perPeriod(10, kS)}, 1, Replacement::kAsIs};
  auto replacedBy = [&](Replacement rule) {
    LimiterStore s;
    REQUIRE(acquire(s, one, 4, 0).granted);
    const CompositeParams two{
        {BucketParams::perPeriod(20, kS), BucketParams{5, 1, kS, 2}}, 2, rule};
    const CompositeAnswer a = acquire(s, two, 1, 0);
    REQUIRE(a.version == 2);
    std::vector<std::int64_t> tokens;
    for (const Band& b : s.state<CompositeState>().bands) tokens.push_back(b.level.tokens);
    return tokens;
  };
  CHECK(replacedBy(Replacement::kAsIs) == std::vector<std::int64_t>{5, 1});
  CHECK(replacedBy(Replacement::kProportional) == std::vector<std::int64_t>{11, 1});
  CHECK(replacedBy(Replacement::kReset) == std::vector<std::int64_t>{19, 1});
  // As-is caps at a lower capacity; fewer bands drop the rest.
  LimiterStore s;
  REQUIRE(acquire(s, twoBands(1), 1, 0).granted);
  const CompositeParams small{{BucketParams::perPeriod(3, kS)}, 5, Replacement::kAsIs};
  CHECK(acquire(s, small, 1, 0) == CompositeAnswer{true, 2, 0, 5});
  CHECK(s.state<CompositeState>().bands.size() == 1);
}

// The reference: each band's level as one exact integer in 1/refillPeriod tokens at its own
// time; one existence and expiry for the bucket; the configuration and version kept beside it.
class ReferenceComposite {
 public:
  CompositeAnswer acquire(const CompositeParams& p, std::int64_t n, Nanos now) {
    if (exists_ && expiresAt_ != kNever && now >= expiresAt_) exists_ = false;
    const bool existed = exists_;
    std::vector<Level> levels = levels_;
    std::int64_t version = version_;
    bool replaced = false;
    if (!existed) {
      levels.clear();
      for (const auto& c : p.bandwidths) levels.push_back(fresh(c, now));
      version = p.version;
    } else {
      for (Level& l : levels) bringUp(l, now);
      if (p.version > version) {
        std::vector<Level> next;
        for (std::size_t i = 0; i < p.bandwidths.size(); ++i) {
          const BucketParams& c = p.bandwidths[i];
          if (i >= levels.size() || p.replacement == Replacement::kReset) {
            next.push_back(fresh(c, now));
            continue;
          }
          const Level& old = levels[i];
          int128 tokens = old.level / old.c.refillPeriod;
          if (p.replacement == Replacement::kProportional) {
            tokens = tokens * c.capacity / old.c.capacity;
          }
          next.push_back(Level{c, std::min<int128>(tokens, c.capacity) * c.refillPeriod, old.at});
        }
        levels = next;
        version = p.version;
        replaced = true;
      }
    }
    CompositeAnswer a{true, 0, 0, version};
    for (const Level& l : levels) {
      const int128 cost = int128{n} * l.c.refillPeriod;
      if (cost <= l.level) continue;
      a.granted = false;
      const int128 wait = n > l.c.capacity
                              ? int128{kNever}
                              : (l.at > now ? int128{l.at} - now : 0) +
                                    (cost - l.level + l.c.refillTokens - 1) / l.c.refillTokens;
      a.waitNanos = std::max(a.waitNanos, clamp(wait));
    }
    a.remaining = kMaxInt64;
    for (Level& l : levels) {
      if (a.granted) l.level -= int128{n} * l.c.refillPeriod;
      a.remaining = std::min(a.remaining, static_cast<std::int64_t>(l.level / l.c.refillPeriod));
    }
    if (!existed || replaced || a.granted) {
      exists_ = true;
      levels_ = levels;
      version_ = version;
      expiresAt_ = kMinInt;
      for (const Level& l : levels) {
        const int128 full = int128{l.c.capacity} * l.c.refillPeriod;
        const int128 untilFull = (full - l.level + l.c.refillTokens - 1) / l.c.refillTokens;
        expiresAt_ = std::max(expiresAt_, clamp(int128{l.at} + untilFull));
      }
    }
    return a;
  }
  Nanos expiresAt() const { return expiresAt_; }

 private:
  static constexpr Nanos kMinInt = limiter::kMinInt64;
  struct Level {
    BucketParams c;
    int128 level;  // in 1/refillPeriod tokens
    Nanos at;
  };
  static Level fresh(const BucketParams& c, Nanos now) {
    return Level{c, int128{c.initialTokens.value_or(c.capacity)} * c.refillPeriod, now};
  }
  static void bringUp(Level& l, Nanos now) {
    if (now <= l.at) return;
    l.level = std::min(int128{l.c.capacity} * l.c.refillPeriod,
                       l.level + int128{now - l.at} * l.c.refillTokens);
    l.at = now;
  }
  static Nanos clamp(int128 v) { return v >= kMaxInt64 ? kNever : static_cast<Nanos>(v); }

  bool exists_ = false;
  std::vector<Level> levels_;
  std::int64_t version_ = 0;
  Nanos expiresAt_ = kNever;
};

TEST_CASE("composite bucket: matches the reference, with configurations replaced",
          "[processors][composite_bucket]") {
  const std::vector<std::vector<BucketParams>> configs = {
      {BucketParams::perPeriod(10, kS), BucketParams::perPeriod(15, 60 * kS)},
      {BucketParams{20, 7, 1000, std::nullopt}},
      {BucketParams{5, 3, 10 * kS, 0}, BucketParams{100, 1, 3, std::nullopt},
       BucketParams{3, 1'000'000'007, 999, 1}},
      {BucketParams::perPeriod(1, 1), BucketParams{kMaxInt64, kMaxInt64, kTenYears, std::nullopt}},
  };
  for (const Replacement rule :
       {Replacement::kAsIs, Replacement::kProportional, Replacement::kReset}) {
    for (const bool jitter : {false, true}) {
      std::mt19937_64 rng(static_cast<std::uint64_t>(rule) * 2 + jitter);
      std::uniform_int_distribution<int> percent(0, 99);
      std::uniform_int_distribution<Nanos> step(0, 2 * kS);
      LimiterStore store;
      ReferenceComposite reference;
      std::int64_t version = 0;
      Nanos now = 1'700'000'000 * kS;
      for (int i = 0; i < 20000; ++i) {
        now += jitter && percent(rng) < 10 ? -step(rng) / 4 : step(rng);
        if (percent(rng) < 3) ++version;
        // Callers lag behind: a third send an older version than the newest.
        const std::int64_t sent =
            percent(rng) < 33 ? std::max<std::int64_t>(0, version - 1) : version;
        CompositeParams p{configs[static_cast<std::size_t>(sent) % configs.size()], sent, rule};
        const std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, 12)(rng);
        INFO("rule " << static_cast<int>(rule) << " jitter " << jitter << " step " << i << " now "
                     << now << " version " << sent << " n " << n);
        const CompositeAnswer expected = reference.acquire(p, n, now);
        REQUIRE(acquire(store, p, n, now) == expected);
        if (store.lastChange == Change::kPut) {
          REQUIRE(store.entry->expiresAt == reference.expiresAt());
        }
      }
    }
  }
}

TEST_CASE("composite bucket: one band answers as the token bucket",
          "[processors][composite_bucket]") {
  std::mt19937_64 rng(5);
  const BucketParams p{20, 7, 1000, 3};
  LimiterStore composite, single;
  Nanos now = 1'700'000'000 * kS;
  for (int i = 0; i < 5000; ++i) {
    now += std::uniform_int_distribution<Nanos>(0, 3000)(rng);
    const std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, 21)(rng);
    const CompositeAnswer c =
        acquire(composite, CompositeParams{{p}, 0, Replacement::kAsIs}, n, now);
    const AcquireAnswer t = single.invoke(TokenBucketAcquire{p, n}, now);
    INFO("step " << i);
    REQUIRE(AcquireAnswer{c.granted, c.remaining, c.waitNanos} == t);
    REQUIRE(composite.entry->expiresAt == single.entry->expiresAt);
  }
}

TEST_CASE("composite bucket: all or nothing, and a batch equals its acquires",
          "[processors][composite_bucket]") {
  LimiterStore s;
  // 1000 per minute and 50 per second: the second band refuses the 51st at once, and the first
  // band keeps what the refused request did not take.
  const CompositeParams p{{BucketParams::perPeriod(1000, 60 * kS), BucketParams::perPeriod(50, kS)},
                          0,
                          Replacement::kAsIs};
  CHECK(acquire(s, p, 50, 0).granted);
  CHECK(acquire(s, p, 1, 0) == CompositeAnswer{false, 0, 20 * kMs, 0});
  CHECK(s.state<CompositeState>().bands[0].level.tokens == 950);

  std::mt19937_64 rng(8);
  LimiterStore batched, single;
  Nanos now = 0;
  for (int step = 0; step < 2000; ++step) {
    now += std::uniform_int_distribution<Nanos>(0, 50 * kMs)(rng);
    CompositeBucketBatchAcquire batch{p, {}};
    std::vector<CompositeAnswer> expected;
    for (int i = std::uniform_int_distribution<int>(1, 6)(rng); i > 0; --i) {
      batch.tokens.push_back(std::uniform_int_distribution<std::int64_t>(1, 60)(rng));
      expected.push_back(acquire(single, p, batch.tokens.back(), now));
    }
    INFO("step " << step);
    REQUIRE(batched.invoke(batch, now) == expected);
    REQUIRE(batched.entry->value == single.entry->value);
    REQUIRE(batched.entry->expiresAt == single.entry->expiresAt);
  }
  CompositeBucketBatchAcquire tooLong{p, std::vector<std::int64_t>(limiter::kMaxBatch + 1, 1)};
  CompositeBucketBatchAcquire decoded;
  CHECK_THROWS_AS(decodeInto(encode(tooLong), decoded), std::length_error);
  CompositeParams nine = p;
  nine.bandwidths.resize(9, BucketParams::perPeriod(1, 1));
  CompositeParams decodedParams;
  CHECK_THROWS_AS(decodeInto(encode(nine), decodedParams), std::length_error);
  decodeInto(encode(p), decodedParams);
  CHECK(decodedParams == p);
}

}  // namespace
}  // namespace ingrid
