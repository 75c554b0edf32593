// LimiterPolicy (dry-run, fail-open, fail-closed) alone, and through RateLimiter and
// BatchingRateLimiter: over a node with a frozen clock for decided answers, and over an invoker
// whose cluster cannot answer (a fake, and a stopped node).
#include <ingrid/limiter_policy.h>

#include <catch2/catch.hpp>

#include <asio/async_result.hpp>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>
#include <asio/use_future.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <ingrid/batcher.h>
#include <ingrid/clock.h>
#include <ingrid/limiter_metrics.h>
#include <ingrid/node.h>
#include <ingrid/rate_limiter.h>

namespace ingrid {
namespace {

using namespace std::chrono_literals;

TEST_CASE("Limiter decisions as Prometheus text: one series per decision, labelled by limiter",
          "[client][limiter_policy][metrics]") {
  const std::string text = limiterMetricsText("login", LimiterCounts{5, 2, 1, 3, 4, 6});
  CHECK_THAT(text, Catch::Contains("# TYPE ingrid_limiter_decisions_total counter"));
  for (const char* line :
       {"ingrid_limiter_decisions_total{decision=\"granted\",limiter=\"login\"} 5",
        "ingrid_limiter_decisions_total{decision=\"denied\",limiter=\"login\"} 2",
        "ingrid_limiter_decisions_total{decision=\"shadow_denied\",limiter=\"login\"} 1",
        "ingrid_limiter_decisions_total{decision=\"failed_open\",limiter=\"login\"} 3",
        "ingrid_limiter_decisions_total{decision=\"failed_closed\",limiter=\"login\"} 4",
        "ingrid_limiter_decisions_total{decision=\"error\",limiter=\"login\"} 6"}) {
    CHECK_THAT(text, Catch::Contains(line));
  }
}

TEST_CASE("LimiterPolicy: each outcome as the options say, each counted once",
          "[client][limiter_policy]") {
  const Result<AcquireAnswer> granted = AcquireAnswer{true, 4, 0};
  const Result<AcquireAnswer> denied = AcquireAnswer{false, 0, 250};
  const Result<AcquireAnswer> timeout = Error(Errc::timeout, "no answer in 5 s");
  const Result<AcquireAnswer> badUse = Error(Errc::invalid_argument, "capacity must be > 0");

  LimiterPolicy plain;
  CHECK(*plain.apply(granted) == AcquireAnswer{true, 4, 0});
  CHECK(*plain.apply(denied) == AcquireAnswer{false, 0, 250});
  CHECK(plain.apply(timeout).error() == Errc::timeout);
  CHECK(plain.counts() == LimiterCounts{1, 1, 0, 0, 0, 1});

  LimiterPolicy shadow({.dryRun = true});
  CHECK(*shadow.apply(denied) == AcquireAnswer{true, 0, 250});  // granted, with its wait
  CHECK(*shadow.apply(Result<ReserveAnswer>(ReserveAnswer{false, 900, 0})) ==
        ReserveAnswer{true, 900, 0});
  CHECK(shadow.counts() == LimiterCounts{0, 0, 2, 0, 0, 0});

  LimiterPolicy open({.onUnavailable = OnUnavailable::kGrant});
  CHECK(*open.apply(timeout) == AcquireAnswer{true, 0, 0});
  CHECK(*open.apply(Result<ReserveAnswer>(Error(Errc::unreachable, "x"))) ==
        ReserveAnswer{true, 0, 0});
  CHECK(open.apply(badUse).error() == Errc::invalid_argument);  // bad use is never hidden
  CHECK(open.counts() == LimiterCounts{0, 0, 0, 2, 0, 1});

  LimiterPolicy closed({.onUnavailable = OnUnavailable::kDeny});
  CHECK(*closed.apply(Result<AcquireAnswer>(Error(Errc::no_quorum, "x"))) ==
        AcquireAnswer{false, 0, 0});
  CHECK(closed.counts() == LimiterCounts{0, 0, 0, 0, 1, 0});

  for (Errc c :
       {Errc::timeout, Errc::shutting_down, Errc::not_running, Errc::overloaded, Errc::not_owner,
        Errc::unavailable, Errc::unreachable, Errc::indeterminate, Errc::no_quorum}) {
    CHECK(cannotAnswer(Error(c, "")));
  }
  for (Errc c : {Errc::invalid_key, Errc::unknown_processor, Errc::invalid_argument,
                 Errc::processor_failed, Errc::would_deadlock, Errc::malformed_message}) {
    CHECK_FALSE(cannotAnswer(Error(c, "")));
  }
}

// An invoker whose cluster never answers in time: every call fails with Errc::timeout.
struct SilentCluster {
  template <class P>
  Result<typename P::Result> invoke(const std::string&, const P&) {
    return Error(Errc::timeout, "no answer before the deadline");
  }
  template <class P, class CompletionToken>
  auto invokeAsync(std::string, const P&, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(Result<typename P::Result>)>(
        [](auto handler) {
          auto ex = asio::get_associated_executor(handler, asio::system_executor());
          asio::post(ex, [handler = std::move(handler)]() mutable {
            std::move(handler)(Error(Errc::timeout, "no answer before the deadline"));
          });
        },
        token);
  }
};

TEST_CASE("RateLimiter: fail-open and fail-closed when the cluster cannot answer",
          "[client][limiter_policy]") {
  SilentCluster silent;
  const BucketParams p = BucketParams::perPeriod(5, kNanosPerSecond);
  RateLimiter<SilentCluster> open(silent, "k", p, {.onUnavailable = OnUnavailable::kGrant});
  CHECK(*open.tryAcquire(1) == AcquireAnswer{true, 0, 0});
  auto f = open.tryAcquireAsync(1, asio::use_future);
  REQUIRE(f.wait_for(30s) == std::future_status::ready);
  CHECK(*f.get() == AcquireAnswer{true, 0, 0});
  auto reserve = open.acquireAsync(1, 1s, asio::use_future);
  REQUIRE(reserve.wait_for(30s) == std::future_status::ready);
  CHECK(*reserve.get() == ReserveAnswer{true, 0, 0});
  CHECK(open.counts().failedOpen == 3);

  RateLimiter<SilentCluster> closed(silent, "k", p, {.onUnavailable = OnUnavailable::kDeny});
  CHECK(*closed.tryAcquire(1) == AcquireAnswer{false, 0, 0});
  CHECK(*closed.acquire(1, 1s) == ReserveAnswer{false, 0, 0});
  CHECK(closed.counts() == LimiterCounts{0, 0, 0, 0, 2, 0});
  // Bad use is reported whatever the option.
  CHECK(closed.tryAcquire(0).error() == Errc::invalid_argument);
  CHECK(closed.counts().errors == 1);

  RateLimiter<SilentCluster> strict(silent, "k", p);
  CHECK(strict.tryAcquire(1).error() == Errc::timeout);
  CHECK(strict.counts().errors == 1);
}

TEST_CASE("RateLimiter: dry-run reports denials as grants and never waits",
          "[client][limiter_policy]") {
  auto clock = std::make_shared<ManualClock>(1'790'000'000 * kNanosPerSecond);
  Node node(NodeOptions{.partitions = 8, .workerThreads = 1, .clock = clock});
  REQUIRE(node.start().ok());
  RateLimiter<Node> shadow(node, "shadow", BucketParams::perPeriod(2, kNanosPerSecond),
                           {.dryRun = true});
  CHECK(*shadow.tryAcquire(2) == AcquireAnswer{true, 0, 0});
  CHECK(*shadow.tryAcquire(1) == AcquireAnswer{true, 0, 500'000'000});  // would wait 500 ms
  auto f = shadow.tryAcquireAsync(1, asio::use_future);
  REQUIRE(f.wait_for(30s) == std::future_status::ready);
  CHECK(*f.get() == AcquireAnswer{true, 0, 500'000'000});
  // A reservation granted with an hour's delay is not waited for in dry-run.
  auto r = shadow.acquireAsync(2, 3600s, asio::use_future);
  REQUIRE(r.wait_for(30s) == std::future_status::ready);
  CHECK(*r.get() == ReserveAnswer{true, 1'000'000'000, 0});
  CHECK(*shadow.acquire(1, 0s) == ReserveAnswer{true, 1'500'000'000, 0});
  CHECK(shadow.counts() == LimiterCounts{2, 0, 3, 0, 0, 0});
}

TEST_CASE("BatchingRateLimiter: dry-run reports denials as grants and never waits",
          "[client][limiter_policy][batcher]") {
  auto clock = std::make_shared<ManualClock>(1'790'000'000 * kNanosPerSecond);
  Node node(NodeOptions{.partitions = 8, .workerThreads = 1, .clock = clock});
  REQUIRE(node.start().ok());

  SECTION("one call at a time: RateLimiter's answers") {
    BatchingRateLimiter<Node> shadow(node, "batched-shadow",
                                     BucketParams::perPeriod(2, kNanosPerSecond), {.dryRun = true});
    CHECK(*shadow.tryAcquire(2) == AcquireAnswer{true, 0, 0});
    CHECK(*shadow.tryAcquire(1) == AcquireAnswer{true, 0, 500'000'000});  // would wait 500 ms
    auto f = shadow.tryAcquireAsync(1, asio::use_future);
    REQUIRE(f.wait_for(30s) == std::future_status::ready);
    CHECK(*f.get() == AcquireAnswer{true, 0, 500'000'000});
    // A reservation granted with an hour's delay is not waited for in dry-run.
    auto r = shadow.acquireAsync(2, 3600s, asio::use_future);
    REQUIRE(r.wait_for(30s) == std::future_status::ready);
    CHECK(*r.get() == ReserveAnswer{true, 1'000'000'000, 0});
    CHECK(*shadow.acquire(1, 0s) == ReserveAnswer{true, 1'500'000'000, 0});
    CHECK(shadow.counts() == LimiterCounts{2, 0, 3, 0, 0, 0});
  }
  SECTION("many at once, in batches: each denial counted once") {
    BatchingRateLimiter<Node> shadow(node, "batched-shadow-burst",
                                     BucketParams::perPeriod(5, kNanosPerSecond), {.dryRun = true});
    std::vector<std::future<Result<AcquireAnswer>>> fs;
    for (int i = 0; i < 40; ++i) fs.push_back(shadow.tryAcquireAsync(1, asio::use_future));
    int withWait = 0;
    for (auto& one : fs) {
      REQUIRE(one.wait_for(30s) == std::future_status::ready);
      auto a = one.get();
      REQUIRE(a.ok());
      CHECK(a->granted);
      withWait += a->waitNanos > 0 ? 1 : 0;
    }
    CHECK(withWait == 35);
    CHECK(shadow.counts() == LimiterCounts{5, 0, 35, 0, 0, 0});
    CHECK(shadow.stats().requests == 40);
  }
}

TEST_CASE("BatchingRateLimiter: fail-open and fail-closed when the cluster cannot answer",
          "[client][limiter_policy][batcher]") {
  const BucketParams p = BucketParams::perPeriod(5, kNanosPerSecond);

  SECTION("a cluster that never answers in time") {
    SilentCluster silent;
    BatchingRateLimiter<SilentCluster> open(silent, "k", p,
                                            {.onUnavailable = OnUnavailable::kGrant});
    CHECK(*open.tryAcquire(1) == AcquireAnswer{true, 0, 0});
    auto f = open.tryAcquireAsync(1, asio::use_future);
    REQUIRE(f.wait_for(30s) == std::future_status::ready);
    CHECK(*f.get() == AcquireAnswer{true, 0, 0});
    auto reserve = open.acquireAsync(1, 1s, asio::use_future);
    REQUIRE(reserve.wait_for(30s) == std::future_status::ready);
    CHECK(*reserve.get() == ReserveAnswer{true, 0, 0});
    CHECK(open.counts() == LimiterCounts{0, 0, 0, 3, 0, 0});

    BatchingRateLimiter<SilentCluster> closed(silent, "k", p,
                                              {.onUnavailable = OnUnavailable::kDeny});
    CHECK(*closed.tryAcquire(1) == AcquireAnswer{false, 0, 0});
    CHECK(*closed.acquire(1, 1s) == ReserveAnswer{false, 0, 0});
    CHECK(closed.counts() == LimiterCounts{0, 0, 0, 0, 2, 0});
    CHECK(closed.tryAcquire(0).error() == Errc::invalid_argument);  // bad use is reported
    CHECK(closed.counts().errors == 1);

    BatchingRateLimiter<SilentCluster> strict(silent, "k", p);
    CHECK(strict.tryAcquire(1).error() == Errc::timeout);
    CHECK(strict.acquire(1, 1s).error() == Errc::timeout);
    CHECK(strict.counts() == LimiterCounts{0, 0, 0, 0, 0, 2});
  }
  SECTION("a stopped node, with and without warm-up") {
    Node node(NodeOptions{.partitions = 8, .workerThreads = 1});
    REQUIRE(node.start().ok());
    node.stop();
    const auto warmup = GENERATE(as<std::optional<WarmupOption>>(), std::nullopt,
                                 WarmupOption{std::chrono::seconds(2), 3});
    INFO("warm-up " << warmup.has_value());

    BatchingRateLimiter<Node> open(node, "stopped", p,
                                   {.onUnavailable = OnUnavailable::kGrant, .warmup = warmup});
    CHECK(*open.tryAcquire(1) == AcquireAnswer{true, 0, 0});
    CHECK(*open.acquire(2, 1s) == ReserveAnswer{true, 0, 0});
    CHECK(open.counts() == LimiterCounts{0, 0, 0, 2, 0, 0});

    BatchingRateLimiter<Node> closed(node, "stopped", p,
                                     {.onUnavailable = OnUnavailable::kDeny, .warmup = warmup});
    auto f = closed.tryAcquireAsync(1, asio::use_future);
    REQUIRE(f.wait_for(30s) == std::future_status::ready);
    CHECK(*f.get() == AcquireAnswer{false, 0, 0});
    auto r = closed.acquireAsync(1, 1s, asio::use_future);
    REQUIRE(r.wait_for(30s) == std::future_status::ready);
    CHECK(*r.get() == ReserveAnswer{false, 0, 0});
    CHECK(closed.counts() == LimiterCounts{0, 0, 0, 0, 2, 0});

    BatchingRateLimiter<Node> strict(node, "stopped", p, {.warmup = warmup});
    auto e = strict.tryAcquire(1);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error() == Errc::shutting_down);
    CHECK(strict.counts().errors == 1);
  }
}

}  // namespace
}  // namespace ingrid
