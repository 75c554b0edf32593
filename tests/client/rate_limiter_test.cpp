// RateLimiter's and BatchingRateLimiter's reservations (acquire(n, maxWait) and acquireAsync) and
// warm-up, through a Node with a frozen clock, so that every delay is exact. The waits are real
// (a timer or a sleep of the delay): the tests check that nothing completes before its delay,
// never an upper bound.
#include <ingrid/rate_limiter.h>

#include <catch2/catch.hpp>

#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <ingrid/batcher.h>
#include <ingrid/clock.h>
#include <ingrid/node.h>

namespace ingrid {
namespace {

using namespace std::chrono_literals;

constexpr Nanos kStart = 1'790'000'000 * kNanosPerSecond;
constexpr Nanos kMs = 1'000'000;

struct FrozenNode {
  FrozenNode()
      : clock(std::make_shared<ManualClock>(kStart)),
        node(NodeOptions{.partitions = 8, .workerThreads = 1, .clock = clock}) {
    REQUIRE(node.start().ok());
  }
  std::shared_ptr<ManualClock> clock;
  Node node;
};

// 10 tokens, 10 per second: a token every 100 ms.
const BucketParams kTenPerSecond = BucketParams::perPeriod(10, kNanosPerSecond);

TEST_CASE("RateLimiter::acquire waits for its reservation on the caller's thread",
          "[client][rate_limiter]") {
  FrozenNode n;
  RateLimiter<Node> limiter(n.node, "reserve:blocking", kTenPerSecond);
  auto all = limiter.acquire(10, 0ns);
  REQUIRE(all.ok());
  CHECK(*all == ReserveAnswer{true, 0, 0});

  const auto start = std::chrono::steady_clock::now();
  auto two = limiter.acquire(2, 1s);
  REQUIRE(two.ok());
  CHECK(*two == ReserveAnswer{true, 200 * kMs, 0});
  CHECK(std::chrono::steady_clock::now() - start >= 200ms);

  // Queued behind the first: 200 ms + 500 ms would pass maxWait.
  auto refused = limiter.acquire(5, 600ms);
  REQUIRE(refused.ok());
  CHECK(*refused == ReserveAnswer{false, 700 * kMs, 0});
  // An acquire of the same bucket sees the debt.
  auto plain = limiter.tryAcquire(1);
  REQUIRE(plain.ok());
  CHECK(*plain == AcquireAnswer{false, 0, 300 * kMs});
}

TEST_CASE("RateLimiter::acquireAsync completes after the delay, on the handler's executor",
          "[client][rate_limiter]") {
  FrozenNode n;
  RateLimiter<Node> limiter(n.node, "reserve:async", kTenPerSecond);
  REQUIRE(limiter.acquire(10, 0ns).ok());

  SECTION("use_future: the system executor's timer") {
    const auto start = std::chrono::steady_clock::now();
    auto f = limiter.acquireAsync(3, 1s, asio::use_future);
    REQUIRE(f.wait_for(30s) == std::future_status::ready);
    auto r = f.get();
    REQUIRE(r.ok());
    CHECK(*r == ReserveAnswer{true, 300 * kMs, 0});
    CHECK(std::chrono::steady_clock::now() - start >= 300ms);
  }
  SECTION("a handler bound to an io_context runs there, after the delay") {
    asio::io_context io;
    std::optional<Result<ReserveAnswer>> got;
    std::thread::id ranOn;
    const auto start = std::chrono::steady_clock::now();
    std::chrono::steady_clock::duration waited{};
    limiter.acquireAsync(1, 1s, asio::bind_executor(io, [&](Result<ReserveAnswer> r) {
                           got = std::move(r);
                           ranOn = std::this_thread::get_id();
                           waited = std::chrono::steady_clock::now() - start;
                         }));
    // The pending reservation keeps io.run() going until the handler has run.
    io.run_for(30s);
    REQUIRE(got.has_value());
    REQUIRE(got->ok());
    CHECK(**got == ReserveAnswer{true, 100 * kMs, 0});
    CHECK(ranOn == std::this_thread::get_id());
    CHECK(waited >= 100ms);
  }
  SECTION("a refusal and bad arguments complete at once, without waiting") {
    auto refused = limiter.acquireAsync(11, 1s, asio::use_future);
    REQUIRE(refused.wait_for(30s) == std::future_status::ready);
    auto r = refused.get();
    REQUIRE(r.ok());
    CHECK(*r == ReserveAnswer{false, kNever, 0});
    auto bad = limiter.acquireAsync(1, -1ns, asio::use_future);
    REQUIRE(bad.wait_for(30s) == std::future_status::ready);
    auto e = bad.get();
    REQUIRE_FALSE(e.ok());
    CHECK(e.error() == Errc::invalid_argument);
    CHECK_THAT(e.error().detail(), Catch::Contains("maxWait must be >= 0, got -1 ns"));
    auto zero = limiter.acquire(0, 1s);
    REQUIRE_FALSE(zero.ok());
    CHECK_THAT(zero.error().detail(), Catch::Contains("tokens must be > 0, got 0"));
  }
}

TEST_CASE("RateLimiter with warm-up paces a cold limiter, in the token bucket's answer types",
          "[client][rate_limiter][warmup]") {
  FrozenNode n;
  // docs/warm-up.md's example: 10 per second, 2 s of warm-up, cold factor 3.
  const LimiterOptions warm{.warmup = WarmupOption{2s, 3}};
  RateLimiter<Node> limiter(n.node, "warmup:facade", kTenPerSecond, warm);
  auto first = limiter.tryAcquire(1);
  REQUIRE(first.ok());
  CHECK(*first == AcquireAnswer{true, 0, 0});
  // The first permit cost 290 ms: the next waits for it (no burst, even with capacity 10).
  auto second = limiter.tryAcquire(1);
  REQUIRE(second.ok());
  CHECK(*second == AcquireAnswer{false, 0, 290 * kMs});
  auto async = limiter.tryAcquireAsync(1, asio::use_future);
  REQUIRE(async.wait_for(30s) == std::future_status::ready);
  CHECK(async.get().value() == AcquireAnswer{false, 0, 290 * kMs});
  // A reservation goes in its turn: 290 ms, and costs 270 ms for the next one.
  auto reserved = limiter.acquireAsync(1, 1s, asio::use_future);
  REQUIRE(reserved.wait_for(30s) == std::future_status::ready);
  CHECK(reserved.get().value() == ReserveAnswer{true, 290 * kMs, 0});
  auto refused = limiter.acquire(1, 500ms);
  REQUIRE(refused.ok());
  CHECK(*refused == ReserveAnswer{false, 560 * kMs, 0});
  CHECK(limiter.counts() == LimiterCounts{2, 3, 0, 0, 0, 0});

  // Bad warm-up options are refused before anything is sent.
  RateLimiter<Node> bad(n.node, "warmup:bad", kTenPerSecond,
                        LimiterOptions{.warmup = WarmupOption{2s, 0}});
  auto e = bad.tryAcquire(1);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error() == Errc::invalid_argument);
  CHECK_THAT(e.error().detail(),
             Catch::Contains("warm-up 'warmup:bad': coldFactor must be in [1, 1000], got 0"));
  auto eAsync = bad.acquireAsync(1, 1s, asio::use_future);
  REQUIRE(eAsync.wait_for(30s) == std::future_status::ready);
  CHECK_FALSE(eAsync.get().ok());
}

TEST_CASE("BatchingRateLimiter::acquire waits for its reservation, as RateLimiter's does",
          "[client][rate_limiter][batcher]") {
  FrozenNode n;
  BatchingRateLimiter<Node> limiter(n.node, "batched-reserve:blocking", kTenPerSecond);
  auto all = limiter.acquire(10, 0ns);
  REQUIRE(all.ok());
  CHECK(*all == ReserveAnswer{true, 0, 0});

  const auto start = std::chrono::steady_clock::now();
  auto two = limiter.acquire(2, 1s);
  REQUIRE(two.ok());
  CHECK(*two == ReserveAnswer{true, 200 * kMs, 0});
  CHECK(std::chrono::steady_clock::now() - start >= 200ms);

  auto refused = limiter.acquire(5, 600ms);
  REQUIRE(refused.ok());
  CHECK(*refused == ReserveAnswer{false, 700 * kMs, 0});
  auto plain = limiter.tryAcquire(1);
  REQUIRE(plain.ok());
  CHECK(*plain == AcquireAnswer{false, 0, 300 * kMs});
  CHECK(limiter.counts() == LimiterCounts{2, 2, 0, 0, 0, 0});
  CHECK(limiter.stats().requests == 4);
}

TEST_CASE("BatchingRateLimiter::acquireAsync completes after the delay, on the handler's executor",
          "[client][rate_limiter][batcher]") {
  FrozenNode n;
  BatchingRateLimiter<Node> limiter(n.node, "batched-reserve:async", kTenPerSecond);
  REQUIRE(limiter.acquire(10, 0ns).ok());

  SECTION("issued at once: each waits its own turn, in the order issued") {
    // Queued behind the first, they go as batches: one reservation after another at one `now`.
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::future<Result<ReserveAnswer>>> fs;
    for (int i = 0; i < 6; ++i) fs.push_back(limiter.acquireAsync(1, 1s, asio::use_future));
    for (std::size_t i = 0; i < fs.size(); ++i) {
      INFO("reservation " << i);
      REQUIRE(fs[i].wait_for(30s) == std::future_status::ready);
      auto r = fs[i].get();
      REQUIRE(r.ok());
      const Nanos turn = static_cast<Nanos>(i + 1) * 100 * kMs;
      CHECK(*r == ReserveAnswer{true, turn, 0});
      CHECK(std::chrono::steady_clock::now() - start >= std::chrono::nanoseconds(turn));
    }
    // A maxWait the bucket's debt passes: refused, nothing taken.
    auto late = limiter.acquire(1, 600ms);
    REQUIRE(late.ok());
    CHECK(*late == ReserveAnswer{false, 700 * kMs, 0});
    CHECK(limiter.counts() == LimiterCounts{7, 1, 0, 0, 0, 0});
  }
  SECTION("a handler bound to an io_context runs there, after the delay") {
    asio::io_context io;
    std::optional<Result<ReserveAnswer>> got;
    std::thread::id ranOn;
    const auto start = std::chrono::steady_clock::now();
    std::chrono::steady_clock::duration waited{};
    limiter.acquireAsync(1, 1s, asio::bind_executor(io, [&](Result<ReserveAnswer> r) {
                           got = std::move(r);
                           ranOn = std::this_thread::get_id();
                           waited = std::chrono::steady_clock::now() - start;
                         }));
    io.run_for(30s);
    REQUIRE(got.has_value());
    REQUIRE(got->ok());
    CHECK(**got == ReserveAnswer{true, 100 * kMs, 0});
    CHECK(ranOn == std::this_thread::get_id());
    CHECK(waited >= 100ms);
  }
  SECTION("a refusal and bad arguments complete at once, bad ones without being sent") {
    auto refused = limiter.acquireAsync(11, 1s, asio::use_future);
    REQUIRE(refused.wait_for(30s) == std::future_status::ready);
    auto r = refused.get();
    REQUIRE(r.ok());
    CHECK(*r == ReserveAnswer{false, kNever, 0});
    const auto sent = limiter.stats().requests;
    auto bad = limiter.acquireAsync(1, -1ns, asio::use_future);
    REQUIRE(bad.wait_for(30s) == std::future_status::ready);
    auto e = bad.get();
    REQUIRE_FALSE(e.ok());
    CHECK(e.error() == Errc::invalid_argument);
    CHECK_THAT(e.error().detail(), Catch::Contains("maxWait must be >= 0, got -1 ns"));
    auto zero = limiter.acquire(0, 1s);
    REQUIRE_FALSE(zero.ok());
    CHECK_THAT(zero.error().detail(), Catch::Contains("tokens must be > 0, got 0"));
    CHECK(limiter.stats().requests == sent);
    CHECK(limiter.counts().errors == 2);
  }
}

// One step of a scripted sequence, run on either facade: the answer in ReserveAnswer's shape.
template <class Limiter>
ReserveAnswer step(Limiter& limiter, int kind) {
  switch (kind) {
    case 0: {
      auto r = limiter.tryAcquire(1);
      REQUIRE(r.ok());
      return ReserveAnswer{r->granted, r->waitNanos, r->remaining};
    }
    case 1: {
      auto f = limiter.tryAcquireAsync(2, asio::use_future);
      REQUIRE(f.wait_for(30s) == std::future_status::ready);
      auto r = f.get();
      REQUIRE(r.ok());
      return ReserveAnswer{r->granted, r->waitNanos, r->remaining};
    }
    case 2: {
      auto r = limiter.acquire(1, 60ms);
      REQUIRE(r.ok());
      return *r;
    }
    default: {
      auto f = limiter.acquireAsync(3, 120ms, asio::use_future);
      REQUIRE(f.wait_for(30s) == std::future_status::ready);
      auto r = f.get();
      REQUIRE(r.ok());
      return *r;
    }
  }
}

TEST_CASE("BatchingRateLimiter with warm-up paces exactly as RateLimiter does",
          "[client][rate_limiter][batcher][warmup]") {
  FrozenNode n;
  const LimiterOptions warm{.warmup = WarmupOption{2s, 3}};

  SECTION("docs/warm-up.md's example, in the token bucket's answer types") {
    BatchingRateLimiter<Node> limiter(n.node, "batched-warmup:facade", kTenPerSecond, warm);
    auto first = limiter.tryAcquire(1);
    REQUIRE(first.ok());
    CHECK(*first == AcquireAnswer{true, 0, 0});
    auto second = limiter.tryAcquire(1);
    REQUIRE(second.ok());
    CHECK(*second == AcquireAnswer{false, 0, 290 * kMs});
    auto async = limiter.tryAcquireAsync(1, asio::use_future);
    REQUIRE(async.wait_for(30s) == std::future_status::ready);
    CHECK(async.get().value() == AcquireAnswer{false, 0, 290 * kMs});
    auto reserved = limiter.acquireAsync(1, 1s, asio::use_future);
    REQUIRE(reserved.wait_for(30s) == std::future_status::ready);
    CHECK(reserved.get().value() == ReserveAnswer{true, 290 * kMs, 0});
    auto refused = limiter.acquire(1, 500ms);
    REQUIRE(refused.ok());
    CHECK(*refused == ReserveAnswer{false, 560 * kMs, 0});
    CHECK(limiter.counts() == LimiterCounts{2, 3, 0, 0, 0, 0});
    CHECK(limiter.stats().requests == 5);

    BatchingRateLimiter<Node> bad(n.node, "batched-warmup:bad", kTenPerSecond,
                                  LimiterOptions{.warmup = WarmupOption{2s, 0}});
    auto e = bad.tryAcquire(1);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error() == Errc::invalid_argument);
    CHECK_THAT(e.error().detail(),
               Catch::Contains("warm-up 'batched-warmup:bad': coldFactor must be in "
                               "[1, 1000], got 0"));
    auto eAsync = bad.acquireAsync(1, 1s, asio::use_future);
    REQUIRE(eAsync.wait_for(30s) == std::future_status::ready);
    CHECK_FALSE(eAsync.get().ok());
    CHECK(bad.stats().requests == 0);
  }
  SECTION("a scripted sequence answers as RateLimiter's, step by step, as the clock moves") {
    // 100 per second with 200 ms of warm-up: waits of tens of ms.
    const BucketParams fast = BucketParams::perPeriod(100, kNanosPerSecond);
    const LimiterOptions quick{.warmup = WarmupOption{200ms, 3}};
    RateLimiter<Node> single(n.node, "warmup:single", fast, quick);
    BatchingRateLimiter<Node> batched(n.node, "warmup:batched", fast, quick);
    // Kinds and clock steps in ms, fixed: idle gaps cool the limiter, bursts warm it.
    const int kinds[] = {0, 0, 1, 2, 3, 0, 2, 2, 3, 1, 0, 3, 2, 0, 1, 3, 3, 2, 0, 0};
    const Nanos advance[] = {0, 5, 0, 40, 10, 0, 300, 0, 20, 0, 7, 0, 60, 0, 0, 500, 0, 15, 0, 3};
    int granted = 0;
    for (std::size_t i = 0; i < std::size(kinds); ++i) {
      n.clock->advance(advance[i] * kMs);
      INFO("step " << i << ", kind " << kinds[i]);
      const ReserveAnswer expected = step(single, kinds[i]);
      CHECK(step(batched, kinds[i]) == expected);
      granted += expected.granted ? 1 : 0;
    }
    CHECK(granted > 0);
    CHECK(granted < static_cast<int>(std::size(kinds)));
    CHECK(batched.counts() == single.counts());
  }
}

}  // namespace
}  // namespace ingrid
