// RateLimiter's reservations: acquire(n, maxWait) and acquireAsync through a Node with a frozen
// clock, so that every delay is exact. The waits are real (a timer or a sleep of the delay):
// the tests check that nothing completes before its delay, never an upper bound.
#include <ingrid/rate_limiter.h>

#include <catch2/catch.hpp>

#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <thread>

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

}  // namespace
}  // namespace ingrid
