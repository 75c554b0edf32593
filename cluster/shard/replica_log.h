// How a backup judges one replicated update against the replica it holds (invariants 12 and 13:
// terms on the data path). A pure function, so the rule is tested on its own.
//
// Every update names the epoch of the primary that made it (Topology::epoch: the topology version
// that appointed that primary; one primary per epoch) and the epoch of the update before it on that
// primary. A backup appends an update only right after one of that previous epoch, so two replicas
// that hold an update of the same (epoch, seq) hold the same updates up to it (Raft's log matching,
// with epochs for terms). Hence:
//   - an update of an older epoch than the backup's last one, or than the epoch its topology gives
//     the partition, comes from a deposed primary: refused, never acknowledged;
//   - an update at or below the backup's seq from the epoch of its last update: already applied;
//   - the next update after one of the backup's last epoch: applied;
//   - anything else (a gap, or the backup holds an update a deposed primary made at that seq,
//     which the current primary never had): the backup must take a snapshot.
#pragma once

#include <cstdint>

namespace ingrid {

enum class UpdateVerdict : std::uint8_t {
  kApply,      // the next update: apply it, acknowledge
  kDuplicate,  // already applied (a retry, or covered by a snapshot): acknowledge only
  kStale,      // from a deposed primary: refuse (not_owner), never acknowledge
  kResync,     // a gap or a different history: refuse (unavailable) and wait for a snapshot
};

// `seq` and `lastEpoch`: the last update the backup applied; `partitionEpoch`: the epoch of the
// partition's primary in the backup's topology; then the update's own seq, epoch and prevEpoch.
constexpr UpdateVerdict judgeUpdate(std::uint64_t seq, std::uint64_t lastEpoch,
                                    std::uint64_t partitionEpoch, std::uint64_t updateSeq,
                                    std::uint64_t epoch, std::uint64_t prevEpoch) noexcept {
  if (epoch < lastEpoch || epoch < partitionEpoch) return UpdateVerdict::kStale;
  if (updateSeq <= seq && epoch == lastEpoch) return UpdateVerdict::kDuplicate;
  if (updateSeq == seq + 1 && prevEpoch == lastEpoch) return UpdateVerdict::kApply;
  return UpdateVerdict::kResync;
}

}  // namespace ingrid
