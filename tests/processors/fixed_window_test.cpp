#include <ingrid/processors/fixed_window.h>

#include <algorithm>
#include <cstdint>
#include <map>
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

static_assert(EntryProcessor<FixedWindowAcquire>);
static_assert(EntryProcessor<FixedWindowBatchAcquire>);

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kS = kNanosPerSecond;
constexpr Nanos kTenYears = 315'360'000'000'000'000;
const WindowParams kFivePerSecond{5, kS};

LimitAnswer acquire(LimiterStore& s, const WindowParams& p, std::int64_t n, Nanos now) {
  return s.invoke(FixedWindowAcquire{p, n}, now);
}

// The reference: every grant counted in a map by window index. A request counts in the latest
// granted window while its clock is before that window's end (a clock behind), else in its own
// window. Once a request has seen the latest window's end, the entry has expired: the history is
// forgotten.
class ReferenceFixedWindow {
 public:
  explicit ReferenceFixedWindow(const WindowParams& p) : p_(p) {}

  LimitAnswer acquire(std::int64_t n, Nanos t) {
    if (latest_ && t >= end(*latest_)) {
      latest_.reset();
      granted_.clear();
    }
    const int128 own = floorDiv(t);
    const int128 k = latest_ ? *latest_ : own;
    std::int64_t& count = granted_[k];
    LimitAnswer a{false, p_.limit, 0, 0, 0};
    if (int128{count} + n <= p_.limit) {
      a.granted = true;
      count += n;
      latest_ = k;
    } else {
      a.retryAfter = n > p_.limit ? kNever : clamp(end(k) - t);
    }
    a.remaining = std::max<std::int64_t>(0, p_.limit - count);
    a.resetAfter = count > 0 ? clamp(end(k) - t) : 0;
    return a;
  }
  // The stored state's expiry: the latest granted window's end.
  Nanos expiresAt() const { return clamp(end(*latest_)); }

 private:
  int128 floorDiv(Nanos t) const {
    int128 q = t / p_.window;
    if (t % p_.window != 0 && t < 0) --q;
    return q;
  }
  int128 end(int128 k) const {
    // The earliest window is cut at INT64_MIN, but it ends where it would have.
    return (k + 1) * p_.window;
  }
  static Nanos clamp(int128 v) { return v >= kMaxInt64 ? kNever : static_cast<Nanos>(v); }

  WindowParams p_;
  std::optional<int128> latest_;
  std::map<int128, std::int64_t> granted_;
};

void runAgainstReference(const WindowParams& p, Nanos start, bool jitter, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Nanos span = std::max<Nanos>(1, std::min<Nanos>(p.window / 2, kMaxInt64 / 8));
  std::uniform_int_distribution<Nanos> step(0, span);
  std::uniform_int_distribution<std::int64_t> quantity(1, std::min(p.limit, kMaxInt64 - 1) + 1);
  std::uniform_int_distribution<int> percent(0, 99);
  LimiterStore store;
  ReferenceFixedWindow reference(p);
  Nanos now = start;
  for (int i = 0; i < 20000; ++i) {
    const Nanos d = step(rng);
    const bool back = jitter && percent(rng) < 10;
    if (back ? now < kMinInt64 + d : now > kMaxInt64 - d) break;  // stay inside int64 time
    now += back ? -d : d;
    const std::int64_t n = percent(rng) < 50 ? 1 : quantity(rng);
    INFO("step " << i << " now " << now << " n " << n);
    const LimitAnswer expected = reference.acquire(n, now);
    REQUIRE(acquire(store, p, n, now) == expected);
    if (store.lastChange == Change::kPut) {
      REQUIRE(expected.granted);
      REQUIRE(store.entry->expiresAt == reference.expiresAt());
    } else {
      REQUIRE_FALSE(expected.granted);
    }
  }
}

TEST_CASE("fixed window: invalid arguments name the field and the value",
          "[processors][fixed_window]") {
  CHECK(failureText(FixedWindowAcquire{{0, kS}, 1}) == "limit must be > 0, got 0");
  CHECK(failureText(FixedWindowAcquire{{1, -1}, 1}) == "window must be > 0, got -1");
  CHECK(failureText(FixedWindowAcquire{kFivePerSecond, 0}) == "quantity must be > 0, got 0");
  CHECK(failureText(FixedWindowBatchAcquire{kFivePerSecond, {1, -1}}) ==
        "quantities[1] must be > 0, got -1");
  CHECK(failure(FixedWindowAcquire{kFivePerSecond, 0})->code() == Errc::invalid_argument);
  const Entry negative{encode(FixedWindowState{0, -1}), kNever};
  auto e = failure(FixedWindowAcquire{kFivePerSecond, 1}, &negative);
  REQUIRE(e);
  CHECK(e->code() == Errc::processor_failed);
  CHECK(std::string(e->what()) == "entry does not hold a fixed window: negative count -1");
}

TEST_CASE("fixed window: the worked example of docs/fixed-window.md",
          "[processors][fixed_window]") {
  LimiterStore s;
  CHECK(acquire(s, kFivePerSecond, 3, 10300 * kMs) == LimitAnswer{true, 5, 2, 0, 700 * kMs});
  CHECK(s.state<FixedWindowState>() == FixedWindowState{10 * kS, 3});
  CHECK(s.entry->expiresAt == 11 * kS);
  CHECK(acquire(s, kFivePerSecond, 3, 10900 * kMs) ==
        LimitAnswer{false, 5, 2, 100 * kMs, 100 * kMs});
  CHECK(s.lastChange == Change::kNone);
  CHECK(acquire(s, kFivePerSecond, 2, 10900 * kMs) == LimitAnswer{true, 5, 0, 0, 100 * kMs});
  CHECK(acquire(s, kFivePerSecond, 5, 11 * kS) == LimitAnswer{true, 5, 0, 0, kS});
  CHECK(s.state<FixedWindowState>() == FixedWindowState{11 * kS, 5});
  CHECK(acquire(s, kFivePerSecond, 6, 11 * kS) == LimitAnswer{false, 5, 0, kNever, kS});
  LimiterStore fresh;
  CHECK(acquire(fresh, kFivePerSecond, 6, 0) == LimitAnswer{false, 5, 5, kNever, 0});
  CHECK_FALSE(fresh.entry.has_value());
}

TEST_CASE("fixed window: a clock behind counts in the stored window",
          "[processors][fixed_window]") {
  LimiterStore s;
  CHECK(acquire(s, kFivePerSecond, 4, 11 * kS) == LimitAnswer{true, 5, 1, 0, kS});
  // 10.5 s is in the window before: the stored window [11 s, 12 s) still counts.
  CHECK(acquire(s, kFivePerSecond, 2, 10500 * kMs) ==
        LimitAnswer{false, 5, 1, 1500 * kMs, 1500 * kMs});
  CHECK(acquire(s, kFivePerSecond, 1, 10500 * kMs) == LimitAnswer{true, 5, 0, 0, 1500 * kMs});
  CHECK(s.state<FixedWindowState>() == FixedWindowState{11 * kS, 5});
  // The farthest behind: durations saturate.
  s.entry = Entry{encode(FixedWindowState{kMaxInt64 - 10, 5}), kNever};
  CHECK(acquire(s, kFivePerSecond, 1, kMinInt64) == LimitAnswer{false, 5, 0, kNever, kNever});
}

TEST_CASE("fixed window: matches the reference on random sequences", "[processors][fixed_window]") {
  const std::vector<WindowParams> params = {
      kFivePerSecond,        {1, 1}, {3, 7}, {1000, kS}, {2, kTenYears}, {kMaxInt64, 1000},
      {kMaxInt64, kMaxInt64}};
  std::uint64_t seed = 31;
  for (const WindowParams& p : params) {
    for (Nanos start : {Nanos{1'700'000'000} * kS, kMinInt64, kMaxInt64 - 3 * kS}) {
      INFO("limit " << p.limit << " window " << p.window << " start " << start);
      runAgainstReference(p, start, false, ++seed);
      runAgainstReference(p, start, true, ++seed);
    }
  }
}

TEST_CASE("fixed window: extremes", "[processors][fixed_window]") {
  SECTION("a limit of INT64_MAX") {
    const WindowParams p{kMaxInt64, kS};
    LimiterStore s;
    CHECK(acquire(s, p, kMaxInt64 - 1, 0) == LimitAnswer{true, kMaxInt64, 1, 0, kS});
    CHECK(acquire(s, p, kMaxInt64, 0) == LimitAnswer{false, kMaxInt64, 1, kS, kS});
    CHECK(acquire(s, p, 1, 0) == LimitAnswer{true, kMaxInt64, 0, 0, kS});
  }
  SECTION("the window holding INT64_MIN is cut there; the last one never expires") {
    const WindowParams p{2, kMaxInt64};
    LimiterStore s;
    CHECK(acquire(s, p, 1, kMinInt64) == LimitAnswer{true, 2, 1, 0, 1});
    CHECK(s.state<FixedWindowState>() == FixedWindowState{kMinInt64, 1});
    CHECK(s.entry->expiresAt == -kMaxInt64);  // window [-2(2^63-1), -(2^63-1))
    LimiterStore last;
    CHECK(acquire(last, p, 2, kMaxInt64 - 1) == LimitAnswer{true, 2, 0, 0, 1});
    CHECK(last.entry->expiresAt == kNever);
  }
  SECTION("1 ns and 10-year windows") {
    LimiterStore s;
    CHECK(acquire(s, {1, 1}, 1, 5) == LimitAnswer{true, 1, 0, 0, 1});
    CHECK(acquire(s, {1, 1}, 1, 5) == LimitAnswer{false, 1, 0, 1, 1});
    CHECK(acquire(s, {1, 1}, 1, 6) == LimitAnswer{true, 1, 0, 0, 1});
    LimiterStore slow;
    CHECK(acquire(slow, {1, kTenYears}, 1, kTenYears + 5) ==
          LimitAnswer{true, 1, 0, 0, kTenYears - 5});
    CHECK(slow.entry->expiresAt == 2 * kTenYears);
  }
}

TEST_CASE("fixed window: a batch equals its acquires in order", "[processors][fixed_window]") {
  testing::checkBatchEqualsSingles<FixedWindowAcquire>(kFivePerSecond, 1, 6, 300 * kMs, 3000, 5);
  testing::checkBatchEqualsSingles<FixedWindowAcquire>({kMaxInt64, 10}, 1, kMaxInt64, 4, 500, 6);
  FixedWindowBatchAcquire tooLong{kFivePerSecond,
                                  std::vector<std::int64_t>(limiter::kMaxBatch + 1, 1)};
  FixedWindowBatchAcquire decoded;
  CHECK_THROWS_AS(decodeInto(encode(tooLong), decoded), std::length_error);
  const LimitAnswer a{true, 5, 1, 0, kNever};
  CHECK(decode<LimitAnswer>(encode(a)) == a);
  CHECK(decode<FixedWindowState>(encode(FixedWindowState{kMinInt64, 7})) ==
        FixedWindowState{kMinInt64, 7});
}

}  // namespace
}  // namespace ingrid
