// An acknowledgement is a stored copy: while a partition's new backup waits for its snapshot
// (held back here by dropping every Snapshot frame), that backup's acknowledgements count for
// nothing. With minInSyncReplicas 2 the partition's writes are refused, changing nothing; with 1
// they are acknowledged and counted as degraded.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>

#include <ingrid/hash.h>
#include <ingrid/node.h>
#include <ingrid/processors/counter.h>

#include "cluster/transport/frame_faults.h"
#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::eventually;
using ingrid::testing::TestCluster;

TEST_CASE("A new backup before its snapshot holds no copy: minInSyncReplicas refuses or counts",
          "[cluster][durability]") {
  const std::uint32_t minInSync = GENERATE(1u, 2u);
  INFO("minInSyncReplicas " << minInSync);
  auto faults = std::make_shared<FrameFaults>(/*seed=*/11);
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.frameFaults = faults;
  o.heartbeatInterval = 50ms;
  o.failureTimeout = 1000ms;
  o.requestTimeout = 1000ms;
  o.minInSyncReplicas = minInSync;
  TestCluster cluster(o);
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(3));

  // Crash a member that does not lead: the survivors' partitions that lost a copy get a new
  // backup, which never gets its snapshot while the fault holds.
  const MemberId leader = cluster.at(0).topology()->coordinator();
  std::size_t victim = 0;
  while (cluster.at(victim).memberId() == leader) ++victim;
  const MemberId victimId = cluster.at(victim).memberId();
  const int held = faults->add({.types = {MessageType::kSnapshot}, .cut = true});
  cluster.crash(victim);
  Node& survivor = *cluster.live().front();
  TopologyPtr t;
  REQUIRE(eventually([&] {
    t = survivor.topology();
    return !t->hasMember(victimId) && !t->syncing.empty();
  }));

  // A key of a partition whose only backup is still syncing, and its primary.
  const PartitionId p = t->syncing.front().partition;
  std::string key;
  for (int i = 0; key.empty(); ++i) {
    REQUIRE(i < 100000);
    const std::string k = "insync-" + std::to_string(i);
    if (partitionOf(k, o.partitions) == p) key = k;
  }
  Node* primary = cluster.byId(t->table.primary(p));
  REQUIRE(primary != nullptr);
  const std::uint64_t degradedBefore = primary->degradedWrites();

  Result<std::int64_t> wrote = primary->invoke(key, Increment{1});
  if (minInSync == 2) {
    REQUIRE_FALSE(wrote.ok());
    CHECK_THAT(wrote.error().message(), Catch::Contains("fewer than minInSyncReplicas 2") &&
                                            Catch::Contains("nothing changed"));
    CHECK(primary->degradedWrites() == degradedBefore);
    Result<std::int64_t> read = primary->invoke(key, GetCounter{});  // a read still runs
    REQUIRE(read.ok());
    CHECK(*read == 0);
  } else {
    INFO((wrote.ok() ? std::string() : wrote.error().message()));
    REQUIRE(wrote.ok());
    // Acknowledged with the primary's copy alone: the syncing backup's acknowledgement is not one.
    CHECK(primary->degradedWrites() > degradedBefore);
  }

  // Once the snapshots go, the backup is complete and the write is taken (again).
  faults->remove(held);
  REQUIRE(eventually([&] { return cluster.settled(); }));
  Result<std::int64_t> after = primary->invoke(key, Increment{1});
  INFO((after.ok() ? std::string() : after.error().message()));
  REQUIRE(after.ok());
  CHECK(*after == (minInSync == 2 ? 1 : 2));
}

TEST_CASE("minInSyncReplicas must be from 1 to backups + 1", "[cluster][durability]") {
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.minInSyncReplicas = 3;  // backups 1: at most 2 copies
  Node node(o, ProcessorRegistry::withBuiltins());
  Result<bool> started = node.start();
  REQUIRE_FALSE(started.ok());
  CHECK(started.error() == Errc::invalid_configuration);
  CHECK_THAT(started.error().message(), Catch::Contains("minInSyncReplicas"));
}

TEST_CASE("Asynchronous backups refuse minInSyncReplicas above 1, and kPrimarySync names them",
          "[cluster][durability]") {
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.replication = ReplicationMode::kAsyncBackups;
  o.minInSyncReplicas = 2;
  Node node(o, ProcessorRegistry::withBuiltins());
  Result<bool> started = node.start();
  REQUIRE_FALSE(started.ok());
  CHECK(started.error() == Errc::invalid_configuration);
  CHECK_THAT(started.error().message(), Catch::Contains("kAsyncBackups"));
  // The deprecated name compiles (with its warning) and is the same mode.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  STATIC_REQUIRE(ReplicationMode::kPrimarySync == ReplicationMode::kAsyncBackups);
#pragma GCC diagnostic pop
}
