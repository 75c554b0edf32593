// A test of an embedder's, outside the ingrid tree, built against the installed package with the
// test kit (ingrid::testing): three nodes on simulated time, an audited load, a crash and a
// partition; every key granted exactly its capacity. Exit status 0 and "consumer-testing: exact"
// when it holds.
#include <ingrid/testing/cluster.h>
#include <ingrid/testing/grant_audit.h>

#include <chrono>
#include <cstdio>
#include <string>

int main() {
  using namespace std::chrono_literals;
  ingrid::testing::ClusterOptions options;
  options.nodes = 3;
  options.network = ingrid::testing::Network::kSimulated;
  ingrid::testing::Cluster cluster(options);
  if (auto started = cluster.start(); !started) {
    std::printf("consumer-testing: start: %s\n", started.error().message().c_str());
    return 1;
  }
  ingrid::testing::GrantAudit audit(cluster);
  constexpr std::int64_t kCapacity = 20;
  auto load = [&](ingrid::testing::Cluster::Duration d) {
    const auto until = cluster.elapsed() + d;
    for (int tick = 0; cluster.elapsed() < until; ++tick) {
      for (std::size_t i = 0; i < cluster.size(); ++i) {
        if (!cluster.up(i)) continue;
        audit.acquire(cluster.node(i), "key-" + std::to_string((tick + i) % 10), kCapacity);
      }
      cluster.advance(10ms);
    }
  };
  load(1s);
  if (auto crashed = cluster.crash(2); !crashed) return 1;
  load(3s);  // through the failover
  if (auto restarted = cluster.restart(2); !restarted) return 1;
  if (auto parted = cluster.partition({{0, 1}, {2}}); !parted) return 1;
  load(4s);
  cluster.heal();
  if (!cluster.runUntil([&] { return audit.pending() == 0; }, 30s)) return 1;
  const ingrid::testing::AuditReport report = audit.check(cluster);
  std::printf("consumer-testing: %s\n", report.summary().c_str());
  if (!report.ok()) {
    std::printf("%s", report.failures().c_str());
    return 1;
  }
  for (const ingrid::testing::KeyVerdict& key : report.keys) {
    if (key.unknown == 0 && key.acked != kCapacity) {
      std::printf("consumer-testing: %s granted %lld, capacity %lld\n", key.key.c_str(),
                  static_cast<long long>(key.acked), static_cast<long long>(kCapacity));
      return 1;
    }
  }
  std::printf("consumer-testing: exact\n");
  return 0;
}
