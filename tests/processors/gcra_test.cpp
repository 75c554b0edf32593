#include <ingrid/processors/gcra.h>

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
struct StringMaker<ingrid::GcraAnswer> {
  static std::string convert(const ingrid::GcraAnswer& a) {
    std::ostringstream out;
    out << "{limited=" << a.limited << ", limit=" << a.limit << ", remaining=" << a.remaining
        << ", retry=" << a.retryAfter << ", reset=" << a.resetAfter << "}";
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

static_assert(EntryProcessor<GcraThrottle>);
static_assert(EntryProcessor<GcraBatchThrottle>);

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kS = kNanosPerSecond;
constexpr Nanos kTenYears = 315'360'000'000'000'000;

// docs/gcra.md's example: 5 at once, 5 per second.
const GcraParams kFivePerSecond{4, 5, kS};

GcraAnswer throttle(LimiterStore& s, const GcraParams& p, std::int64_t q, Nanos now) {
  return s.invoke(GcraThrottle{p, q}, now);
}

// The reference: the continuous-state leaky bucket of the ATM Forum's GCRA definition, which is
// equivalent to the virtual-scheduling (TAT) form the processor uses. `x` is the bucket's
// content in nanoseconds, `lct` the last conformance time. All of it in 128-bit, no saturation
// until the answer.
class ReferenceGcra {
 public:
  explicit ReferenceGcra(const GcraParams& p)
      : e_((int128{p.period} + p.count - 1) / p.count), limit_(p.maxBurst + 1), tau_(limit_ * e_) {}

  GcraAnswer throttle(std::int64_t q, Nanos t) {
    // The entry expires at its TAT: once a request has seen that time, it is forgotten, even by
    // a later request whose clock is behind.
    if (t >= tat() && tat() < kMaxInt64) {
      x_ = 0;
      lct_ = kMinInt64;
    }
    const int128 drained = std::max<int128>(0, x_ - (int128{t} - lct_));  // x' in the ATM text
    const int128 inc = q * e_;
    GcraAnswer a;
    a.limit = static_cast<std::int64_t>(limit_);
    int128 ttl = drained;
    // The new TAT, t + x' + inc, must be storable in int64.
    const bool storable = int128{t} + drained + inc <= kMaxInt64;
    if (drained + inc <= tau_ && storable) {
      if (q > 0) {
        x_ = drained + inc;
        lct_ = t;
      }
      ttl = drained + inc;
    } else {
      a.limited = true;
      a.retryAfter = inc <= tau_ && storable ? clamp(drained + inc - tau_) : kNever;
    }
    a.remaining = tau_ - ttl > 0 ? static_cast<std::int64_t>((tau_ - ttl) / e_) : 0;
    a.resetAfter = clamp(ttl);
    return a;
  }
  // The TAT the processor should have stored: when the bucket is empty again.
  int128 tat() const { return int128{lct_} + x_; }

 private:
  static Nanos clamp(int128 v) { return v >= kMaxInt64 ? kNever : static_cast<Nanos>(v); }
  int128 e_, limit_, tau_;
  int128 x_ = 0;
  Nanos lct_ = kMinInt64;  // with x_ = 0: no entry
};

void runAgainstReference(const GcraParams& p, bool jitter, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Nanos e = p.emissionInterval();
  // Steps of up to a few emission intervals; quantities up to one past the limit.
  const std::int64_t pastLimit = p.maxBurst >= kMaxInt64 - 2 ? kMaxInt64 : p.maxBurst + 2;
  const Nanos span = static_cast<Nanos>(
      std::min<int128>(kMaxInt64 / 4, int128{e} * std::min<std::int64_t>(pastLimit, 8)));
  std::uniform_int_distribution<Nanos> forward(0, span);
  std::uniform_int_distribution<Nanos> backward(0, span);
  std::uniform_int_distribution<std::int64_t> quantity(0, pastLimit);
  std::uniform_int_distribution<int> percent(0, 99);
  LimiterStore store;
  ReferenceGcra reference(p);
  Nanos now = 1'700'000'000 * kS;
  for (int step = 0; step < 20000; ++step) {
    const bool back = jitter && percent(rng) < 10;
    const Nanos d = back ? backward(rng) : forward(rng);
    if (back ? now < kMinInt64 + d : now > kMaxInt64 - d) break;  // stay inside int64 time
    now += back ? -d : d;
    const std::int64_t q = percent(rng) < 50 ? 1 : quantity(rng);
    INFO("step " << step << " now " << now << " quantity " << q);
    const GcraAnswer expected = reference.throttle(q, now);
    REQUIRE(throttle(store, p, q, now) == expected);
    if (store.lastChange == Change::kPut) {
      REQUIRE(expected.granted());
      REQUIRE(store.state<std::int64_t>() == reference.tat());
      REQUIRE(store.entry->expiresAt == reference.tat());
    } else {
      REQUIRE(store.lastChange == Change::kNone);
      REQUIRE((expected.limited || q == 0));
    }
  }
}

TEST_CASE("GCRA: invalidReason names the field and the value", "[processors][gcra]") {
  auto reason = [](GcraParams p) { return p.invalidReason().value_or("(valid)"); };
  CHECK(reason(kFivePerSecond) == "(valid)");
  CHECK(reason({-1, 1, 1}) == "maxBurst must be in [0, 9223372036854775806], got -1");
  CHECK(reason({kMaxInt64, 1, 1}) ==
        "maxBurst must be in [0, 9223372036854775806], got 9223372036854775807");
  CHECK(reason({0, 0, 1}) == "count must be > 0, got 0");
  CHECK(reason({0, 1, -5}) == "period must be > 0, got -5");
  CHECK(reason({kMaxInt64 - 1, kMaxInt64, kMaxInt64}) == "(valid)");

  CHECK(failureText(GcraThrottle{{0, 0, 1}, 1}) == "count must be > 0, got 0");
  CHECK(failureText(GcraThrottle{kFivePerSecond, -1}) == "quantity must be >= 0, got -1");
  CHECK(failureText(GcraBatchThrottle{kFivePerSecond, {}}) ==
        "quantities must hold at least one request");
  CHECK(failureText(GcraBatchThrottle{kFivePerSecond, {1, 0, -2}}) ==
        "quantities[2] must be >= 0, got -2");
  auto e = failure(GcraThrottle{kFivePerSecond, kMinInt64});
  REQUIRE(e);
  CHECK(e->code() == Errc::invalid_argument);
}

TEST_CASE("GCRA: an entry that does not decode fails with processor_failed", "[processors][gcra]") {
  const Entry garbage{"abc", kNever};
  auto e = failure(GcraThrottle{kFivePerSecond, 1}, &garbage);
  REQUIRE(e);
  CHECK(e->code() == Errc::processor_failed);
  CHECK(std::string(e->what()).rfind("entry does not hold a GCRA limiter: ", 0) == 0);
}

TEST_CASE("GCRA: the emission interval rounds up", "[processors][gcra]") {
  CHECK(GcraParams{0, 5, kS}.emissionInterval() == 200 * kMs);
  CHECK(GcraParams{0, 3, 10}.emissionInterval() == 4);
  CHECK(GcraParams{0, 1000, 10}.emissionInterval() == 1);  // at most one per nanosecond
  CHECK(GcraParams{0, 1, kMaxInt64}.emissionInterval() == kMaxInt64);
  CHECK(GcraParams{0, kMaxInt64, kMaxInt64}.emissionInterval() == 1);
}

TEST_CASE("GCRA: the worked example of docs/gcra.md", "[processors][gcra]") {
  LimiterStore s;
  const Nanos t = 10 * kS;
  CHECK(throttle(s, kFivePerSecond, 1, t) == GcraAnswer{false, 5, 4, 0, 200 * kMs});
  CHECK(s.state<std::int64_t>() == t + 200 * kMs);
  CHECK(s.entry->expiresAt == t + 200 * kMs);
  CHECK(throttle(s, kFivePerSecond, 4, t) == GcraAnswer{false, 5, 0, 0, kS});
  CHECK(throttle(s, kFivePerSecond, 1, t) == GcraAnswer{true, 5, 0, 200 * kMs, kS});
  CHECK(s.lastChange == Change::kNone);
  CHECK(throttle(s, kFivePerSecond, 1, t + 200 * kMs - 1) ==
        GcraAnswer{true, 5, 0, 1, 800 * kMs + 1});
  CHECK(throttle(s, kFivePerSecond, 1, t + 200 * kMs) == GcraAnswer{false, 5, 0, 0, kS});
  CHECK(s.state<std::int64_t>() == t + 1200 * kMs);
  CHECK(throttle(s, kFivePerSecond, 6, t) == GcraAnswer{true, 5, 0, kNever, 1200 * kMs});
  // A quantity of 0 reads: it answers and writes nothing.
  CHECK(throttle(s, kFivePerSecond, 0, t + 600 * kMs) == GcraAnswer{false, 5, 2, 0, 600 * kMs});
  CHECK(s.lastChange == Change::kNone);
  // Expired at the TAT: the same as a new limiter.
  CHECK(throttle(s, kFivePerSecond, 5, t + 1200 * kMs) == GcraAnswer{false, 5, 0, 0, kS});
  LimiterStore fresh;
  CHECK(throttle(fresh, kFivePerSecond, 0, t) == GcraAnswer{false, 5, 5, 0, 0});
  CHECK_FALSE(fresh.entry.has_value());
}

TEST_CASE("GCRA: matches the reference on random sequences", "[processors][gcra]") {
  const std::vector<GcraParams> params = {
      kFivePerSecond,
      {0, 1, 1},                          // one per nanosecond, no burst
      {9, 3, 10},                         // 3 per 10 ns: E rounds up to 4
      {2, 7, 1000},                       // 7 does not divide 1000
      {99, 1000, kS},                     // a burst of 100
      {0, 1000, 10},                      // faster than one per ns: one per ns
      {3, 1, kTenYears},                  // 10-year period
      {kMaxInt64 - 1, 1, 1},              // a burst of INT64_MAX
      {kMaxInt64 - 1, 1, kMaxInt64 / 2},  // tau near 2^125: grants overflow the TAT
  };
  std::uint64_t seed = 11;
  for (const GcraParams& p : params) {
    INFO("maxBurst " << p.maxBurst << " count " << p.count << " period " << p.period);
    runAgainstReference(p, false, ++seed);
    runAgainstReference(p, true, ++seed);
  }
}

TEST_CASE("GCRA: extremes neither overflow nor grant past INT64_MAX", "[processors][gcra]") {
  SECTION("a burst of INT64_MAX at 1 ns") {
    const GcraParams p{kMaxInt64 - 1, 1, 1};
    LimiterStore s;
    CHECK(throttle(s, p, kMaxInt64, 0) == GcraAnswer{false, kMaxInt64, 0, 0, kMaxInt64 - 1 + 1});
    CHECK(s.state<std::int64_t>() == kMaxInt64);
    CHECK(s.entry->expiresAt == kNever);
    // Anything more would put the TAT past INT64_MAX: refused, never.
    CHECK(throttle(s, p, 1, 0) == GcraAnswer{true, kMaxInt64, 0, kNever, kNever});
    LimiterStore late;
    CHECK(throttle(late, p, kMaxInt64, kS).retryAfter == kNever);
    CHECK(throttle(late, p, kMaxInt64 - kS, kS) ==
          GcraAnswer{false, kMaxInt64, kS, 0, kMaxInt64 - kS});
  }
  SECTION("the earliest now and the largest quantity") {
    const GcraParams p{kMaxInt64 - 1, 1, kMaxInt64};
    LimiterStore s;
    const GcraAnswer a = throttle(s, p, kMaxInt64, kMinInt64);
    CHECK(a.limited);
    CHECK(a.retryAfter == kNever);  // inc = (2^63-1)^2 > INT64_MAX - now
    CHECK(a.remaining == kMaxInt64);
    CHECK(throttle(s, p, 1, kMinInt64) ==
          GcraAnswer{false, kMaxInt64, kMaxInt64 - 1, 0, kMaxInt64});
    CHECK(s.state<std::int64_t>() == -1);
  }
  SECTION("a 10-year period") {
    const GcraParams p{0, 1, kTenYears};
    LimiterStore s;
    CHECK(throttle(s, p, 1, 0) == GcraAnswer{false, 1, 0, 0, kTenYears});
    CHECK(throttle(s, p, 1, kTenYears / 2) == GcraAnswer{true, 1, 0, kTenYears / 2, kTenYears / 2});
    CHECK(throttle(s, p, 1, kTenYears) == GcraAnswer{false, 1, 0, 0, kTenYears});
  }
  SECTION("a 1 ns period") {
    const GcraParams p{2, 1, 1};
    LimiterStore s;
    CHECK(throttle(s, p, 3, 100) == GcraAnswer{false, 3, 0, 0, 3});
    CHECK(throttle(s, p, 1, 100) == GcraAnswer{true, 3, 0, 1, 3});
    CHECK(throttle(s, p, 1, 101) == GcraAnswer{false, 3, 0, 0, 3});
  }
}

TEST_CASE("GCRA: a clock stepping back refuses sooner and never grants more",
          "[processors][gcra]") {
  LimiterStore s;
  s.entry = Entry{encode(std::int64_t{10 * kS + 600 * kMs}), kNever};  // 3 taken at 10 s
  // At 10 s: 2 left. At 9.5 s (behind): the TAT is 1.1 s ahead, 0.1 s above tau: none left.
  CHECK(throttle(s, kFivePerSecond, 1, 9500 * kMs) ==
        GcraAnswer{true, 5, 0, 300 * kMs, 1100 * kMs});
  CHECK(throttle(s, kFivePerSecond, 2, 10 * kS) == GcraAnswer{false, 5, 0, 0, kS});
  CHECK(s.state<std::int64_t>() == 11 * kS);
  // The farthest step back: durations saturate.
  s.entry = Entry{encode(kMaxInt64 - 1), kNever};
  CHECK(throttle(s, kFivePerSecond, 1, kMinInt64) == GcraAnswer{true, 5, 0, kNever, kNever});
}

TEST_CASE("GCRA: a batch equals its throttles in order", "[processors][gcra]") {
  LimiterStore s;
  const auto answers = s.invoke(GcraBatchThrottle{kFivePerSecond, {2, 6, 0, 3, 1}}, 10 * kS);
  CHECK(answers == std::vector<GcraAnswer>{{false, 5, 3, 0, 400 * kMs},
                                           {true, 5, 3, kNever, 400 * kMs},
                                           {false, 5, 3, 0, 400 * kMs},
                                           {false, 5, 0, 0, kS},
                                           {true, 5, 0, 200 * kMs, kS}});
  CHECK(s.state<std::int64_t>() == 11 * kS);

  std::mt19937_64 rng(99);
  std::uniform_int_distribution<Nanos> forward(0, 400 * kMs);
  std::uniform_int_distribution<std::int64_t> quantity(0, 6);
  std::uniform_int_distribution<std::size_t> count(1, 8);
  LimiterStore batched, single;
  Nanos now = 0;
  for (int step = 0; step < 3000; ++step) {
    now += forward(rng);
    GcraBatchThrottle batch{kFivePerSecond, std::vector<std::int64_t>(count(rng))};
    for (auto& q : batch.quantities) q = quantity(rng);
    std::vector<GcraAnswer> expected;
    for (std::int64_t q : batch.quantities)
      expected.push_back(throttle(single, kFivePerSecond, q, now));
    INFO("step " << step);
    REQUIRE(batched.invoke(batch, now) == expected);
    REQUIRE(batched.entry.has_value() == single.entry.has_value());
    if (batched.entry) {
      REQUIRE(batched.entry->value == single.entry->value);
      REQUIRE(batched.entry->expiresAt == single.entry->expiresAt);
    }
  }
}

TEST_CASE("GCRA: batches are bounded and round-trip", "[processors][gcra]") {
  GcraBatchThrottle tooLong{kFivePerSecond, std::vector<std::int64_t>(limiter::kMaxBatch + 1, 1)};
  GcraBatchThrottle decoded;
  CHECK_THROWS_AS(decodeInto(encode(tooLong), decoded), std::length_error);
  CHECK(failure(tooLong)->code() == Errc::invalid_argument);
  const GcraBatchThrottle ok{kFivePerSecond, {1, 2, 3}};
  decoded = decode<GcraBatchThrottle>(encode(ok));
  CHECK(decoded.params == ok.params);
  CHECK(decoded.quantities == ok.quantities);
  const GcraAnswer a{true, 5, 1, kNever, 3};
  CHECK(decode<GcraAnswer>(encode(a)) == a);
  const auto batch =
      GcraThrottle::batch({GcraThrottle{kFivePerSecond, 2}, GcraThrottle{kFivePerSecond, 0}});
  CHECK(batch.quantities == std::vector<std::int64_t>{2, 0});
  CHECK(GcraThrottle::joinable(GcraThrottle{kFivePerSecond, 2}, GcraThrottle{kFivePerSecond, 9}));
  CHECK_FALSE(GcraThrottle::joinable(GcraThrottle{kFivePerSecond, 2}, GcraThrottle{{4, 5, 2}, 2}));
}

}  // namespace
}  // namespace ingrid
