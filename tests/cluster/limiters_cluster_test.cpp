// The limiter processors through a 3-node in-process cluster under a frozen ManualClock: from
// every node at once, with client-side batching on and off, each key grants exactly what the
// limiter allows; and a scripted sequence run through the nodes answers exactly what the same
// sequence answers on a local entry.
#include <ingrid/node.h>

#include <catch2/catch.hpp>

#include <asio/use_future.hpp>

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/batcher.h>
#include <ingrid/processors/composite_bucket.h>
#include <ingrid/processors/concurrency.h>
#include <ingrid/processors/fixed_window.h>
#include <ingrid/processors/gcra.h>
#include <ingrid/processors/leaky_bucket.h>
#include <ingrid/processors/sliding_log.h>
#include <ingrid/processors/sliding_window.h>

#include "processors/limiter_store.h"
#include "support/test_cluster.h"

namespace ingrid {
namespace {

using ingrid::testing::LimiterStore;
using ingrid::testing::TestCluster;

constexpr Nanos kStart = 1'790'000'000 * kNanosPerSecond;
constexpr Nanos kMs = 1'000'000;

bool isGranted(const GcraAnswer& a) { return a.granted(); }
bool isGranted(const LimitAnswer& a) { return a.granted; }
bool isGranted(const ShaperAnswer& a) { return a.granted; }
bool isGranted(const LeaseAnswer& a) { return a.granted; }
bool isGranted(const CompositeAnswer& a) { return a.granted; }
bool isGranted(const ReserveAnswer& a) { return a.granted; }

// Sends `perThread` requests `request` from 2 threads on each live node at once, spread over
// `keys` keys "<prefix><k>", through a Batcher per node or straight to the node; returns the
// grants per key. Every request must be answered.
template <class P>
std::vector<std::int64_t> grantsPerKey(TestCluster& cluster, const std::string& prefix,
                                       const P& request, int keys, int perThread, bool batching) {
  std::vector<std::atomic<std::int64_t>> granted(static_cast<std::size_t>(keys));
  std::atomic<int> errors{0};
  std::string lastError;
  std::mutex mu;
  std::vector<std::unique_ptr<Batcher<Node, P>>> batchers;
  for (Node* node : cluster.live()) batchers.push_back(std::make_unique<Batcher<Node, P>>(*node));
  std::vector<std::thread> threads;
  for (std::size_t n = 0; n < batchers.size(); ++n) {
    Node* node = cluster.live()[n];
    Batcher<Node, P>* batcher = batchers[n].get();
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, node, batcher] {
        std::vector<std::pair<int, std::future<Result<typename P::Result>>>> pending;
        for (int i = 0; i < perThread; ++i) {
          const int k = i % keys;
          std::string key = prefix + std::to_string(k);
          pending.emplace_back(
              k, batching ? batcher->invokeAsync(std::move(key), request, asio::use_future)
                          : node->invokeAsync(std::move(key), request, asio::use_future));
        }
        for (auto& [k, f] : pending) {
          auto r = f.get();
          if (!r) {
            ++errors;
            std::lock_guard lock(mu);
            lastError = r.error().message();
          } else if (isGranted(*r)) {
            ++granted[static_cast<std::size_t>(k)];
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  INFO("last error: " << lastError);
  CHECK(errors == 0);
  std::vector<std::int64_t> out;
  for (auto& g : granted) out.push_back(g.load());
  return out;
}

// Runs `steps` requests made by `make(rng)` through the nodes in turn, moving the frozen clock
// between them by `advance(rng)`, and compares every answer with a local entry's.
template <class P, class Make, class Advance>
void sameAsLocal(TestCluster& cluster, ManualClock& clock, const std::string& key, Make make,
                 Advance advance, int steps) {
  std::mt19937_64 rng(4242);
  LimiterStore local;
  const auto nodes = cluster.live();
  for (int step = 0; step < steps; ++step) {
    clock.advance(advance(rng));
    const P request = make(rng);
    auto remote = nodes[static_cast<std::size_t>(step) % nodes.size()]->invoke(key, request);
    INFO("step " << step);
    REQUIRE(remote.ok());
    REQUIRE(*remote == local.invoke(request, clock.now()));
  }
}

TEST_CASE("Limiters through 3 nodes: GCRA grants exactly its burst, then exactly its rate",
          "[cluster][multinode][limiters]") {
  auto clock = std::make_shared<ManualClock>(kStart);
  TestCluster cluster(ingrid::testing::smallClusterOptions(clock, 2));
  REQUIRE(cluster.start(3));
  const bool batching = GENERATE(false, true);
  INFO("batching " << batching);
  const std::string prefix = batching ? "gcra-b-" : "gcra-";

  // A burst of 100, then 100 per second. 6 threads x 120 requests over 3 keys: 240 per key.
  const GcraThrottle one{GcraParams::perPeriod(100, kNanosPerSecond), 1};
  CHECK(grantsPerKey(cluster, prefix, one, 3, 120, batching) ==
        std::vector<std::int64_t>{100, 100, 100});
  clock->advance(250 * kMs);  // 25 more each
  CHECK(grantsPerKey(cluster, prefix, one, 3, 120, batching) ==
        std::vector<std::int64_t>{25, 25, 25});

  sameAsLocal<GcraThrottle>(
      cluster, *clock, prefix + "script",
      [](std::mt19937_64& rng) {
        return GcraThrottle{GcraParams{4, 5, kNanosPerSecond},
                            std::uniform_int_distribution<std::int64_t>(0, 6)(rng)};
      },
      [](std::mt19937_64& rng) { return std::uniform_int_distribution<Nanos>(0, 300 * kMs)(rng); },
      200);
}

TEST_CASE("Limiters through 3 nodes: a fixed window grants exactly its limit per window",
          "[cluster][multinode][limiters]") {
  auto clock = std::make_shared<ManualClock>(kStart + 100 * kMs);
  TestCluster cluster(ingrid::testing::smallClusterOptions(clock, 2));
  REQUIRE(cluster.start(3));
  const bool batching = GENERATE(false, true);
  INFO("batching " << batching);
  const std::string prefix = batching ? "fixed-b-" : "fixed-";

  const FixedWindowAcquire one{WindowParams{100, kNanosPerSecond}, 1};
  CHECK(grantsPerKey(cluster, prefix, one, 3, 120, batching) ==
        std::vector<std::int64_t>{100, 100, 100});
  clock->advance(800 * kMs);  // still the same window
  CHECK(grantsPerKey(cluster, prefix, one, 3, 120, batching) == std::vector<std::int64_t>{0, 0, 0});
  clock->advance(100 * kMs);  // the next window
  CHECK(grantsPerKey(cluster, prefix, one, 3, 120, batching) ==
        std::vector<std::int64_t>{100, 100, 100});

  sameAsLocal<FixedWindowAcquire>(
      cluster, *clock, prefix + "script",
      [](std::mt19937_64& rng) {
        return FixedWindowAcquire{WindowParams{5, kNanosPerSecond},
                                  std::uniform_int_distribution<std::int64_t>(1, 6)(rng)};
      },
      [](std::mt19937_64& rng) { return std::uniform_int_distribution<Nanos>(0, 300 * kMs)(rng); },
      200);
}

TEST_CASE("Limiters through 3 nodes: the sliding log and the sliding counter are exact",
          "[cluster][multinode][limiters]") {
  auto clock = std::make_shared<ManualClock>(kStart + 500 * kMs);
  TestCluster cluster(ingrid::testing::smallClusterOptions(clock, 2));
  REQUIRE(cluster.start(3));
  const bool batching = GENERATE(false, true);
  INFO("batching " << batching);
  const std::string b = batching ? "b-" : "";

  // The log: 100 in any second. Half a second on, the first 100 are still inside.
  const SlidingLogAcquire log{SlidingLogParams{100, kNanosPerSecond}, 1};
  CHECK(grantsPerKey(cluster, "log-" + b, log, 3, 120, batching) ==
        std::vector<std::int64_t>{100, 100, 100});
  // The counter: 100 per window, the previous one weighted.
  const SlidingWindowAcquire counter{WindowParams{100, kNanosPerSecond}, 1};
  CHECK(grantsPerKey(cluster, "counter-" + b, counter, 3, 120, batching) ==
        std::vector<std::int64_t>{100, 100, 100});
  clock->advance(500 * kMs);  // the log: nothing has left yet; the counter: a new window
  CHECK(grantsPerKey(cluster, "log-" + b, log, 3, 120, batching) ==
        std::vector<std::int64_t>{0, 0, 0});
  CHECK(grantsPerKey(cluster, "counter-" + b, counter, 3, 120, batching) ==
        std::vector<std::int64_t>{0, 0, 0});  // 100 * (1 - 0) + 0
  clock->advance(250 * kMs);                  // the counter: 100 * 0.75 weigh, 25 fit
  CHECK(grantsPerKey(cluster, "counter-" + b, counter, 3, 120, batching) ==
        std::vector<std::int64_t>{25, 25, 25});
  clock->advance(250 * kMs);  // the log: the first 100 left at 1.5 s
  CHECK(grantsPerKey(cluster, "log-" + b, log, 3, 120, batching) ==
        std::vector<std::int64_t>{100, 100, 100});

  sameAsLocal<SlidingLogAcquire>(
      cluster, *clock, "log-script-" + b,
      [](std::mt19937_64& rng) {
        return SlidingLogAcquire{SlidingLogParams{5, kNanosPerSecond},
                                 std::uniform_int_distribution<std::int64_t>(1, 6)(rng)};
      },
      [](std::mt19937_64& rng) { return std::uniform_int_distribution<Nanos>(0, 300 * kMs)(rng); },
      150);
  sameAsLocal<SlidingWindowAcquire>(
      cluster, *clock, "counter-script-" + b,
      [](std::mt19937_64& rng) {
        return SlidingWindowAcquire{WindowParams{5, kNanosPerSecond},
                                    std::uniform_int_distribution<std::int64_t>(1, 6)(rng)};
      },
      [](std::mt19937_64& rng) { return std::uniform_int_distribution<Nanos>(0, 300 * kMs)(rng); },
      150);
}

TEST_CASE("Limiters through 3 nodes: the leaky meter and the shaper are exact",
          "[cluster][multinode][limiters]") {
  auto clock = std::make_shared<ManualClock>(kStart);
  TestCluster cluster(ingrid::testing::smallClusterOptions(clock, 2));
  REQUIRE(cluster.start(3));
  const bool batching = GENERATE(false, true);
  INFO("batching " << batching);
  const std::string b = batching ? "b-" : "";

  // The meter: 100 units, leaking 100 per second.
  const LeakyMeterAcquire meter{LeakyMeterParams{100, 100, kNanosPerSecond}, 1};
  CHECK(grantsPerKey(cluster, "meter-" + b, meter, 3, 120, batching) ==
        std::vector<std::int64_t>{100, 100, 100});
  // The shaper: a queue of 50 units drained at 100 per second (E = 10 ms).
  const LeakyShaperAcquire shaper{LeakyShaperParams{50, 100, kNanosPerSecond}, 1};
  CHECK(grantsPerKey(cluster, "shaper-" + b, shaper, 3, 120, batching) ==
        std::vector<std::int64_t>{50, 50, 50});
  clock->advance(300 * kMs);  // 30 units leaked, 30 slots drained
  CHECK(grantsPerKey(cluster, "meter-" + b, meter, 3, 120, batching) ==
        std::vector<std::int64_t>{30, 30, 30});
  CHECK(grantsPerKey(cluster, "shaper-" + b, shaper, 3, 120, batching) ==
        std::vector<std::int64_t>{30, 30, 30});

  // The delays handed out through the cluster are the queue's slots, each exactly once.
  std::vector<Nanos> delays;
  for (int i = 0; i < 60; ++i) {
    auto r = cluster.live()[static_cast<std::size_t>(i) % 3]->invoke("shaper-slots-" + b, shaper);
    REQUIRE(r.ok());
    if (r->granted) delays.push_back(r->delay);
  }
  REQUIRE(delays.size() == 50);
  for (std::size_t i = 0; i < delays.size(); ++i)
    CHECK(delays[i] == static_cast<Nanos>(i) * 10 * kMs);

  sameAsLocal<LeakyMeterAcquire>(
      cluster, *clock, "meter-script-" + b,
      [](std::mt19937_64& rng) {
        return LeakyMeterAcquire{LeakyMeterParams{10, 7, kNanosPerSecond},
                                 std::uniform_int_distribution<std::int64_t>(1, 11)(rng)};
      },
      [](std::mt19937_64& rng) { return std::uniform_int_distribution<Nanos>(0, 300 * kMs)(rng); },
      150);
  sameAsLocal<LeakyShaperAcquire>(
      cluster, *clock, "shaper-script-" + b,
      [](std::mt19937_64& rng) {
        return LeakyShaperAcquire{LeakyShaperParams{4, 10, kNanosPerSecond},
                                  std::uniform_int_distribution<std::int64_t>(1, 5)(rng)};
      },
      [](std::mt19937_64& rng) { return std::uniform_int_distribution<Nanos>(0, 150 * kMs)(rng); },
      150);
}

TEST_CASE("Limiters through 3 nodes: the concurrency limiter holds exactly its limit of leases",
          "[cluster][multinode][limiters]") {
  auto clock = std::make_shared<ManualClock>(kStart);
  TestCluster cluster(ingrid::testing::smallClusterOptions(clock, 2));
  REQUIRE(cluster.start(3));
  const bool batching = GENERATE(false, true);
  INFO("batching " << batching);
  const std::string b = batching ? "b-" : "";

  // 100 units held at once, leases of 10 s: 240 acquires per key, 100 leases.
  const ConcurrencyAcquire one{ConcurrencyParams{100, 10 * kNanosPerSecond}, 1};
  CHECK(grantsPerKey(cluster, "conc-" + b, one, 3, 120, batching) ==
        std::vector<std::int64_t>{100, 100, 100});
  clock->advance(9 * kNanosPerSecond);  // all still held
  CHECK(grantsPerKey(cluster, "conc-" + b, one, 3, 120, batching) ==
        std::vector<std::int64_t>{0, 0, 0});
  clock->advance(kNanosPerSecond);  // nobody released: every lease expired by itself
  CHECK(grantsPerKey(cluster, "conc-" + b, one, 3, 120, batching) ==
        std::vector<std::int64_t>{100, 100, 100});

  // The ids handed out through the cluster at one instant are distinct and consecutive.
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 12; ++i) {
    auto r = cluster.live()[static_cast<std::size_t>(i) % 3]->invoke(
        "conc-ids-" + b, ConcurrencyAcquire{ConcurrencyParams{10, kNanosPerSecond}, 1});
    REQUIRE(r.ok());
    if (r->granted) ids.push_back(r->lease);
  }
  REQUIRE(ids.size() == 10);
  for (std::size_t i = 0; i < ids.size(); ++i) CHECK(ids[i] == clock->now() + std::int64_t(i));

  // Acquires, releases and extensions through the nodes in turn answer exactly what a local
  // entry answers, on the ids the cluster handed out.
  std::mt19937_64 rng(99);
  LimiterStore local;
  const ConcurrencyParams p{4, kNanosPerSecond};
  std::vector<std::int64_t> known{0};
  for (int step = 0; step < 200; ++step) {
    clock->advance(std::uniform_int_distribution<Nanos>(0, 200 * kMs)(rng));
    const int op = std::uniform_int_distribution<int>(0, 3)(rng);
    const std::int64_t id =
        known[std::uniform_int_distribution<std::size_t>(0, known.size() - 1)(rng)];
    Node* node = cluster.live()[static_cast<std::size_t>(step) % 3];
    const std::string key = "conc-script-" + b;
    INFO("step " << step << " op " << op);
    Result<LeaseAnswer> remote = Error(Errc::invalid_argument, "unset");
    LeaseAnswer expected;
    if (op <= 1) {
      const ConcurrencyAcquire request{p, std::uniform_int_distribution<std::int64_t>(1, 3)(rng)};
      remote = node->invoke(key, request);
      expected = local.invoke(request, clock->now());
      if (expected.granted) known.push_back(expected.lease);
    } else if (op == 2) {
      remote = node->invoke(key, ConcurrencyRelease{id});
      expected = local.invoke(ConcurrencyRelease{id}, clock->now());
    } else {
      remote = node->invoke(key, ConcurrencyExtend{id, 500 * kMs});
      expected = local.invoke(ConcurrencyExtend{id, 500 * kMs}, clock->now());
    }
    REQUIRE(remote.ok());
    REQUIRE(*remote == expected);
  }
}

TEST_CASE("Limiters through 3 nodes: reservations and the composite bucket are exact",
          "[cluster][multinode][limiters]") {
  auto clock = std::make_shared<ManualClock>(kStart);
  TestCluster cluster(ingrid::testing::smallClusterOptions(clock, 2));
  REQUIRE(cluster.start(3));
  const bool batching = GENERATE(false, true);
  INFO("batching " << batching);
  const std::string b = batching ? "b-" : "";

  // Reservations: 100 tokens, 100 per second, waits of at most 500 ms: 100 at once and 50 more
  // reserved, whatever the order they arrive in.
  const TokenBucketReserve reserve{BucketParams::perPeriod(100, kNanosPerSecond), 1, 500 * kMs};
  CHECK(grantsPerKey(cluster, "reserve-" + b, reserve, 3, 120, batching) ==
        std::vector<std::int64_t>{150, 150, 150});
  // The composite bucket: 1000 per minute and 50 per second; the second band decides.
  const CompositeBucketAcquire composite{
      CompositeParams{{BucketParams::perPeriod(1000, 60 * kNanosPerSecond),
                       BucketParams::perPeriod(50, kNanosPerSecond)},
                      1,
                      Replacement::kProportional},
      1};
  CHECK(grantsPerKey(cluster, "composite-" + b, composite, 3, 120, batching) ==
        std::vector<std::int64_t>{50, 50, 50});
  clock->advance(kNanosPerSecond);  // 50 more per second; the minute band holds 950 + 16
  CHECK(grantsPerKey(cluster, "composite-" + b, composite, 3, 120, batching) ==
        std::vector<std::int64_t>{50, 50, 50});

  sameAsLocal<TokenBucketReserve>(
      cluster, *clock, "reserve-script-" + b,
      [](std::mt19937_64& rng) {
        return TokenBucketReserve{BucketParams::perPeriod(5, kNanosPerSecond),
                                  std::uniform_int_distribution<std::int64_t>(1, 6)(rng),
                                  std::uniform_int_distribution<Nanos>(0, 2000 * kMs)(rng)};
      },
      [](std::mt19937_64& rng) { return std::uniform_int_distribution<Nanos>(0, 300 * kMs)(rng); },
      150);
  sameAsLocal<CompositeBucketAcquire>(
      cluster, *clock, "composite-script-" + b,
      [](std::mt19937_64& rng) {
        const std::int64_t version = std::uniform_int_distribution<std::int64_t>(0, 3)(rng);
        return CompositeBucketAcquire{
            CompositeParams{{BucketParams::perPeriod(5 + version, kNanosPerSecond),
                             BucketParams::perPeriod(20, 60 * kNanosPerSecond)},
                            version,
                            static_cast<Replacement>(version % 3)},
            std::uniform_int_distribution<std::int64_t>(1, 6)(rng)};
      },
      [](std::mt19937_64& rng) { return std::uniform_int_distribution<Nanos>(0, 300 * kMs)(rng); },
      150);
}

}  // namespace
}  // namespace ingrid
