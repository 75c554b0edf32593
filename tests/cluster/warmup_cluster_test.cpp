// The warm-up limiter (docs/warm-up.md) through a 3-node in-process cluster under a frozen
// ManualClock: from every node at once, with client-side batching on and off, each key grants
// exactly the permits whose turn comes within maxWait; and a scripted sequence run through the
// nodes answers exactly what the same sequence answers on a local entry.
#include <ingrid/processors/warmup.h>

#include <catch2/catch.hpp>

#include <asio/use_future.hpp>

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/batcher.h>
#include <ingrid/node.h>

#include "processors/limiter_store.h"
#include "support/test_cluster.h"

namespace ingrid {
namespace {

using ingrid::testing::LimiterStore;
using ingrid::testing::TestCluster;

constexpr Nanos kStart = 1'790'000'000 * kNanosPerSecond;
constexpr Nanos kMs = 1'000'000;

// `perThread` requests from 2 threads on each node at once over `keys` keys, through a Batcher
// per node or straight to the node; the grants per key. Every request must be answered.
std::vector<std::int64_t> grantsPerKey(TestCluster& cluster, const std::string& prefix,
                                       const WarmupAcquire& request, int keys, int perThread,
                                       bool batching) {
  std::vector<std::atomic<std::int64_t>> granted(static_cast<std::size_t>(keys));
  std::atomic<int> errors{0};
  std::mutex mu;
  std::string lastError;
  std::vector<std::unique_ptr<Batcher<Node, WarmupAcquire>>> batchers;
  for (Node* node : cluster.live()) {
    batchers.push_back(std::make_unique<Batcher<Node, WarmupAcquire>>(*node));
  }
  std::vector<std::thread> threads;
  for (std::size_t n = 0; n < batchers.size(); ++n) {
    Node* node = cluster.live()[n];
    Batcher<Node, WarmupAcquire>* batcher = batchers[n].get();
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, node, batcher] {
        std::vector<std::pair<int, std::future<Result<WarmupAnswer>>>> pending;
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
          } else if (r->granted) {
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

TEST_CASE("Warm-up through 3 nodes: exactly the permits whose turn comes within maxWait",
          "[cluster][multinode][limiters][warmup]") {
  auto clock = std::make_shared<ManualClock>(kStart);
  TestCluster cluster(ingrid::testing::smallClusterOptions(clock, 2));
  REQUIRE(cluster.start(3));
  const bool batching = GENERATE(false, true);
  INFO("batching " << batching);
  const std::string prefix = batching ? "warm-b-" : "warm-";

  // docs/warm-up.md's limiter with a maxWait of 10 s, the clock frozen: the 10 permits of the
  // warm-up zone cost 2 s together, then each costs 100 ms, so the permits whose turn is at most
  // 10 s away are the first 10 and 81 more: 91 per key, whatever the order.
  const WarmupAcquire one{WarmupParams{10, kNanosPerSecond, 2 * kNanosPerSecond, 3, 10'000 * kMs},
                          1};
  CHECK(grantsPerKey(cluster, prefix, one, 3, 120, batching) ==
        std::vector<std::int64_t>{91, 91, 91});
  // 1 s later, 10 more turns fit (100 ms each); nothing cooled (the schedule is ahead of now).
  clock->advance(1000 * kMs);
  CHECK(grantsPerKey(cluster, prefix, one, 3, 60, batching) ==
        std::vector<std::int64_t>{10, 10, 10});

  // A scripted sequence through the nodes in turn equals a local entry's answers.
  std::mt19937_64 rng(4242);
  LimiterStore local;
  const auto nodes = cluster.live();
  const std::string key = prefix + "script";
  for (int step = 0; step < 200; ++step) {
    clock->advance(std::uniform_int_distribution<Nanos>(0, 400 * kMs)(rng));
    const WarmupAcquire request{
        WarmupParams{7, kNanosPerSecond, 1500 * kMs, 4,
                     std::uniform_int_distribution<Nanos>(0, 1)(rng) * 500 * kMs},
        std::uniform_int_distribution<std::int64_t>(1, 6)(rng)};
    auto remote = nodes[static_cast<std::size_t>(step) % nodes.size()]->invoke(key, request);
    INFO("step " << step);
    REQUIRE(remote.ok());
    REQUIRE(*remote == local.invoke(request, clock->now()));
  }
}

}  // namespace
}  // namespace ingrid
