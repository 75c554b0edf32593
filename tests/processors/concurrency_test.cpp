#include <ingrid/processors/concurrency.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "processors/limiter_store.h"

namespace Catch {
template <>
struct StringMaker<ingrid::LeaseAnswer> {
  static std::string convert(const ingrid::LeaseAnswer& a) {
    std::ostringstream out;
    out << "{granted=" << a.granted << ", lease=" << a.lease << ", limit=" << a.limit
        << ", held=" << a.held << ", retry=" << a.retryAfter << ", expires=" << a.expiresAfter
        << "}";
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

static_assert(EntryProcessor<ConcurrencyAcquire>);
static_assert(EntryProcessor<ConcurrencyBatchAcquire>);
static_assert(EntryProcessor<ConcurrencyRelease>);
static_assert(EntryProcessor<ConcurrencyExtend>);

constexpr Nanos kS = kNanosPerSecond;
constexpr Nanos kTenYears = 315'360'000'000'000'000;
const ConcurrencyParams kThreeFor10s{3, 10 * kS};

LeaseAnswer acquire(LimiterStore& s, const ConcurrencyParams& p, std::int64_t n, Nanos now) {
  return s.invoke(ConcurrencyAcquire{p, n}, now);
}
LeaseAnswer release(LimiterStore& s, std::int64_t lease, Nanos now) {
  return s.invoke(ConcurrencyRelease{lease}, now);
}
LeaseAnswer extend(LimiterStore& s, std::int64_t lease, Nanos ttl, Nanos now) {
  return s.invoke(ConcurrencyExtend{lease, ttl}, now);
}

// The reference: every lease ever granted, never forgotten, with a released flag; a lease is live
// while it is not released and the clock is before its expiry. Ids are max(now, last id + 1) over
// the whole history: equal to the processor's ids exactly when they are unique after the entry
// expired (a clock that never steps back).
class ReferenceConcurrency {
 public:
  explicit ReferenceConcurrency(const ConcurrencyParams& p) : p_(p) {}

  LeaseAnswer acquire(std::int64_t n, Nanos now) {
    const std::int64_t held = heldAt(now);
    const std::int64_t id = last_ ? std::max(now, *last_ + 1) : now;
    LeaseAnswer a{false, 0, p_.limit, held, 0, 0};
    if (n > p_.limit || id == kMaxInt64) {
      a.retryAfter = kNever;
    } else if (held + n <= p_.limit) {
      const int128 end = int128{now} + p_.ttl;
      const Nanos at = end >= kMaxInt64 ? kNever : static_cast<Nanos>(end);
      leases_[id] = Held{at, n, false};
      last_ = id;
      a = LeaseAnswer{true, id, p_.limit, held + n, 0, ttl(at, now)};
    } else {
      std::vector<std::pair<Nanos, std::int64_t>> live;
      for (const auto& [i, l] : leases_) {
        if (isLive(l, now)) live.emplace_back(l.expiresAt, l.units);
      }
      std::sort(live.begin(), live.end());
      std::int64_t freed = 0;
      for (const auto& [at, units] : live) {
        freed += units;
        if (freed >= held + n - p_.limit) {
          a.retryAfter = ttl(at, now);
          break;
        }
      }
    }
    return a;
  }
  LeaseAnswer release(std::int64_t id, Nanos now) {
    auto it = leases_.find(id);
    const bool live = it != leases_.end() && isLive(it->second, now);
    if (live) it->second.released = true;
    return LeaseAnswer{live, id, 0, heldAt(now), 0, 0};
  }
  LeaseAnswer extend(std::int64_t id, Nanos by, Nanos now) {
    auto it = leases_.find(id);
    if (it == leases_.end() || !isLive(it->second, now)) {
      return LeaseAnswer{false, id, 0, heldAt(now), 0, 0};
    }
    const int128 end = int128{now} + by;
    const Nanos at = end >= kMaxInt64 ? kNever : static_cast<Nanos>(end);
    it->second.expiresAt = std::max(it->second.expiresAt, at);
    return LeaseAnswer{true, id, 0, heldAt(now), 0, ttl(it->second.expiresAt, now)};
  }
  // When the entry stops mattering: past the last id and every live lease.
  Nanos expiresAt(Nanos now) const {
    Nanos at = last_ ? (*last_ == kMaxInt64 ? kNever : *last_ + 1) : kMinInt64;
    for (const auto& [i, l] : leases_) {
      if (isLive(l, now)) at = std::max(at, l.expiresAt);
    }
    return at;
  }
  std::vector<std::int64_t> ids() const {
    std::vector<std::int64_t> out;
    for (const auto& [i, l] : leases_) out.push_back(i);
    return out;
  }

 private:
  struct Held {
    Nanos expiresAt;
    std::int64_t units;
    bool released;
  };
  static bool isLive(const Held& l, Nanos now) {
    return !l.released && (l.expiresAt == kNever || now < l.expiresAt);
  }
  static Nanos ttl(Nanos at, Nanos now) {
    return at == kNever ? kNever : at > now ? static_cast<Nanos>(int128{at} - now) : 0;
  }
  std::int64_t heldAt(Nanos now) const {
    std::int64_t held = 0;
    for (const auto& [i, l] : leases_) held += isLive(l, now) ? l.units : 0;
    return held;
  }

  ConcurrencyParams p_;
  std::map<std::int64_t, Held> leases_;
  std::optional<std::int64_t> last_;
};

void runAgainstReference(const ConcurrencyParams& p, Nanos start, Nanos maxStep,
                         std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<Nanos> step(0, maxStep);
  std::uniform_int_distribution<std::int64_t> quantity(1, std::min<std::int64_t>(p.limit + 1, 50));
  std::uniform_int_distribution<Nanos> extension(1, std::max<Nanos>(1, maxStep * 4));
  std::uniform_int_distribution<int> percent(0, 99);
  LimiterStore store;
  ReferenceConcurrency reference(p);
  Nanos now = start;
  for (int i = 0; i < 5000; ++i) {
    const Nanos d = percent(rng) < 30 ? 0 : step(rng);
    if (now > kMaxInt64 - d) break;  // stay inside int64 time
    now += d;
    const int op = percent(rng);
    const auto ids = reference.ids();
    std::int64_t id = now;  // an id nobody has, sometimes
    if (!ids.empty() && percent(rng) < 90) {
      id = ids[std::uniform_int_distribution<std::size_t>(0, ids.size() - 1)(rng)];
    }
    INFO("step " << i << " now " << now << " op " << op << " id " << id);
    LeaseAnswer expected, got;
    if (op < 50) {
      const std::int64_t n = percent(rng) < 60 ? 1 : quantity(rng);
      expected = reference.acquire(n, now);
      got = acquire(store, p, n, now);
      REQUIRE(store.lastChange == (expected.granted ? Change::kPut : Change::kNone));
    } else if (op < 75) {
      expected = reference.release(id, now);
      got = release(store, id, now);
      if (!expected.granted) REQUIRE(store.lastChange == Change::kNone);
      if (expected.granted) REQUIRE(store.lastChange != Change::kNone);
    } else {
      const Nanos by = extension(rng);
      expected = reference.extend(id, by, now);
      got = extend(store, id, by, now);
      if (!expected.granted) REQUIRE(store.lastChange == Change::kNone);
    }
    REQUIRE(got == expected);
    if (store.lastChange == Change::kPut) {
      REQUIRE(store.entry->expiresAt == reference.expiresAt(now));
      REQUIRE(store.entry->expiresAt > now);
      const auto s = store.state<ConcurrencyState>();
      REQUIRE_FALSE(Concurrency::invalidState(s));
      std::int64_t held = 0;
      for (const Lease& l : s.leases) held += l.units;
      REQUIRE(held <= p.limit);
    }
    if (store.lastChange == Change::kRemove) REQUIRE(reference.expiresAt(now) <= now);
  }
}

TEST_CASE("concurrency: invalid arguments name the field and the value",
          "[processors][concurrency]") {
  CHECK(failureText(ConcurrencyAcquire{{0, kS}, 1}) == "limit must be in [1, 4096], got 0");
  CHECK(failureText(ConcurrencyAcquire{{4097, kS}, 1}) == "limit must be in [1, 4096], got 4097");
  CHECK(failureText(ConcurrencyAcquire{{1, 0}, 1}) == "ttl must be > 0, got 0");
  CHECK(failureText(ConcurrencyAcquire{kThreeFor10s, 0}) == "quantity must be > 0, got 0");
  CHECK(failureText(ConcurrencyBatchAcquire{kThreeFor10s, {1, -2}}) ==
        "quantities[1] must be > 0, got -2");
  CHECK(failureText(ConcurrencyExtend{5, -1}) == "ttl must be > 0, got -1");
  CHECK(failure(ConcurrencyAcquire{kThreeFor10s, 0})->code() == Errc::invalid_argument);

  const Entry unsorted{encode(ConcurrencyState{10, {{5, kS, 1}, {5, kS, 1}}}), kNever};
  CHECK(failureText(ConcurrencyAcquire{kThreeFor10s, 1}, &unsorted) ==
        "entry does not hold a concurrency limiter: lease 1 is not later than the one before");
  const Entry zero{encode(ConcurrencyState{10, {{5, kS, 0}}}), kNever};
  CHECK(failureText(ConcurrencyRelease{5}, &zero) ==
        "entry does not hold a concurrency limiter: lease 0 holds 0 units");
  const Entry ahead{encode(ConcurrencyState{5, {{5, kS, 1}}}), kNever};
  CHECK(failureText(ConcurrencyExtend{5, kS}, &ahead) ==
        "entry does not hold a concurrency limiter: lease 0 has an id not below nextId 5");
  CHECK(failure(ConcurrencyExtend{5, kS}, &ahead)->code() == Errc::processor_failed);
  const Entry garbage{"xyz", kNever};
  CHECK_THAT(failureText(ConcurrencyRelease{5}, &garbage),
             Catch::StartsWith("entry does not hold a concurrency limiter: "));
}

TEST_CASE("concurrency: the worked example of docs/concurrency.md", "[processors][concurrency]") {
  LimiterStore s;
  const Nanos t = 100 * kS;
  // Three leases at one instant: ids t, t+1, t+2.
  CHECK(acquire(s, kThreeFor10s, 1, t) == LeaseAnswer{true, t, 3, 1, 0, 10 * kS});
  CHECK(acquire(s, kThreeFor10s, 2, t) == LeaseAnswer{true, t + 1, 3, 3, 0, 10 * kS});
  CHECK(s.entry->expiresAt == t + 10 * kS);
  CHECK(acquire(s, kThreeFor10s, 1, t + kS) == LeaseAnswer{false, 0, 3, 3, 9 * kS, 0});
  CHECK(s.lastChange == Change::kNone);
  CHECK(acquire(s, kThreeFor10s, 4, t + kS) == LeaseAnswer{false, 0, 3, 3, kNever, 0});
  // Releasing the 2-unit lease frees 2; twice is harmless.
  CHECK(release(s, t + 1, t + 2 * kS) == LeaseAnswer{true, t + 1, 0, 1, 0, 0});
  CHECK(release(s, t + 1, t + 2 * kS) == LeaseAnswer{false, t + 1, 0, 1, 0, 0});
  CHECK(s.lastChange == Change::kNone);
  CHECK(acquire(s, kThreeFor10s, 2, t + 2 * kS) == LeaseAnswer{true, t + 2 * kS, 3, 3, 0, 10 * kS});
  // Extending the first lease to 20 s from now; a shorter extension does not shorten it.
  CHECK(extend(s, t, 20 * kS, t + 3 * kS) == LeaseAnswer{true, t, 0, 3, 0, 20 * kS});
  CHECK(extend(s, t, kS, t + 4 * kS) == LeaseAnswer{true, t, 0, 3, 0, 19 * kS});
  CHECK(s.lastChange == Change::kNone);
  CHECK(s.entry->expiresAt == t + 23 * kS);
  // The caller of the 2-unit lease crashed: at 12 s it has expired by itself.
  CHECK(acquire(s, kThreeFor10s, 2, t + 12 * kS) ==
        LeaseAnswer{true, t + 12 * kS, 3, 3, 0, 10 * kS});
  // An expired lease can be neither released nor extended.
  CHECK(extend(s, t + 2 * kS, kS, t + 12 * kS) == LeaseAnswer{false, t + 2 * kS, 0, 3, 0, 0});
  CHECK(release(s, t + 12 * kS, t + 13 * kS) == LeaseAnswer{true, t + 12 * kS, 0, 1, 0, 0});
  CHECK(s.lastChange == Change::kPut);
  // Releasing the last lease removes the entry: the clock is past the last id.
  CHECK(release(s, t, t + 14 * kS) == LeaseAnswer{true, t, 0, 0, 0, 0});
  CHECK(s.lastChange == Change::kRemove);
  CHECK_FALSE(s.entry.has_value());
}

TEST_CASE("concurrency: ids stay unique after the entry expires", "[processors][concurrency]") {
  LimiterStore s;
  const ConcurrencyParams p{1, 1};
  // Acquire and release at one instant, 100 times: the ids run ahead of the clock.
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 100; ++i) {
    const LeaseAnswer a = acquire(s, p, 1, 50);
    REQUIRE(a.granted);
    ids.push_back(a.lease);
    REQUIRE(release(s, a.lease, 50).granted);
    REQUIRE(s.lastChange == Change::kPut);  // kept: the clock has not passed the last id
  }
  CHECK(ids.back() == 149);
  CHECK(s.entry->expiresAt == 150);
  CHECK(acquire(s, p, 1, 120).lease == 150);
  CHECK(release(s, 150, 120).granted);
  // Past the last id the entry is gone, and a new state starts at the clock: above all of them.
  CHECK(acquire(s, p, 1, 151).lease == 151);
}

TEST_CASE("concurrency: a clock behind", "[processors][concurrency]") {
  LimiterStore s;
  CHECK(acquire(s, kThreeFor10s, 1, 100 * kS).lease == 100 * kS);
  // A node 50 s behind: the lease is live for it, its id is above the last one.
  CHECK(acquire(s, kThreeFor10s, 1, 50 * kS) == LeaseAnswer{true, 100 * kS + 1, 3, 2, 0, 10 * kS});
  // Its lease expires at 60 s; the first at 110 s. The entry lives until the latest.
  CHECK(s.entry->expiresAt == 110 * kS);
  CHECK(acquire(s, kThreeFor10s, 2, 55 * kS) == LeaseAnswer{false, 0, 3, 2, 5 * kS, 0});
  // An extension from behind never shortens.
  CHECK(extend(s, 100 * kS, kS, 50 * kS) == LeaseAnswer{true, 100 * kS, 0, 2, 0, 60 * kS});
}

TEST_CASE("concurrency: extremes", "[processors][concurrency]") {
  SECTION("leases that never expire, and the end of int64 time") {
    const ConcurrencyParams forever{2, kNever};
    LimiterStore s;
    CHECK(acquire(s, forever, 1, kMaxInt64 - 2) ==
          LeaseAnswer{true, kMaxInt64 - 2, 2, 1, 0, kNever});
    CHECK(s.entry->expiresAt == kNever);
    CHECK(acquire(s, forever, 1, kMaxInt64 - 2).lease == kMaxInt64 - 1);
    CHECK(release(s, kMaxInt64 - 2, kMaxInt64 - 1).granted);
    // No id is left past INT64_MAX - 1.
    CHECK(acquire(s, forever, 1, kMaxInt64 - 1) == LeaseAnswer{false, 0, 2, 1, kNever, 0});
    LimiterStore end;
    CHECK(acquire(end, forever, 1, kMaxInt64) == LeaseAnswer{false, 0, 2, 0, kNever, 0});
  }
  SECTION("a ttl of 1 ns and of 10 years, a ttl past the end of time") {
    LimiterStore s;
    CHECK(acquire(s, {1, 1}, 1, kMinInt64) == LeaseAnswer{true, kMinInt64, 1, 1, 0, 1});
    CHECK(acquire(s, {1, 1}, 1, kMinInt64) == LeaseAnswer{false, 0, 1, 1, 1, 0});
    CHECK(acquire(s, {1, 1}, 1, kMinInt64 + 1).lease == kMinInt64 + 1);
    LimiterStore slow;
    CHECK(acquire(slow, {1, kTenYears}, 1, 0).expiresAfter == kTenYears);
    CHECK(acquire(slow, {1, kTenYears}, 1, kTenYears - 1) == LeaseAnswer{false, 0, 1, 1, 1, 0});
    LimiterStore late;
    CHECK(acquire(late, {1, kMaxInt64 - 1}, 1, kS) == LeaseAnswer{true, kS, 1, 1, 0, kNever});
    CHECK(extend(late, kS, kMaxInt64, 2 * kS).expiresAfter == kNever);
  }
  SECTION("the largest limit: 4096 one-unit leases, then none") {
    const ConcurrencyParams p{ConcurrencyParams::kMaxLimit, kS};
    LimiterStore s;
    ConcurrencyBatchAcquire batch{p, std::vector<std::int64_t>(4097, 1)};
    const auto answers = s.invoke(batch, 0);
    CHECK(answers[4095].granted);
    CHECK(answers[4096] == LeaseAnswer{false, 0, 4096, 4096, kS, 0});
    const auto state = s.state<ConcurrencyState>();
    CHECK(state.leases.size() == 4096);
    ConcurrencyState decoded;
    std::string bytes = encode(state);
    CHECK_NOTHROW(decodeInto(bytes, decoded));
    ConcurrencyState tooMany = state;
    tooMany.leases.push_back(Lease{5000, kS, 1});
    CHECK_THROWS_AS(decodeInto(encode(tooMany), decoded), std::length_error);
  }
}

TEST_CASE("concurrency: matches the reference on random sequences", "[processors][concurrency]") {
  const std::vector<ConcurrencyParams> params = {
      kThreeFor10s, {1, 1}, {3, 7}, {50, kS}, {4096, kTenYears}, {5, kNever}, {2, kMaxInt64 - 1}};
  std::uint64_t seed = 71;
  for (const ConcurrencyParams& p : params) {
    for (Nanos start : {Nanos{1'700'000'000} * kS, kMinInt64, kMaxInt64 - 3 * kS}) {
      for (Nanos maxStep : {Nanos{3}, kS, kTenYears}) {
        INFO("limit " << p.limit << " ttl " << p.ttl << " start " << start << " step " << maxStep);
        runAgainstReference(p, start, maxStep, ++seed);
      }
    }
  }
}

TEST_CASE("concurrency: a clock walking back and forth keeps the state valid and bounded",
          "[processors][concurrency]") {
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<Nanos> step(0, 3 * kS);
  std::uniform_int_distribution<int> percent(0, 99);
  const ConcurrencyParams p{5, 2 * kS};
  LimiterStore s;
  Nanos now = 1'700'000'000 * kS;
  std::vector<std::int64_t> granted;
  for (int i = 0; i < 20000; ++i) {
    now += percent(rng) < 30 ? -step(rng) : step(rng);  // far from either end of int64
    INFO("step " << i << " now " << now);
    if (percent(rng) < 60 || granted.empty()) {
      const LeaseAnswer a = acquire(s, p, 1 + percent(rng) % 3, now);
      REQUIRE(a.held <= p.limit);
      REQUIRE(a.retryAfter >= 0);
      if (a.granted) granted.push_back(a.lease);
    } else {
      const auto id = granted[static_cast<std::size_t>(percent(rng)) % granted.size()];
      if (percent(rng) < 50) {
        release(s, id, now);
      } else {
        extend(s, id, kS, now);
      }
    }
    if (s.entry) {
      const auto state = s.state<ConcurrencyState>();
      REQUIRE_FALSE(Concurrency::invalidState(state));
      std::int64_t held = 0;
      for (const Lease& l : state.leases) held += l.units;
      REQUIRE(held <= p.limit);
      REQUIRE(s.entry->expiresAt == Concurrency::expiresAt(state));
    }
  }
}

TEST_CASE("concurrency: a batch equals its acquires in order", "[processors][concurrency]") {
  testing::checkBatchEqualsSingles<ConcurrencyAcquire>(kThreeFor10s, 1, 4, 3 * kS, 3000, 5);
  testing::checkBatchEqualsSingles<ConcurrencyAcquire>({4096, 1}, 1, 4097, 2, 500, 6);
  ConcurrencyBatchAcquire tooLong{kThreeFor10s,
                                  std::vector<std::int64_t>(limiter::kMaxBatch + 1, 1)};
  ConcurrencyBatchAcquire decoded;
  CHECK_THROWS_AS(decodeInto(encode(tooLong), decoded), std::length_error);
  const LeaseAnswer a{true, kMinInt64, 3, 1, 0, kNever};
  CHECK(decode<LeaseAnswer>(encode(a)) == a);
  const ConcurrencyState st{7, {{1, 2, 3}, {4, 5, 6}}};
  CHECK(decode<ConcurrencyState>(encode(st)) == st);
}

}  // namespace
}  // namespace ingrid
