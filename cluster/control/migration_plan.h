// planMigration: the control plane leader's plan of one membership change, as the two topologies
// that move partitions without loss (invariants 5 and 7):
//   T1 = the current owners of every partition, plus its new owners (by rendezvous over the new
//        member list) as extra backups, syncing. Members declared failed are dropped already: of
//        each partition one owned, the first complete surviving owner becomes the primary, and
//        every other owner resyncs from it.
//   T2 = the new owners only, installed once every awaited replica has reported kSynced.
// A pure function of its arguments (it only logs, to `in.log`, a partition that loses its last
// complete replica); any thread. The Coordinator numbers, prepares and commits what it returns.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include <ingrid/topology.h>

#include "cluster/transport/logger.h"

namespace ingrid {

struct MigrationPlan {
  std::shared_ptr<Topology> t1;  // version: the installed one's + 1
  std::shared_ptr<Topology> t2;  // version: T1's + 1 (re-numbered if T1 is re-planned)
  // (partition, new owner) -> the topology version whose snapshot will count for its kSynced.
  std::map<std::pair<PartitionId, MemberId>, std::uint64_t> awaiting;
};

struct MigrationInputs {
  const std::set<MemberId>* failed = nullptr;  // declared failed: in no plan (required)
  // Re-planning this coordinator's own change (the installed topology is its T1): the snapshots
  // under way are kept, and `synced` (replicas that reported complete during it) counts.
  bool ownPlan = false;
  const std::set<std::pair<PartitionId, MemberId>>* synced = nullptr;  // required
  // After a stall: every syncing replica gets a new snapshot (`since` = T1).
  bool restartSnapshots = false;
  MemberId leader = 0;  // for the log
  Logger log = {};      // where a partition that loses its last complete replica is told
};

// The plan from the installed topology `cur` to the members `after` (non-empty, none failed),
// ids from `nextId` on given to no one yet.
MigrationPlan planMigration(const Topology& cur, std::vector<MemberInfo> after, MemberId nextId,
                            const MigrationInputs& in);

}  // namespace ingrid
