#include "cluster/control/migration_plan.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace ingrid;

namespace {

MemberInfo member(MemberId id) {
  return MemberInfo{id, "127.0.0.1:" + std::to_string(7000 + id), id, {}, {}};
}

// Members 1..n, the balanced table, installed at version 10.
Topology installed(MemberId n, std::uint32_t partitions, std::uint32_t backups) {
  Topology t;
  t.version = 10;
  t.backups = backups;
  t.nextMemberId = n + 1;
  for (MemberId id = 1; id <= n; ++id) t.members.push_back(member(id));
  t.table = Topology::balancedFor(partitions, t.members, backups);
  return t;
}

}  // namespace

TEST_CASE(
    "Migration plan: a join keeps the owners in T1, adds the new ones syncing and T2 is "
    "the balanced table",
    "[control][migration]") {
  const Topology cur = installed(3, 32, 1);
  std::vector<MemberInfo> after = cur.members;
  after.push_back(member(4));
  const std::set<MemberId> failed;
  const std::set<std::pair<PartitionId, MemberId>> synced;
  MigrationInputs in;
  in.failed = &failed;
  in.synced = &synced;
  in.leader = 1;
  const MigrationPlan plan = planMigration(cur, after, 5, in);

  REQUIRE(plan.t1);
  REQUIRE(plan.t2);
  CHECK(plan.t1->version == 11);
  CHECK(plan.t2->version == 12);
  CHECK(plan.t1->memberIds() == std::vector<MemberId>{1, 2, 3, 4});
  CHECK(plan.t1->nextMemberId == 5);
  CHECK(plan.t2->table == Topology::balancedFor(32, after, 1));
  for (PartitionId p = 0; p < 32; ++p) {
    CHECK(plan.t1->table.primary(p) == cur.table.primary(p));  // no primary moves in T1
    for (MemberId m : cur.table.owners(p)) CHECK(plan.t1->table.isOwner(p, m));
    for (MemberId m : plan.t2->table.owners(p)) {
      CHECK(plan.t1->table.isOwner(p, m));
      // Each new owner syncs from T1 and is awaited before T2.
      const bool isNew = !cur.table.isOwner(p, m);
      CHECK((plan.t1->syncingReplica(p, m) != nullptr) == isNew);
      CHECK((plan.awaiting.count({p, m}) != 0) == isNew);
      if (isNew) CHECK(plan.awaiting.at({p, m}) == 11);
    }
  }
  CHECK(!plan.awaiting.empty());
}

TEST_CASE("Migration plan: a failed primary's backup takes over and the others resync from it",
          "[control][migration]") {
  const Topology cur = installed(3, 16, 2);
  std::vector<MemberInfo> after{member(2), member(3)};
  const std::set<MemberId> failed{1};
  const std::set<std::pair<PartitionId, MemberId>> synced;
  MigrationInputs in;
  in.failed = &failed;
  in.synced = &synced;
  in.leader = 2;
  const MigrationPlan plan = planMigration(cur, after, 4, in);

  CHECK(plan.t1->memberIds() == std::vector<MemberId>{2, 3});
  for (PartitionId p = 0; p < 16; ++p) {
    CHECK(!plan.t1->table.isOwner(p, 1));
    if (cur.table.primary(p) != 1) {
      CHECK(plan.t1->table.primary(p) == cur.table.primary(p));
      continue;
    }
    const MemberId promoted = plan.t1->table.primary(p);
    CHECK(promoted == cur.table.owners(p)[1]);  // the first complete surviving owner
    for (MemberId m : plan.t1->table.owners(p)) {
      if (m == promoted) continue;
      const SyncingReplica* r = plan.t1->syncingReplica(p, m);
      REQUIRE(r != nullptr);
      CHECK(r->resync);
      CHECK(r->since == 11);
    }
  }
}
