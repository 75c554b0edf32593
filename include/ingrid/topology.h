// Topology: a numbered view of the cluster, what every request is routed by.
//
// A topology is immutable once made and shared as std::shared_ptr<const Topology> (STYLE 7):
// the members (by id: ids are never reused), the control plane's leader that committed it and
// its Raft term, and the partition table (for each partition, the primary then its backups; during
// a migration the new owners ride along as extra backups until ownership flips). Versions only
// grow. Thread safety: immutable; safe to share.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cereal/cereal.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include <ingrid/input_bounds.h>
#include <ingrid/partition_table.h>

namespace ingrid {

struct MemberInfo {
  MemberId id = 0;
  std::string address;  // "host:port" the member listens on
  // Random per process start: a join from this address with another incarnation is the member
  // restarted (with nothing), not a retried join.
  std::uint64_t incarnation = 0;
  // The member's shard ports, on the host of `address`: port i is served by the thread that owns
  // the partitions p with p % shardPorts.size() == i (NodeOptions::shardPorts). A thin client
  // sends each invocation to its partition's shard port, so it is read, run and answered on that
  // one thread. Empty: the member has none (its partitions run on its network thread, or it turned
  // them off); everything goes to `address`.
  std::vector<std::uint16_t> shardPorts = {};
  static constexpr std::size_t kMaxShardPorts = 1024;
  // Its failure domain (NodeOptions::zone; empty: none given): a partition's owners, and the
  // voters, are spread over distinct zones wherever possible.
  std::string zone = {};
  static constexpr std::size_t kMaxZoneBytes = 64;
  template <class Archive>
  void save(Archive& ar) const {
    ar(id, address, incarnation, shardPorts, zone);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(id, address, incarnation, shardPorts, zone);
    if (shardPorts.size() > kMaxShardPorts) {
      throw std::length_error("MemberInfo.shardPorts lists " + std::to_string(shardPorts.size()) +
                              " ports, more than " + std::to_string(kMaxShardPorts));
    }
    if (zone.size() > kMaxZoneBytes) {
      throw std::length_error("MemberInfo.zone is " + std::to_string(zone.size()) +
                              " bytes, more than " + std::to_string(kMaxZoneBytes));
    }
  }
  friend bool operator==(const MemberInfo&, const MemberInfo&) = default;
};

// An owner of a partition that does not hold a complete replica yet: its primary is sending it a
// snapshot (started at topology `since`) while replicating every new update to it. It never
// becomes primary while a complete owner remains.
//
// `resync`: the member held a complete replica before this snapshot (its primary failed and it
// resyncs from the new one). Snapshots are staged and installed whole, and a resyncing replica
// refuses every update until then, so it still holds every acknowledged update: if no complete
// owner survives, it may take over.
struct SyncingReplica {
  PartitionId partition = 0;
  MemberId member = 0;
  std::uint64_t since = 0;  // the topology version whose primary started the snapshot
  bool resync = false;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(partition, member, since, resync);
  }
  friend bool operator==(const SyncingReplica&, const SyncingReplica&) = default;
};

struct Topology {
  std::uint64_t version = 0;
  std::vector<MemberInfo> members;  // sorted by id
  PartitionTable table;
  std::uint32_t backups = 1;
  MemberId nextMemberId = 1;            // the id the coordinator gives the next member that joins
  std::vector<SyncingReplica> syncing;  // owners still receiving their snapshot (during a change)
  // The Raft term in which this topology was committed, and the member that led the control
  // plane then (it plans changes: joins, leaves, failures, and receives kSynced reports).
  std::uint64_t term = 0;
  MemberId leader = 0;
  // For each partition, the epoch of its primary: the version of the topology that appointed
  // that primary (kept while the primary stays). Stamped by the control plane's state machine when
  // it commits the topology (stampEpochs), so every member agrees; empty in a topology not yet
  // committed. Each update a primary makes carries its epoch (ReplicateBody): a backup tells an
  // update of the current primary from one of a deposed primary by it.
  std::vector<std::uint64_t> epochs;
  // The exactly-once window (NodeOptions::dedupWindow, the same on every member): how long a
  // partition remembers a request's answer after its client's last request. Clients cap every
  // call's deadline to half of it (docs/exactly-once.md). 0: not published.
  std::uint32_t dedupWindowMs = 0;

  // The member that plans changes: the leader that committed this topology.
  MemberId coordinator() const noexcept { return leader; }
  const MemberInfo* member(MemberId id) const noexcept;
  bool hasMember(MemberId id) const noexcept { return member(id) != nullptr; }
  std::vector<MemberId> memberIds() const;
  // PartitionTable::balanced over `members`, with their zones.
  static PartitionTable balancedFor(std::uint32_t partitions,
                                    const std::vector<MemberInfo>& members, std::uint32_t backups);
  // The entry for (p, m) in `syncing`, or nullptr if m holds a complete replica of p (or none).
  const SyncingReplica* syncingReplica(PartitionId p, MemberId m) const noexcept;
  // The epoch of p's primary; 0 if not stamped.
  std::uint64_t epoch(PartitionId p) const noexcept { return p < epochs.size() ? epochs[p] : 0; }
  // The newest version that appointed any primary (the largest epoch): a member that has not
  // installed it may still believe itself the primary of a partition it lost, so the control
  // plane grants it no primary lease.
  std::uint64_t primariesChangedAt() const noexcept;
  // Sets `epochs` for this topology, committed right after `prev` (nullptr: the first one): a
  // partition keeps its epoch while its primary stays, and gets this version when it changes.
  void stampEpochs(const Topology* prev);

  // nullopt if this topology can be used, else why not: at least one partition, a version below
  // 2^64-1 (which would block every later one), members sorted by distinct ids >= 1 with an
  // address, every owner and syncing replica a listed member of a partition that exists, at
  // most kMaxOwnersPerPartition copies, and no epoch newer than the version. load() runs it, so
  // every decoded topology has passed it (sizes are bounded while decoding).
  std::optional<std::string> invalidReason() const;

  template <class Archive>
  void save(Archive& ar) const {
    ar(version, members, table, backups, nextMemberId, syncing, term, leader, epochs,
       dedupWindowMs);
  }
  template <class Archive>
  void load(Archive& ar);
};

using TopologyPtr = std::shared_ptr<const Topology>;

// nullopt if `next` may replace the installed `cur`, else why not: the same partition count
// (fixed for a cluster's life), a newer version, and a term no older (the control plane commits
// topologies in one log, so both only grow).
std::optional<std::string> successorInvalidReason(const Topology& cur, const Topology& next);

// The current topology of a node or client: replaced by its network thread, read by every
// thread. Each store numbers the pointer it installs (numbers are unique in the process), and each
// thread keeps the pointer it loaded last with its number: a load whose number is still current
// takes that copy, with one atomic read and no lock. Only a load after a store takes the mutex.
// (A mutex rather than std::atomic<std::shared_ptr>: libstdc++ 12's atomic shared_ptr unlocks a
// load with relaxed order, which ThreadSanitizer reports as a race with the next store.)
class SharedTopology {
 public:
  SharedTopology() : generation_(nextGeneration()) {}
  SharedTopology(const SharedTopology&) = delete;
  SharedTopology& operator=(const SharedTopology&) = delete;

  TopologyPtr load() const {
    Cached& cached = cache();
    const std::uint64_t now = generation_.load(std::memory_order_acquire);
    if (cached.generation != now) {
      std::lock_guard lock(mu_);
      cached.ptr = ptr_;
      cached.generation = generation_.load(std::memory_order_relaxed);
    }
    return cached.ptr;
  }
  void store(TopologyPtr next) {
    TopologyPtr old;  // released outside the lock
    std::lock_guard lock(mu_);
    old = std::exchange(ptr_, std::move(next));
    generation_.store(nextGeneration(), std::memory_order_release);
  }

 private:
  // A thread's last load: the pointer, and the number its store gave it (0: none).
  struct Cached {
    std::uint64_t generation = 0;
    TopologyPtr ptr;
  };
  static Cached& cache() noexcept {
    thread_local Cached cached;
    return cached;
  }
  static std::uint64_t nextGeneration() noexcept {
    static std::atomic<std::uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  mutable std::mutex mu_;
  TopologyPtr ptr_;
  std::atomic<std::uint64_t> generation_;
};

// Most members a topology may list; a larger count on the wire is refused before allocating.
inline constexpr std::size_t kMaxMembers = 1024;

template <class Archive>
void Topology::load(Archive& ar) {
  ar(version);
  std::uint64_t count = 0;
  ar(cereal::make_size_tag(count));
  if (count > kMaxMembers) throw std::length_error("topology lists too many members");
  checkRemaining(count, 1, "topology members");
  members.resize(static_cast<std::size_t>(count));
  for (auto& m : members) ar(m);
  ar(table, backups, nextMemberId);
  ar(cereal::make_size_tag(count));
  // At most every backup of every partition can be syncing; a larger count is refused.
  if (count > static_cast<std::uint64_t>(table.partitionCount()) * kMaxMembers) {
    throw std::length_error("topology lists too many syncing replicas");
  }
  checkRemaining(count, 1, "topology syncing replicas");
  syncing.resize(static_cast<std::size_t>(count));
  for (auto& r : syncing) ar(r);
  ar(term, leader);
  ar(cereal::make_size_tag(count));
  if (count != 0 && count != table.partitionCount()) {
    throw std::length_error("topology lists " + std::to_string(count) + " epochs for " +
                            std::to_string(table.partitionCount()) + " partitions");
  }
  checkRemaining(count, 1, "topology epochs");
  epochs.resize(static_cast<std::size_t>(count));
  for (auto& e : epochs) ar(e);
  ar(dedupWindowMs);
  if (auto why = invalidReason()) {
    throw std::invalid_argument("topology v" + std::to_string(version) + " is invalid: " + *why);
  }
}

}  // namespace ingrid
