// The embedder's test of catch2_service_test.cpp, written with GoogleTest: three replicas of a
// small HTTP-like service (rate_limited_service.h), each embedding a node of an
// ingrid::testing::Cluster, one crashed mid-load; every API key still gets exactly its limit of
// 200s. On simulated time by default; `--loopback` runs it on real sockets and time.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ingrid/testing/cluster.h>

#include "rate_limited_service.h"

namespace {

bool loopback = false;  // --loopback

using namespace std::chrono_literals;

TEST(RateLimitedService, CrashOneReplicaMidLoadEveryKeyGetsExactlyItsLimit) {
  // What the handlers touch, declared before the cluster: on loopback a node's completion thread
  // may run a handler until the cluster's destructor returns.
  std::mutex mu;
  std::map<std::string, std::map<int, int>> statuses;  // key -> status -> count
  std::array<std::atomic<int>, 3> inflight{};
  ingrid::testing::ClusterOptions options;
  options.nodes = 3;
  options.network =
      loopback ? ingrid::testing::Network::kLoopback : ingrid::testing::Network::kSimulated;
  ingrid::testing::Cluster cluster(options);
  auto started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.error().message();

  const auto limit = ingrid::BucketParams::perPeriod(100, 24h / 1ns);  // none refill meanwhile
  std::vector<std::unique_ptr<example::RateLimitedService>> replicas;
  for (std::size_t i = 0; i < 3; ++i) {
    replicas.push_back(std::make_unique<example::RateLimitedService>(cluster.node(i), limit));
  }

  const std::size_t victim = 1;
  bool crashed = false;
  int tick = 0;
  const auto start = cluster.elapsed();
  while (cluster.elapsed() - start < 10s) {
    if (!crashed && cluster.elapsed() - start >= 4s) {
      // Stop sending to the victim, collect its answers, then kill -9 it.
      ASSERT_TRUE(cluster.runUntil([&] { return inflight[victim] == 0; }, 10s));
      auto down = cluster.crash(victim);
      ASSERT_TRUE(down.ok()) << down.error().message();
      crashed = true;
    }
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      if (crashed && r == victim) continue;
      const std::string key = "client-" + std::to_string((tick + static_cast<int>(r)) % 12);
      ++inflight[r];
      replicas[r]->handle({"/v1/things", key}, [&, key, r](example::Response response) {
        std::lock_guard lock(mu);
        ++statuses[key][response.status];
        --inflight[r];
      });
    }
    ++tick;
    cluster.advance(10ms);
  }
  ASSERT_TRUE(cluster.runUntil(
      [&] { return inflight[0] == 0 && inflight[1] == 0 && inflight[2] == 0; }, 30s));

  std::lock_guard lock(mu);
  EXPECT_EQ(statuses.size(), 12u);
  int ok = 0, limited = 0;
  for (const auto& [key, counts] : statuses) {
    const int granted = counts.count(200) ? counts.at(200) : 0;
    EXPECT_EQ(granted, 100) << key;
    ok += granted;
    limited += counts.count(429) ? counts.at(429) : 0;
  }
  std::printf("[example] gtest, %s: %d x 200, %d x 429 over %.1f s of cluster time\n",
              loopback ? "loopback" : "simulated", ok, limited,
              std::chrono::duration<double>(cluster.elapsed() - start).count());
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);  // takes its own --gtest_ flags out
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--loopback") == 0) loopback = true;
  }
  return RUN_ALL_TESTS();
}
