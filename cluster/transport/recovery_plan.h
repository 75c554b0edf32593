// RecoveryPlan: the topology that the survivors of a lost quorum start again from
// (`ingrid-cli recover`, docs/operations.md "Recovery after a lost quorum"), and what it loses.
//
// planRecovery is a pure function of the newest committed topology a survivor holds (`base`) and
// the members that answered (`survivors`). The plan keeps every partition that has a surviving
// replica and restarts the others empty on surviving members (their buckets come back full):
//   - a partition's new primary is its first surviving complete owner, else its first surviving
//     resyncing owner (it holds every acknowledged update), else its first surviving owner still
//     receiving its first snapshot (all or nothing: `incomplete`); with none, it is `lost` and
//     gets the balanced owners over the survivors, with nothing;
//   - every primary is appointed anew (each partition's epoch is the new version), and every other
//     surviving owner resyncs from it: a replica may hold updates of a primary that the lost
//     majority appointed after `base`;
//   - the version and the next member id jump by a wide margin (kRecoveryVersionGap,
//     kRecoveryIdGap): the lost majority may have committed later topologies, and admitted
//     members, that no survivor heard of; a client that learnt one must take the recovered
//     topology as newer, and an id is never given twice.
// Thread safety: pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ingrid/result.h>
#include <ingrid/topology.h>

namespace ingrid {

inline constexpr std::uint64_t kRecoveryVersionGap = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kRecoveryIdGap = std::uint64_t{1} << 16;

struct RecoveryPlan {
  Topology topology;                    // the recovered one (version, term, epochs stamped)
  std::vector<MemberId> survivors;      // sorted
  std::vector<MemberId> lostMembers;    // members of `base` that did not answer
  std::vector<PartitionId> lost;        // no surviving replica: restart empty (full)
  std::vector<PartitionId> promoted;    // the primary died: a surviving backup takes over
  std::vector<PartitionId> incomplete;  // only replicas still receiving a first snapshot
};

// The plan for `base` with `survivors` (members of base; duplicates ignored), the recovered
// topology committed in Raft term `term` (greater than any term a survivor has seen). An Error
// (invalid_argument) names a survivor that is not a member of base, or none given.
Result<RecoveryPlan> planRecovery(const Topology& base, std::vector<MemberId> survivors,
                                  std::uint64_t term);

}  // namespace ingrid
