// ReplicationMode: when a primary answers, relative to its backups (NodeOptions::replication).
// A header of its own so that the data plane, which reads it, does not depend on NodeOptions.
#pragma once

#include <cstdint>

namespace ingrid {

enum class ReplicationMode : std::uint8_t {
  // The primary answers only after every backup of the partition acknowledged the update. An
  // acknowledged update is held by minInSyncReplicas copies or more; it survives the loss of any
  // `backups` members at once, but not of a member whose partitions are still re-syncing after an
  // earlier failure unless minInSyncReplicas refused the writes of that window
  // (docs/ARCHITECTURE.md, "Durability").
  kSync,
  // Asynchronous backups: the primary answers first and replicates after (the answer leaves
  // before any backup holds the update). Lower latency, but the latest updates are lost if the
  // primary fails before its backups have them, and so is the exactly-once record of their
  // requests: a retry after a failover can run again on the new primary. Exactly-once retries
  // (docs/exactly-once.md) hold only with kSync. Needs minInSyncReplicas 1.
  kAsyncBackups,
  // The former name of kAsyncBackups, which it is: the primary never waits for a backup.
  kPrimarySync [[deprecated("kPrimarySync means asynchronous backups: use kAsyncBackups")]] =
      kAsyncBackups,
};

}  // namespace ingrid
