#include "cluster/transport/recovery_plan.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

using namespace ingrid;

namespace {

// Members 1..n at distinct addresses, the balanced table, committed in term 3 at version 10.
Topology base(std::uint64_t n, std::uint32_t partitions, std::uint32_t backups) {
  Topology t;
  t.version = 10;
  t.term = 3;
  t.leader = 1;
  t.backups = backups;
  t.nextMemberId = n + 1;
  for (std::uint64_t id = 1; id <= n; ++id) {
    t.members.push_back(MemberInfo{id, "127.0.0.1:" + std::to_string(7000 + id), id, {}, {}});
  }
  t.table = Topology::balancedFor(partitions, t.members, backups);
  t.stampEpochs(nullptr);
  return t;
}

bool contains(const std::vector<PartitionId>& v, PartitionId p) {
  return std::find(v.begin(), v.end(), p) != v.end();
}

}  // namespace

TEST_CASE("Recovery plan: surviving replicas are kept and the others restart empty", "[recovery]") {
  const Topology b = base(3, 64, 1);
  auto plan = planRecovery(b, {3}, 4);
  REQUIRE(plan.ok());
  const Topology& t = plan->topology;
  CHECK(!t.invalidReason());
  CHECK(t.memberIds() == std::vector<MemberId>{3});
  CHECK(plan->survivors == std::vector<MemberId>{3});
  CHECK(plan->lostMembers == std::vector<MemberId>{1, 2});
  CHECK(t.version == b.version + kRecoveryVersionGap);
  CHECK(t.nextMemberId == b.nextMemberId + kRecoveryIdGap);
  CHECK(t.term == 4);
  CHECK(t.leader == 3);
  for (PartitionId p = 0; p < 64; ++p) {
    const bool held = b.table.isOwner(p, 3);
    CHECK(contains(plan->lost, p) == !held);
    CHECK(contains(plan->promoted, p) == (held && b.table.primary(p) != 3));
    CHECK(t.table.primary(p) == 3);  // the only member left
    CHECK(t.epoch(p) == t.version);  // every primary appointed anew
  }
  CHECK(!plan->lost.empty());
  CHECK(plan->lost.size() < 64);
}

TEST_CASE("Recovery plan: a surviving backup becomes primary and the other survivors resync",
          "[recovery]") {
  const Topology b = base(5, 32, 2);
  auto plan = planRecovery(b, {5, 3, 4, 4}, 9);  // unsorted, with a duplicate
  REQUIRE(plan.ok());
  const Topology& t = plan->topology;
  CHECK(plan->survivors == std::vector<MemberId>{3, 4, 5});
  CHECK(plan->lost.empty());  // three owners each: one survives the loss of two members
  for (PartitionId p = 0; p < 32; ++p) {
    std::vector<MemberId> expected;
    for (MemberId m : b.table.owners(p)) {
      if (m >= 3) expected.push_back(m);
    }
    CHECK(t.table.owners(p) == expected);  // order kept: the first survivor leads
    for (std::size_t i = 1; i < expected.size(); ++i) {
      const SyncingReplica* r = t.syncingReplica(p, expected[i]);
      REQUIRE(r != nullptr);
      CHECK(r->resync);
      CHECK(r->since == t.version);
    }
    CHECK(t.syncingReplica(p, expected.front()) == nullptr);
  }
}

TEST_CASE("Recovery plan: a complete replica leads before a resyncing one before a syncing one",
          "[recovery]") {
  Topology b = base(4, 1, 3);
  b.table = PartitionTable(1, std::vector<std::vector<MemberId>>{{1, 2, 3, 4}});
  b.syncing = {SyncingReplica{0, 2, 9, false}, SyncingReplica{0, 3, 9, true}};
  auto plan = planRecovery(b, {2, 3, 4}, 4);
  REQUIRE(plan.ok());
  CHECK(plan->topology.table.owners(0) == std::vector<MemberId>{4, 3, 2});
  CHECK(plan->promoted == std::vector<PartitionId>{0});
  CHECK(plan->incomplete.empty());
  // Only the one still receiving its first snapshot survives: kept, all or nothing.
  auto onlySyncing = planRecovery(b, {2}, 4);
  REQUIRE(onlySyncing.ok());
  CHECK(onlySyncing->incomplete == std::vector<PartitionId>{0});
  CHECK(onlySyncing->lost.empty());
}

TEST_CASE("Recovery plan: a survivor outside the topology or none at all is refused",
          "[recovery]") {
  const Topology b = base(3, 8, 1);
  auto stranger = planRecovery(b, {2, 7}, 4);
  REQUIRE(!stranger.ok());
  CHECK(stranger.error().detail() == "member 7 is not a member of topology v10");
  auto none = planRecovery(b, {}, 4);
  REQUIRE(!none.ok());
  CHECK(none.error().detail() == "no survivor: nothing to recover onto");
}
