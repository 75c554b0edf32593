// No heap allocation per request in the steady state: the allocations of a closed loop
// of acquires through a thin client or on an embedded node, counted over the whole process by a
// replacement operator new (alloc_counter.h, so this file is its executable's only test source),
// after a warm-up.
// Counts, not times: the bound is what is allowed per acquire, whatever the machine's speed. Not
// counted under the sanitizers (ASan pools nothing; TSan is slow enough for the nodes' timers to
// weigh): the plain build's run is the one that holds the line.
#include "alloc_counter.h"  // defines this program's operator new and delete

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <ingrid/client.h>
#include <ingrid/node.h>
#include <ingrid/string_pool.h>

#include "acquire_loop.h"
#include "support/test_cluster.h"

using namespace ingrid;
using ingrid::testing::TestCluster;

namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

constexpr int kInflight = 64;
constexpr std::uint64_t kOps = 20'000;
constexpr int kRounds = 3;

// Allocations per acquire on `invoker` (a Client or a Node): the least of kRounds loops of kOps
// acquires each, after as many to warm up (every bucket made, every map grown, every connection
// open, every pool filled). The least, because a round also counts what the process does
// meanwhile: a member still applying the join's last Raft entries decodes a topology there (about
// a hundred allocations each), a one-off that is not the steady state and that a slow, loaded
// machine stretches over the first round.
// `halt` ends the invoker's calls (a loop that timed out must not go while its chains run).
template <class Invoker, class Halt>
double allocationsPerAcquire(Invoker& invoker, Halt halt) {
  const std::vector<std::string> keys = bench::smallKeys(1000);
  {
    bench::AcquireLoop<Invoker> warm{invoker, keys};
    const bool warmed = warm.run(kOps, kInflight);
    if (!warmed) halt();
    REQUIRE(warmed);
    REQUIRE(warm.failed.load() == 0);
  }
  double least = 0;
  for (int round = 0; round < kRounds; ++round) {
    bench::AcquireLoop<Invoker> loop{invoker, keys};
    const std::uint64_t before = alloc_counter::allocs.load();
    const bool finished = loop.run(kOps, kInflight);
    const std::uint64_t allocs = alloc_counter::allocs.load() - before;
    if (!finished) halt();
    REQUIRE(finished);
    REQUIRE(loop.failed.load() == 0);
    const std::uint64_t ops = loop.completed(kInflight);
    REQUIRE(ops > 0);
    const double perAcquire = static_cast<double>(allocs) / static_cast<double>(ops);
    least = round == 0 ? perAcquire : std::min(least, perAcquire);
  }
  return least;
}

// Through a thin client of `cluster`.
double clientAllocationsPerAcquire(TestCluster& cluster) {
  ClientOptions c;
  for (Node* n : cluster.live()) c.seeds.push_back(n->listenAddress());
  Client client(c);
  REQUIRE(client.start().ok());
  const double perAcquire = allocationsPerAcquire(client, [&] { client.stop(); });
  client.stop();
  return perAcquire;
}

// With `onNetwork`, the partitions run on the network thread; otherwise on one worker, which
// reads its calls and replicates its partitions on its shard port's links.
NodeOptions nodeOptions(bool onNetwork, unsigned backups) {
  NodeOptions o = testing::smallClusterOptions();
  o.partitionsOnNetworkThread = onNetwork;
  o.backups = backups;
  return o;
}

}  // namespace

// What is left is Asio's: an async operation allocated when a read or write does not complete at
// once (bench_allocs measures about 0.04-0.10 per acquire through a thin client, with and without
// --single-thread, and 0.00 on an embedded node). A quarter is the line.
TEST_CASE("A thin client's acquire costs no heap allocation in the steady state",
          "[cluster][allocs]") {
  if (!StringPool::enabled()) {
    WARN("strings and blocks are not reused under AddressSanitizer: nothing to count");
    return;
  }
  if (kThreadSanitizer) {
    // The count takes in what the nodes' timers allocate meanwhile (heartbeats, Raft, leases),
    // which grows with how long the loop takes: ten times as long under TSan.
    WARN("not counted under ThreadSanitizer: the background's share grows with its slowness");
    return;
  }
  struct Setup {
    const char* name;
    bool onNetwork;
    int nodes;
    unsigned backups;
    bool embedded = false;  // calls on the first node itself, not through a thin client
  };
  for (const Setup& setup :
       {Setup{"one node with its partitions on the network thread", true, 1, 0},
        Setup{"three such nodes, each update replicated to a synchronous backup", true, 3, 1},
        Setup{"three nodes with a worker thread each (shard ports), a synchronous backup", false, 3,
              1},
        // Each call is made on the caller's thread and freed on others (the worker's, the
        // completion pool's): its blocks come back through the block cache's depot.
        Setup{"one embedded node with a worker thread, called in process", false, 1, 0, true}}) {
    DYNAMIC_SECTION(setup.name) {
      TestCluster cluster(nodeOptions(setup.onNetwork, setup.backups));
      REQUIRE(cluster.start(setup.nodes));
      Node& node = cluster.at(0);
      const double perAcquire = setup.embedded ? allocationsPerAcquire(node, [&] { node.stop(); })
                                               : clientAllocationsPerAcquire(cluster);
      INFO(perAcquire << " allocations per acquire");
      CHECK(perAcquire < 0.25);
    }
  }
}
