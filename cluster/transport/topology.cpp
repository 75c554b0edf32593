#include <ingrid/topology.h>

#include <algorithm>
#include <limits>
#include <string>

namespace ingrid {

const MemberInfo* Topology::member(MemberId id) const noexcept {
  for (const auto& m : members) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

std::vector<MemberId> Topology::memberIds() const {
  std::vector<MemberId> ids;
  ids.reserve(members.size());
  for (const auto& m : members) ids.push_back(m.id);
  return ids;
}

PartitionTable Topology::balancedFor(std::uint32_t partitions,
                                     const std::vector<MemberInfo>& members,
                                     std::uint32_t backups) {
  std::vector<MemberId> ids;
  std::vector<std::string> zones;
  ids.reserve(members.size());
  zones.reserve(members.size());
  for (const MemberInfo& m : members) {
    ids.push_back(m.id);
    zones.push_back(m.zone);
  }
  return PartitionTable::balanced(partitions, ids, backups, zones);
}

const SyncingReplica* Topology::syncingReplica(PartitionId p, MemberId m) const noexcept {
  for (const auto& r : syncing) {
    if (r.partition == p && r.member == m) return &r;
  }
  return nullptr;
}

std::uint64_t Topology::primariesChangedAt() const noexcept {
  std::uint64_t newest = 0;
  for (std::uint64_t e : epochs) newest = std::max(newest, e);
  return newest;
}

std::optional<std::string> Topology::invalidReason() const {
  const PartitionId partitions = table.partitionCount();
  if (partitions == 0) return "it has no partitions";
  if (version == std::numeric_limits<std::uint64_t>::max()) {
    return "version 2^64-1 leaves no room for a later one";
  }
  if (backups >= kMaxOwnersPerPartition) {
    return std::to_string(backups) + " backups, more than the limit of " +
           std::to_string(kMaxOwnersPerPartition - 1);
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    const MemberInfo& m = members[i];
    if (m.id == 0) return "member id 0 at position " + std::to_string(i);
    if (i > 0 && members[i - 1].id >= m.id) {
      return "member ids not strictly ascending (" + std::to_string(members[i - 1].id) + " then " +
             std::to_string(m.id) + ")";
    }
    if (m.address.empty()) return "member " + std::to_string(m.id) + " has no address";
  }
  for (PartitionId p = 0; p < partitions; ++p) {
    for (MemberId owner : table.owners(p)) {
      // Members are sorted (checked above): a binary search keeps this O(owners log members).
      const auto it = std::lower_bound(members.begin(), members.end(), owner,
                                       [](const MemberInfo& m, MemberId id) { return m.id < id; });
      if (it == members.end() || it->id != owner) {
        return "partition " + std::to_string(p) + " is owned by member " + std::to_string(owner) +
               ", which is not a member";
      }
    }
  }
  for (const SyncingReplica& r : syncing) {
    if (r.member == 0 || r.partition >= partitions || !table.isOwner(r.partition, r.member)) {
      return "a syncing replica (partition " + std::to_string(r.partition) + ", member " +
             std::to_string(r.member) + ") is not an owner of an existing partition";
    }
  }
  for (PartitionId p = 0; p < epochs.size(); ++p) {
    if (epochs[p] > version) {
      return "partition " + std::to_string(p) + " has epoch " + std::to_string(epochs[p]) +
             ", newer than the version";
    }
  }
  return std::nullopt;
}

std::optional<std::string> successorInvalidReason(const Topology& cur, const Topology& next) {
  if (next.table.partitionCount() != cur.table.partitionCount()) {
    return "topology v" + std::to_string(next.version) + " has " +
           std::to_string(next.table.partitionCount()) + " partitions, the cluster has " +
           std::to_string(cur.table.partitionCount());
  }
  if (next.version <= cur.version) {
    return "topology v" + std::to_string(next.version) + " is not newer than v" +
           std::to_string(cur.version);
  }
  if (next.term < cur.term) {
    return "topology v" + std::to_string(next.version) + " has term " + std::to_string(next.term) +
           ", older than term " + std::to_string(cur.term) + " of v" + std::to_string(cur.version);
  }
  return std::nullopt;
}

void Topology::stampEpochs(const Topology* prev) {
  const PartitionId partitions = table.partitionCount();
  epochs.assign(partitions, version);
  if (prev == nullptr || prev->table.partitionCount() != partitions) return;
  for (PartitionId p = 0; p < partitions; ++p) {
    if (table.primary(p) == prev->table.primary(p)) epochs[p] = prev->epoch(p);
  }
}

}  // namespace ingrid
