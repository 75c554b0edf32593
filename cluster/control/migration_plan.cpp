#include "cluster/control/migration_plan.h"

#include <algorithm>
#include <utility>

namespace ingrid {

MigrationPlan planMigration(const Topology& cur, std::vector<MemberInfo> after, MemberId nextId,
                            const MigrationInputs& in) {
  const std::uint32_t partitions = cur.table.partitionCount();
  const PartitionTable ideal = Topology::balancedFor(partitions, after, cur.backups);
  auto failed = [&](MemberId m) { return in.failed->count(m) != 0; };
  auto contains = [](const std::vector<MemberId>& v, MemberId m) {
    return std::find(v.begin(), v.end(), m) != v.end();
  };

  // T1 members: the current ones that have not failed, plus any joining.
  std::vector<MemberInfo> t1Members;
  for (const auto& m : cur.members) {
    if (!failed(m.id)) t1Members.push_back(m);
  }
  for (const auto& m : after) {
    if (!cur.hasMember(m.id)) t1Members.push_back(m);
  }
  std::sort(t1Members.begin(), t1Members.end(),
            [](const MemberInfo& a, const MemberInfo& b) { return a.id < b.id; });

  // Re-planning this coordinator's own change keeps the snapshots already under way.
  const std::uint64_t t1Version = cur.version + 1;
  const bool ownPlan = in.ownPlan;
  // After a stall, snapshots under way are not trusted to finish: they all start again.
  const bool restart = in.restartSnapshots;
  // A replica the installed topology lists as syncing is complete if it reported so during
  // this coordinator's own change (the topology's list only shrinks with T2).
  auto complete = [&](PartitionId p, MemberId m) {
    if (!cur.table.isOwner(p, m)) return false;
    const SyncingReplica* r = cur.syncingReplica(p, m);
    return r == nullptr || (ownPlan && in.synced->count({p, m}) != 0);
  };
  std::vector<std::vector<MemberId>> owners(partitions);
  std::vector<SyncingReplica> syncing;
  MigrationPlan plan;
  for (PartitionId p = 0; p < partitions; ++p) {
    const std::vector<MemberId>& was = cur.table.owners(p);
    std::vector<MemberId>& o = owners[p];
    // Complete surviving replicas first (the first is the primary), then resyncing ones (they
    // hold every acknowledged update: see SyncingReplica), then incomplete ones that remain owners.
    auto resyncing = [&](MemberId m) {
      const SyncingReplica* r = cur.syncingReplica(p, m);
      return r != nullptr && r->resync && !complete(p, m);
    };
    for (MemberId m : was) {
      if (!failed(m) && complete(p, m)) o.push_back(m);
    }
    for (MemberId m : was) {
      if (!failed(m) && resyncing(m)) o.push_back(m);
    }
    for (MemberId m : was) {
      if (!failed(m) && !complete(p, m) && !resyncing(m) && ideal.isOwner(p, m)) o.push_back(m);
    }
    if (!o.empty() && !complete(p, o.front()) && !resyncing(o.front())) {
      // Policy (docs/ARCHITECTURE.md): the partition goes on from a replica that was still
      // receiving its first snapshot: it holds the whole snapshot and every later update if the
      // snapshot was in, else nothing (acknowledged updates are then lost).
      in.log.warn({.member = knownMember(in.leader), .partition = p, .peer = o.front()}, "member ",
                  in.leader, " (leader): partition ", p, " has no complete replica left; member ",
                  o.front(),
                  ", which was receiving its first snapshot, takes over with what it holds (all "
                  "or nothing)");
    }
    if (o.empty()) {  // every replica failed: the partition starts again, empty
      in.log.error({.member = knownMember(in.leader), .partition = p}, "member ", in.leader,
                   " (leader): partition ", p,
                   " has no complete replica left (every owner failed: ", was.size(),
                   "); it restarts empty on its new owners, and what it held is lost");
      o = ideal.owners(p);
      for (std::size_t i = 1; i < o.size(); ++i) {  // backups take the (empty) snapshot
        syncing.push_back(SyncingReplica{p, o[i], t1Version});
        plan.awaiting[{p, o[i]}] = t1Version;
      }
      continue;
    }
    // The primary failed: a backup took over, and every other owner resyncs from it (it may
    // hold updates the old primary replicated to some backups only).
    const bool promoted = was.empty() || o.front() != was.front();
    for (MemberId m : ideal.owners(p)) {
      if (!contains(o, m)) o.push_back(m);
    }
    for (std::size_t i = 1; i < o.size(); ++i) {
      const MemberId m = o[i];
      const SyncingReplica* before = cur.syncingReplica(p, m);
      if (complete(p, m) && !promoted) continue;
      const std::uint64_t since =
          before && ownPlan && !promoted && !restart ? before->since : t1Version;
      // Was complete (or resyncing from complete) in the installed topology.
      const bool resync = complete(p, m) || (before != nullptr && before->resync);
      syncing.push_back(SyncingReplica{p, m, since, resync});
      if (ideal.isOwner(p, m)) plan.awaiting[{p, m}] = since;
    }
  }
  auto t1 = std::make_shared<Topology>();
  t1->version = t1Version;
  t1->members = std::move(t1Members);
  t1->table = PartitionTable(partitions, std::move(owners));
  t1->backups = cur.backups;
  t1->dedupWindowMs = cur.dedupWindowMs;
  t1->nextMemberId = nextId;
  t1->syncing = std::move(syncing);

  auto t2 = std::make_shared<Topology>();
  t2->version = t1->version + 1;  // (re-numbered if T1 is re-planned)
  t2->members = std::move(after);
  t2->table = ideal;
  t2->backups = cur.backups;
  t2->dedupWindowMs = cur.dedupWindowMs;
  t2->nextMemberId = nextId;
  plan.t1 = std::move(t1);
  plan.t2 = std::move(t2);
  return plan;
}

}  // namespace ingrid
