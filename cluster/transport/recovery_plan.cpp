#include "cluster/transport/recovery_plan.h"

#include <algorithm>
#include <limits>

namespace ingrid {

Result<RecoveryPlan> planRecovery(const Topology& base, std::vector<MemberId> survivors,
                                  std::uint64_t term) {
  std::sort(survivors.begin(), survivors.end());
  survivors.erase(std::unique(survivors.begin(), survivors.end()), survivors.end());
  if (survivors.empty()) {
    return Error(Errc::invalid_argument, "no survivor: nothing to recover onto");
  }
  for (MemberId id : survivors) {
    if (!base.hasMember(id)) {
      return Error(Errc::invalid_argument, "member " + std::to_string(id) +
                                               " is not a member of topology v" +
                                               std::to_string(base.version));
    }
  }
  if (base.version > std::numeric_limits<std::uint64_t>::max() - 2 * kRecoveryVersionGap) {
    return Error(Errc::invalid_argument, "topology v" + std::to_string(base.version) +
                                             " leaves no room for a recovered version");
  }
  auto survives = [&](MemberId id) {
    return std::binary_search(survivors.begin(), survivors.end(), id);
  };
  RecoveryPlan plan;
  plan.survivors = survivors;
  Topology& t = plan.topology;
  for (const MemberInfo& m : base.members) {
    if (survives(m.id)) {
      t.members.push_back(m);
    } else {
      plan.lostMembers.push_back(m.id);
    }
  }
  t.version = base.version + kRecoveryVersionGap;
  t.backups = base.backups;
  t.dedupWindowMs = base.dedupWindowMs;
  MemberId nextId = base.nextMemberId;
  for (const MemberInfo& m : base.members) nextId = std::max(nextId, m.id + 1);
  t.nextMemberId = nextId + kRecoveryIdGap;
  t.term = term;
  t.leader = survivors.front();  // until the new leader commits its own (a member, so routable)
  const PartitionId partitions = base.table.partitionCount();
  const PartitionTable ideal = Topology::balancedFor(partitions, t.members, t.backups);
  std::vector<std::vector<MemberId>> owners(partitions);
  for (PartitionId p = 0; p < partitions; ++p) {
    const std::vector<MemberId>& was = base.table.owners(p);
    std::vector<MemberId>& o = owners[p];
    auto state = [&](MemberId m) {  // 0 complete, 1 resyncing, 2 receiving its first snapshot
      const SyncingReplica* r = base.syncingReplica(p, m);
      return r == nullptr ? 0 : (r->resync ? 1 : 2);
    };
    for (int rank = 0; rank < 3; ++rank) {
      for (MemberId m : was) {
        if (survives(m) && state(m) == rank) o.push_back(m);
      }
    }
    if (o.empty()) {  // no replica left: restarts empty on the balanced owners
      plan.lost.push_back(p);
      o = ideal.owners(p);
      for (std::size_t i = 1; i < o.size(); ++i) {
        t.syncing.push_back(SyncingReplica{p, o[i], t.version, false});
      }
      continue;
    }
    if (state(o.front()) == 2) plan.incomplete.push_back(p);
    if (was.empty() || o.front() != was.front()) plan.promoted.push_back(p);
    // Every other survivor resyncs from the primary (complete or resyncing ones keep every
    // acknowledged update while they do).
    for (std::size_t i = 1; i < o.size(); ++i) {
      t.syncing.push_back(SyncingReplica{p, o[i], t.version, state(o[i]) != 2});
    }
  }
  t.table = PartitionTable(partitions, std::move(owners));
  t.stampEpochs(nullptr);  // every primary appointed anew, at the recovered version
  if (auto why = t.invalidReason()) {
    return Error(Errc::invalid_argument, "the recovered topology would be invalid: " + *why);
  }
  return plan;
}

}  // namespace ingrid
