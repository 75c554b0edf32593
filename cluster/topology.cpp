#include <ingrid/cluster/topology.h>

#include <algorithm>

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

void Topology::stampEpochs(const Topology* prev) {
  const PartitionId partitions = table.partitionCount();
  epochs.assign(partitions, version);
  if (prev == nullptr || prev->table.partitionCount() != partitions) return;
  for (PartitionId p = 0; p < partitions; ++p) {
    if (table.primary(p) == prev->table.primary(p)) epochs[p] = prev->epoch(p);
  }
}

}  // namespace ingrid
