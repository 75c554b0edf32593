// An embedder's own test, written with Catch2: three replicas of a small HTTP-like service
// (rate_limited_service.h), each embedding a node of an ingrid::testing::Cluster; a load on 12
// API keys through all of them; one replica crashed mid-load. Every key is still granted exactly
// its limit: no 200 too many, none too few. On simulated time by default (well under a second);
// `--loopback` runs the same test on real sockets and time.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
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

TEST_CASE("Three replicas, one crashed mid-load: every key gets exactly its limit of 200s") {
  const auto wallStart = std::chrono::steady_clock::now();
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
  INFO((started ? "" : started.error().message()));
  REQUIRE(started);

  // 100 requests per API key per day: none refill during the test.
  const auto limit = ingrid::BucketParams::perPeriod(100, 24h / 1ns);
  std::vector<std::unique_ptr<example::RateLimitedService>> replicas;
  for (std::size_t i = 0; i < 3; ++i) {
    replicas.push_back(std::make_unique<example::RateLimitedService>(cluster.node(i), limit));
  }

  const std::size_t victim = 2;
  bool crashed = false;
  int tick = 0;
  const auto start = cluster.elapsed();
  while (cluster.elapsed() - start < 10s) {
    if (!crashed && cluster.elapsed() - start >= 3s) {
      // The load balancer stops sending to the victim and its answers come back (an answer lost
      // with a process is an unknown outcome to any HTTP client); then kill -9.
      REQUIRE(cluster.runUntil([&] { return inflight[victim] == 0; }, 10s));
      REQUIRE(cluster.crash(victim));
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
  REQUIRE(cluster.runUntil([&] { return inflight[0] == 0 && inflight[1] == 0 && inflight[2] == 0; },
                           30s));

  std::lock_guard lock(mu);
  int ok = 0, limited = 0, unavailable = 0;
  for (const auto& [key, counts] : statuses) {
    INFO(key);
    CHECK(counts.count(200) == 1);
    CHECK(counts.at(200) == 100);
    ok += counts.count(200) ? counts.at(200) : 0;
    limited += counts.count(429) ? counts.at(429) : 0;
    unavailable += counts.count(503) ? counts.at(503) : 0;
  }
  CHECK(statuses.size() == 12);
  std::printf(
      "[example] catch2, %s: %.1f s of load, replica %zu crashed at 3 s: %d x 200, %d x "
      "429, %d x 503 in %.3f wall s\n",
      loopback ? "loopback" : "simulated",
      std::chrono::duration<double>(cluster.elapsed() - start).count(), victim, ok, limited,
      unavailable,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count());
}

}  // namespace

int main(int argc, char** argv) {
  Catch::Session session;
  using Catch::clara::Opt;
  session.cli(session.cli() | Opt(loopback)["--loopback"]("run on real sockets and time"));
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  return session.run();
}
