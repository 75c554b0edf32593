#include <ingrid/processors/leaky_bucket.h>

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
struct StringMaker<ingrid::ShaperAnswer> {
  static std::string convert(const ingrid::ShaperAnswer& a) {
    std::ostringstream out;
    out << "{granted=" << a.granted << ", delay=" << a.delay << ", limit=" << a.limit
        << ", remaining=" << a.remaining << ", retry=" << a.retryAfter << ", reset=" << a.resetAfter
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

static_assert(EntryProcessor<LeakyMeterAcquire>);
static_assert(EntryProcessor<LeakyMeterBatchAcquire>);
static_assert(EntryProcessor<LeakyShaperAcquire>);
static_assert(EntryProcessor<LeakyShaperBatchAcquire>);

constexpr Nanos kMs = 1'000'000;
constexpr Nanos kS = kNanosPerSecond;
constexpr Nanos kTenYears = 315'360'000'000'000'000;
const LeakyMeterParams kMeter{10, 10, kS};
const LeakyShaperParams kShaper{3, 10, kS};

LimitAnswer pour(LimiterStore& s, const LeakyMeterParams& p, std::int64_t n, Nanos now) {
  return s.invoke(LeakyMeterAcquire{p, n}, now);
}
ShaperAnswer join(LimiterStore& s, const LeakyShaperParams& p, std::int64_t n, Nanos now) {
  return s.invoke(LeakyShaperAcquire{p, n}, now);
}
Nanos clamp(int128 v) { return v >= kMaxInt64 ? kNever : static_cast<Nanos>(v); }
int128 ceilDiv(int128 a, int128 b) { return a <= 0 ? 0 : (a + b - 1) / b; }

// The meter's reference: the content as one exact number in units of 1/leakPeriod (no whole and
// fraction split), leaking (t - at) * leakCount. Stored only when a grant is written; forgotten
// once a request has seen the time the stored content reaches 0 (the entry expired).
class ReferenceMeter {
 public:
  explicit ReferenceMeter(const LeakyMeterParams& p) : p_(p) {}

  LimitAnswer pour(std::int64_t n, Nanos t) {
    if (stored_ && t >= emptyAt()) stored_ = false;
    int128 c = stored_ ? content_ : 0;
    int128 at = stored_ ? at_ : t;
    if (t > at) {
      c = std::max<int128>(0, c - (int128{t} - at) * p_.leakCount);
      at = t;
    }
    const int128 gap = at - t;  // > 0 for a clock behind
    const int128 whole = ceilDiv(c, p_.leakPeriod);
    LimitAnswer a{false, p_.capacity, 0, 0, 0};
    if (whole + n <= p_.capacity) {
      a.granted = true;
      c += int128{n} * p_.leakPeriod;
      content_ = c;
      at_ = static_cast<Nanos>(at);
      stored_ = true;
    } else if (n > p_.capacity) {
      a.retryAfter = kNever;
    } else {
      a.retryAfter =
          clamp(gap + ceilDiv(c - int128{p_.capacity - n} * p_.leakPeriod, p_.leakCount));
    }
    a.remaining =
        static_cast<std::int64_t>(std::max<int128>(0, p_.capacity - ceilDiv(c, p_.leakPeriod)));
    a.resetAfter = c == 0 ? 0 : clamp(gap + ceilDiv(c, p_.leakCount));
    return a;
  }
  int128 emptyAt() const { return int128{at_} + ceilDiv(content_, p_.leakCount); }
  int128 content() const { return content_; }

 private:
  LeakyMeterParams p_;
  bool stored_ = false;
  int128 content_ = 0;
  Nanos at_ = 0;
};

void meterAgainstReference(const LeakyMeterParams& p, bool jitter, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int128 perUnit = ceilDiv(p.leakPeriod, p.leakCount);
  const Nanos span = static_cast<Nanos>(std::clamp<int128>(perUnit * 3, 1, kMaxInt64 / 8));
  std::uniform_int_distribution<Nanos> step(0, span);
  std::uniform_int_distribution<std::int64_t> quantity(1, std::min(p.capacity, kMaxInt64 - 1) + 1);
  std::uniform_int_distribution<int> percent(0, 99);
  LimiterStore store;
  ReferenceMeter reference(p);
  Nanos now = 1'700'000'000 * kS;
  for (int i = 0; i < 20000; ++i) {
    const Nanos d = step(rng);
    const bool back = jitter && percent(rng) < 10;
    if (back ? now < kMinInt64 + d : now > kMaxInt64 - d) break;
    now += back ? -d : d;
    const std::int64_t n = percent(rng) < 50 ? 1 : quantity(rng);
    INFO("step " << i << " now " << now << " n " << n);
    const LimitAnswer expected = reference.pour(n, now);
    REQUIRE(pour(store, p, n, now) == expected);
    if (store.lastChange == Change::kPut) {
      REQUIRE(expected.granted);
      const auto s = store.state<LeakyMeterState>();
      REQUIRE((s.drained >= 0 && s.drained < p.leakPeriod));
      REQUIRE(int128{s.level} * p.leakPeriod - s.drained == reference.content());
      REQUIRE(store.entry->expiresAt == clamp(reference.emptyAt()));
    } else {
      REQUIRE_FALSE(expected.granted);
    }
  }
}

// The shaper's reference: a queue of admitted requests, each served after the one before it
// for quantity * E nanoseconds, E = ceil(period / count). A request joins if the queue's work
// ahead of it plus its own fits in capacity * E.
class ReferenceShaper {
 public:
  explicit ReferenceShaper(const LeakyShaperParams& p)
      : p_(p), e_((int128{p.period} + p.count - 1) / p.count) {}

  ShaperAnswer join(std::int64_t n, Nanos t) {
    if (queueEnd_ && t >= *queueEnd_) queueEnd_.reset();  // empty: the entry expired
    const int128 turn = queueEnd_ ? std::max<int128>(*queueEnd_, t) : t;
    const int128 done = turn + n * e_;
    const int128 room = p_.capacity * e_;
    ShaperAnswer a{false, 0, p_.capacity, 0, 0, 0};
    int128 end = turn;
    if (done - t <= room && done <= kMaxInt64) {
      a.granted = true;
      a.delay = clamp(turn - t);
      queueEnd_ = done;
      end = done;
    } else {
      a.retryAfter = n <= p_.capacity && done <= kMaxInt64 ? clamp(done - room - t) : kNever;
    }
    a.remaining = room - (end - t) > 0 ? static_cast<std::int64_t>((room - (end - t)) / e_) : 0;
    a.resetAfter = clamp(end - t);
    return a;
  }
  std::optional<int128> queueEnd() const { return queueEnd_; }

 private:
  LeakyShaperParams p_;
  int128 e_;
  std::optional<int128> queueEnd_;
};

TEST_CASE("leaky bucket: invalid arguments and states are named", "[processors][leaky_bucket]") {
  CHECK(failureText(LeakyMeterAcquire{{0, 1, 1}, 1}) == "capacity must be > 0, got 0");
  CHECK(failureText(LeakyMeterAcquire{{1, 0, 1}, 1}) == "leakCount must be > 0, got 0");
  CHECK(failureText(LeakyMeterAcquire{{1, 1, -1}, 1}) == "leakPeriod must be > 0, got -1");
  CHECK(failureText(LeakyMeterAcquire{kMeter, 0}) == "quantity must be > 0, got 0");
  CHECK(failureText(LeakyShaperAcquire{{1, 0, 1}, 1}) == "count must be > 0, got 0");
  CHECK(failureText(LeakyShaperBatchAcquire{kShaper, {2, 0}}) ==
        "quantities[1] must be > 0, got 0");
  const Entry negative{encode(LeakyMeterState{-1, 0, 0}), kNever};
  auto e = failure(LeakyMeterAcquire{kMeter, 1}, &negative);
  REQUIRE(e);
  CHECK(e->code() == Errc::processor_failed);
  CHECK(std::string(e->what()) ==
        "entry does not hold a leaky meter: negative level -1 or drained 0");
}

TEST_CASE("leaky meter: the worked example of docs/leaky-bucket.md", "[processors][leaky_bucket]") {
  LimiterStore s;
  CHECK(pour(s, kMeter, 6, 0) == LimitAnswer{true, 10, 4, 0, 600 * kMs});
  CHECK(s.entry->expiresAt == 600 * kMs);
  CHECK(pour(s, kMeter, 7, 250 * kMs) == LimitAnswer{false, 10, 6, 50 * kMs, 350 * kMs});
  CHECK(s.lastChange == Change::kNone);
  CHECK(pour(s, kMeter, 5, 250 * kMs) == LimitAnswer{true, 10, 1, 0, 850 * kMs});
  CHECK(s.state<LeakyMeterState>() == LeakyMeterState{9, 500'000'000, 250 * kMs});
  CHECK(pour(s, kMeter, 11, 250 * kMs).retryAfter == kNever);
  // Leaking carries the fraction: many small polls leak what one does.
  LimiterStore often, once;
  pour(often, {1000, 7, 1000}, 1000, 0);
  pour(once, {1000, 7, 1000}, 1000, 0);
  for (Nanos t = 1; t < 2857; t += 3) pour(often, {1000, 7, 1000}, 1000, t);  // all refused
  CHECK(pour(often, {1000, 7, 1000}, 19, 2857) == pour(once, {1000, 7, 1000}, 19, 2857));
}

TEST_CASE("leaky meter: a clock behind leaks nothing", "[processors][leaky_bucket]") {
  LimiterStore s;
  s.entry = Entry{encode(LeakyMeterState{8, 0, kS}), kNever};
  CHECK(pour(s, kMeter, 3, 500 * kMs) == LimitAnswer{false, 10, 2, 600 * kMs, 1300 * kMs});
  CHECK(pour(s, kMeter, 2, 500 * kMs) == LimitAnswer{true, 10, 0, 0, 1500 * kMs});
  CHECK(s.state<LeakyMeterState>() == LeakyMeterState{10, 0, kS});
  s.entry = Entry{encode(LeakyMeterState{10, 0, kMaxInt64}), kNever};
  CHECK(pour(s, kMeter, 1, kMinInt64) == LimitAnswer{false, 10, 0, kNever, kNever});
}

TEST_CASE("leaky meter: matches the reference on random sequences", "[processors][leaky_bucket]") {
  const std::vector<LeakyMeterParams> params = {kMeter,
                                                {20, 7, 1000},
                                                {1, 1, 1},
                                                {5, 3, 10 * kS},
                                                {3, 1'000'000'007, 999},
                                                {2, 1, kTenYears},
                                                {kMaxInt64, kMaxInt64, 1},
                                                {kMaxInt64, 1, kMaxInt64}};
  std::uint64_t seed = 91;
  for (const LeakyMeterParams& p : params) {
    INFO("capacity " << p.capacity << " leak " << p.leakCount << " per " << p.leakPeriod);
    meterAgainstReference(p, false, ++seed);
    meterAgainstReference(p, true, ++seed);
  }
}

TEST_CASE("leaky meter: extremes", "[processors][leaky_bucket]") {
  const LeakyMeterParams big{kMaxInt64, kMaxInt64, kMaxInt64};
  LimiterStore s;
  // One unit per nanosecond: INT64_MAX units take INT64_MAX ns to leak (saturated).
  CHECK(pour(s, big, kMaxInt64, kMinInt64) == LimitAnswer{true, kMaxInt64, 0, 0, kNever});
  CHECK(pour(s, big, 1, kMinInt64) == LimitAnswer{false, kMaxInt64, 0, 1, kNever});
  // 2^64 - 1 ns later: everything has leaked (the accumulator's largest value).
  s.entry = Entry{encode(LeakyMeterState{kMaxInt64, kMaxInt64 - 1, kMinInt64}), kNever};
  CHECK(pour(s, {kMaxInt64, kMaxInt64, kMaxInt64}, kMaxInt64, kMaxInt64) ==
        LimitAnswer{true, kMaxInt64, 0, 0, kNever});
  // A 10-year leak of one unit.
  LimiterStore slow;
  CHECK(pour(slow, {1, 1, kTenYears}, 1, 0) == LimitAnswer{true, 1, 0, 0, kTenYears});
  CHECK(pour(slow, {1, 1, kTenYears}, 1, kTenYears - 1) == LimitAnswer{false, 1, 0, 1, 1});
  CHECK(slow.entry->expiresAt == kTenYears);
}

TEST_CASE("leaky shaper: the worked example of docs/leaky-bucket.md",
          "[processors][leaky_bucket]") {
  LimiterStore s;
  CHECK(join(s, kShaper, 1, 0) == ShaperAnswer{true, 0, 3, 2, 0, 100 * kMs});
  CHECK(join(s, kShaper, 1, 0) == ShaperAnswer{true, 100 * kMs, 3, 1, 0, 200 * kMs});
  CHECK(join(s, kShaper, 1, 0) == ShaperAnswer{true, 200 * kMs, 3, 0, 0, 300 * kMs});
  CHECK(join(s, kShaper, 1, 0) == ShaperAnswer{false, 0, 3, 0, 100 * kMs, 300 * kMs});
  CHECK(s.state<std::int64_t>() == 300 * kMs);
  CHECK(s.entry->expiresAt == 300 * kMs);
  CHECK(join(s, kShaper, 4, 0).retryAfter == kNever);
  // At 150 ms the queue holds 150 ms of work: 2 units (200 ms) do not fit, 1 does.
  CHECK(join(s, kShaper, 2, 150 * kMs) == ShaperAnswer{false, 0, 3, 1, 50 * kMs, 150 * kMs});
  CHECK(join(s, kShaper, 1, 150 * kMs) == ShaperAnswer{true, 150 * kMs, 3, 0, 0, 250 * kMs});
}

TEST_CASE("leaky shaper: a delay past INT64_MAX saturates", "[processors][leaky_bucket]") {
  // A queue of centuries, a clock far behind the stored TAT (the fuzzer's finding: base - now
  // overflowed int64).
  const LeakyShaperParams p{kMaxInt64, 1, 4};  // E = 4 ns: the queue holds 4 * INT64_MAX ns
  LimiterStore s;
  s.entry = Entry{encode(std::int64_t{1'790'000'000 * kS}), kNever};
  CHECK(join(s, p, 1, kMinInt64) ==
        ShaperAnswer{true, kNever, kMaxInt64, 6'470'029'027'641'081'854, 0, kNever});
  CHECK(s.state<std::int64_t>() == 1'790'000'000 * kS + 4);
}

TEST_CASE("leaky shaper: matches a queue, and admitted requests leave E apart",
          "[processors][leaky_bucket]") {
  const std::vector<LeakyShaperParams> params = {kShaper,
                                                 {1, 1, 1},
                                                 {5, 3, 10},
                                                 {100, 1000, kS},
                                                 {2, 1, kTenYears},
                                                 {kMaxInt64, 1, 1},
                                                 {kMaxInt64, 1, kMaxInt64}};
  std::uint64_t seed = 101;
  for (const LeakyShaperParams& p : params) {
    INFO("capacity " << p.capacity << " count " << p.count << " period " << p.period);
    for (const bool jitter : {false, true}) {
      std::mt19937_64 rng(++seed);
      const Nanos e = p.asGcra().emissionInterval();
      const Nanos span = static_cast<Nanos>(std::min<int128>(int128{e} * 4, kMaxInt64 / 8));
      std::uniform_int_distribution<Nanos> step(0, span);
      std::uniform_int_distribution<std::int64_t> quantity(
          1, p.capacity == kMaxInt64 ? kMaxInt64 : p.capacity + 1);
      std::uniform_int_distribution<int> percent(0, 99);
      LimiterStore store;
      ReferenceShaper reference(p);
      Nanos now = 1'700'000'000 * kS;
      int128 lastLeaves = kMinInt64;  // when the last admitted request's turn ends
      for (int i = 0; i < 10000; ++i) {
        const Nanos d = step(rng);
        const bool back = jitter && percent(rng) < 10;
        if (back ? now < kMinInt64 + d : now > kMaxInt64 - d) break;
        now += back ? -d : d;
        const std::int64_t n = percent(rng) < 60 ? 1 : quantity(rng);
        INFO("step " << i << " now " << now << " n " << n);
        const ShaperAnswer expected = reference.join(n, now);
        const ShaperAnswer got = join(store, p, n, now);
        REQUIRE(got == expected);
        if (got.granted) {
          REQUIRE(store.state<std::int64_t>() == *reference.queueEnd());
          REQUIRE(int128{got.delay} + n * int128{e} <= int128{p.capacity} * e);
          if (!jitter) {
            REQUIRE(int128{now} + got.delay >= lastLeaves);  // never before the one ahead
            lastLeaves = int128{now} + got.delay + n * int128{e};
          }
        }
      }
    }
  }
}

TEST_CASE("leaky bucket: batches equal their requests in order", "[processors][leaky_bucket]") {
  testing::checkBatchEqualsSingles<LeakyMeterAcquire>(kMeter, 1, 11, 300 * kMs, 3000, 12);
  testing::checkBatchEqualsSingles<LeakyShaperAcquire>(kShaper, 1, 4, 150 * kMs, 3000, 13);
  LeakyMeterBatchAcquire tooLong{kMeter, std::vector<std::int64_t>(limiter::kMaxBatch + 1, 1)};
  LeakyMeterBatchAcquire decoded;
  CHECK_THROWS_AS(decodeInto(encode(tooLong), decoded), std::length_error);
  const ShaperAnswer a{true, 5, 3, 1, 0, 7};
  CHECK(decode<ShaperAnswer>(encode(a)) == a);
}

}  // namespace
}  // namespace ingrid
