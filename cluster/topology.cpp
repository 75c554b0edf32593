#include <ingrid/cluster/topology.h>

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

}  // namespace ingrid
