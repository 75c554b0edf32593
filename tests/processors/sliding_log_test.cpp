#include <ingrid/processors/sliding_log.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "processors/limiter_store.h"

namespace ingrid {
namespace {

using limiter::int128;
using limiter::kMaxInt64;
using limiter::kMinInt64;
using testing::failure;
using testing::failureText;
using testing::LimiterStore;
using Change = MutableEntry::Change;

static_assert(EntryProcessor<SlidingLogAcquire>);
static_assert(EntryProcessor<SlidingLogBatchAcquire>);

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kS = kNanosPerSecond;
constexpr Nanos kTenYears = 315'360'000'000'000'000;
const SlidingLogParams kFivePerSecond{5, kS};

LimitAnswer acquire(LimiterStore& s, const SlidingLogParams& p, std::int64_t n, Nanos now) {
  return s.invoke(SlidingLogAcquire{p, n}, now);
}

// The reference: one timestamp per granted unit, counted by a filter over the whole history.
// What the processor does not store is not kept either: units leave only when a grant is written
// (the processor prunes its log then) or when the entry expires (a request has seen the newest
// unit's time + window).
class ReferenceLog {
 public:
  explicit ReferenceLog(const SlidingLogParams& p) : p_(p) {}

  LimitAnswer acquire(std::int64_t n, Nanos t) {
    if (!units_.empty() && int128{newest()} + p_.window <= t) units_.clear();
    std::vector<Nanos> in;
    for (Nanos u : units_) {
      if (int128{u} + p_.window > t) in.push_back(u);
    }
    std::sort(in.begin(), in.end());
    const auto used = static_cast<std::int64_t>(in.size());
    LimitAnswer a{false, p_.limit, 0, 0, 0};
    if (used + int128{n} <= p_.limit) {
      a.granted = true;
      const Nanos at = units_.empty() ? t : std::max(t, newest());
      units_ = in;
      units_.insert(units_.end(), static_cast<std::size_t>(n), at);
      in = units_;
    } else if (n > p_.limit) {
      a.retryAfter = kNever;
    } else {
      // The (used + n - limit)-th oldest unit must leave.
      a.retryAfter =
          clamp(int128{in[static_cast<std::size_t>(used + n - p_.limit - 1)]} + p_.window - t);
    }
    a.remaining = std::max<std::int64_t>(0, p_.limit - static_cast<std::int64_t>(in.size()));
    a.resetAfter = in.empty() ? 0 : clamp(int128{in.back()} + p_.window - t);
    return a;
  }
  Nanos newest() const { return *std::max_element(units_.begin(), units_.end()); }
  std::size_t units() const { return units_.size(); }

 private:
  static Nanos clamp(int128 v) { return v >= kMaxInt64 ? kNever : static_cast<Nanos>(v); }
  SlidingLogParams p_;
  std::vector<Nanos> units_;
};

void runAgainstReference(const SlidingLogParams& p, Nanos start, bool jitter, std::uint64_t seed,
                         int steps) {
  std::mt19937_64 rng(seed);
  const Nanos span = std::max<Nanos>(1, std::min<Nanos>(p.window / 3, kMaxInt64 / 8));
  std::uniform_int_distribution<Nanos> step(0, span);
  std::uniform_int_distribution<std::int64_t> quantity(1, p.limit + 1);
  std::uniform_int_distribution<int> percent(0, 99);
  LimiterStore store;
  ReferenceLog reference(p);
  Nanos now = start;
  for (int i = 0; i < steps; ++i) {
    const Nanos d = step(rng);
    const bool back = jitter && percent(rng) < 10;
    if (back ? now < kMinInt64 + d : now > kMaxInt64 - d) break;
    now += back ? -d : d;
    const std::int64_t n = percent(rng) < 60 ? 1 : quantity(rng);
    INFO("step " << i << " now " << now << " n " << n);
    const LimitAnswer expected = reference.acquire(n, now);
    REQUIRE(acquire(store, p, n, now) == expected);
    if (store.lastChange == Change::kPut) {
      REQUIRE(expected.granted);
      const auto log = store.state<SlidingLogState>();
      REQUIRE(log.records.size() <= static_cast<std::size_t>(p.limit));
      REQUIRE_FALSE(SlidingLog::invalidState(log));
      std::int64_t units = 0;
      for (const LogRecord& r : log.records) units += r.count;
      REQUIRE(units == static_cast<std::int64_t>(reference.units()));
      REQUIRE(store.entry->expiresAt == (int128{reference.newest()} + p.window >= kMaxInt64
                                             ? kNever
                                             : reference.newest() + p.window));
    } else {
      REQUIRE_FALSE(expected.granted);
    }
  }
}

TEST_CASE("sliding log: invalid arguments and states are named", "[processors][sliding_log]") {
  CHECK(failureText(SlidingLogAcquire{{0, kS}, 1}) == "limit must be in [1, 4096], got 0");
  CHECK(failureText(SlidingLogAcquire{{4097, kS}, 1}) == "limit must be in [1, 4096], got 4097");
  CHECK(failureText(SlidingLogAcquire{{1, 0}, 1}) == "window must be > 0, got 0");
  CHECK(failureText(SlidingLogAcquire{kFivePerSecond, -4}) == "quantity must be > 0, got -4");
  CHECK(failureText(SlidingLogBatchAcquire{kFivePerSecond, {}}) ==
        "quantities must hold at least one request");
  const Entry unsorted{encode(SlidingLogState{{{5, 1}, {5, 1}}}), kNever};
  CHECK(failureText(SlidingLogAcquire{kFivePerSecond, 1}, &unsorted) ==
        "entry does not hold a sliding log: record 1 is not later than the one before");
  const Entry zero{encode(SlidingLogState{{{5, 0}}}), kNever};
  CHECK(failure(SlidingLogAcquire{kFivePerSecond, 1}, &zero)->code() == Errc::processor_failed);
  // A log longer than the largest limit is refused before it is allocated.
  SlidingLogState longLog;
  for (Nanos i = 0; i <= SlidingLogParams::kMaxLimit; ++i) longLog.records.push_back({i, 1});
  SlidingLogState decoded;
  CHECK_THROWS_AS(decodeInto(encode(longLog), decoded), std::length_error);
}

TEST_CASE("sliding log: grants, retry and reset counted from the log",
          "[processors][sliding_log]") {
  LimiterStore s;
  CHECK(acquire(s, kFivePerSecond, 2, 10 * kS) == LimitAnswer{true, 5, 3, 0, kS});
  CHECK(acquire(s, kFivePerSecond, 2, 10 * kS) == LimitAnswer{true, 5, 1, 0, kS});
  CHECK(s.state<SlidingLogState>() == SlidingLogState{{{10 * kS, 4}}});  // merged
  CHECK(acquire(s, kFivePerSecond, 1, 10400 * kMs) == LimitAnswer{true, 5, 0, 0, kS});
  CHECK(s.entry->expiresAt == 11400 * kMs);
  // 2 more need 2 units to leave: the 4 granted at 10 s leave at 11 s.
  CHECK(acquire(s, kFivePerSecond, 2, 10500 * kMs) ==
        LimitAnswer{false, 5, 0, 500 * kMs, 900 * kMs});
  CHECK(s.lastChange == Change::kNone);
  CHECK(acquire(s, kFivePerSecond, 6, 10500 * kMs).retryAfter == kNever);
  // At 11 s the first record has left the window (now - window, now].
  CHECK(acquire(s, kFivePerSecond, 4, 11 * kS) == LimitAnswer{true, 5, 0, 0, kS});
  CHECK(s.state<SlidingLogState>() == SlidingLogState{{{10400 * kMs, 1}, {11 * kS, 4}}});
  // A clock behind records at the newest time and drops nothing it should keep.
  LimiterStore b;
  CHECK(acquire(b, kFivePerSecond, 3, 10 * kS) == LimitAnswer{true, 5, 2, 0, kS});
  CHECK(acquire(b, kFivePerSecond, 1, 9 * kS) == LimitAnswer{true, 5, 1, 0, 2 * kS});
  CHECK(b.state<SlidingLogState>() == SlidingLogState{{{10 * kS, 4}}});
  CHECK(acquire(b, kFivePerSecond, 2, 9 * kS) == LimitAnswer{false, 5, 1, 2 * kS, 2 * kS});
}

TEST_CASE("sliding log: matches the reference on random sequences", "[processors][sliding_log]") {
  const std::vector<SlidingLogParams> params = {kFivePerSecond, {1, 1},         {3, 7},
                                                {64, kS},       {2, kTenYears}, {100, kMaxInt64}};
  std::uint64_t seed = 51;
  for (const SlidingLogParams& p : params) {
    for (Nanos start : {Nanos{1'700'000'000} * kS, kMinInt64, kMaxInt64 - 3 * kS}) {
      INFO("limit " << p.limit << " window " << p.window << " start " << start);
      runAgainstReference(p, start, false, ++seed, 5000);
      runAgainstReference(p, start, true, ++seed, 5000);
    }
  }
}

TEST_CASE("sliding log: extremes", "[processors][sliding_log]") {
  SECTION("the largest limit, one record per instant") {
    const SlidingLogParams p{SlidingLogParams::kMaxLimit, kMaxInt64};
    LimiterStore s;
    for (Nanos t = 0; t < SlidingLogParams::kMaxLimit; ++t) REQUIRE(acquire(s, p, 1, t).granted);
    CHECK(s.state<SlidingLogState>().records.size() == SlidingLogParams::kMaxLimit);
    CHECK(acquire(s, p, 1, p.limit) ==
          LimitAnswer{false, p.limit, 0, kMaxInt64 - p.limit, kMaxInt64 - 1});
    CHECK(s.entry->expiresAt == kNever);
    CHECK(acquire(s, p, kMaxInt64, 0).retryAfter == kNever);
  }
  SECTION("1 ns and 10-year windows") {
    LimiterStore s;
    CHECK(acquire(s, {1, 1}, 1, kMinInt64) == LimitAnswer{true, 1, 0, 0, 1});
    CHECK(acquire(s, {1, 1}, 1, kMinInt64) == LimitAnswer{false, 1, 0, 1, 1});
    CHECK(acquire(s, {1, 1}, 1, kMinInt64 + 1) == LimitAnswer{true, 1, 0, 0, 1});
    LimiterStore slow;
    CHECK(acquire(slow, {2, kTenYears}, 2, 0) == LimitAnswer{true, 2, 0, 0, kTenYears});
    CHECK(acquire(slow, {2, kTenYears}, 1, kTenYears - 1) == LimitAnswer{false, 2, 0, 1, 1});
  }
}

TEST_CASE("sliding log: a batch equals its acquires in order", "[processors][sliding_log]") {
  testing::checkBatchEqualsSingles<SlidingLogAcquire>(kFivePerSecond, 1, 6, 300 * kMs, 3000, 8);
  SlidingLogBatchAcquire tooLong{kFivePerSecond,
                                 std::vector<std::int64_t>(limiter::kMaxBatch + 1, 1)};
  SlidingLogBatchAcquire decoded;
  CHECK_THROWS_AS(decodeInto(encode(tooLong), decoded), std::length_error);
}

}  // namespace
}  // namespace ingrid
