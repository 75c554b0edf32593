// The heartbeat ring: whom each member watches for failure detection. Members are ordered by id
// in a ring; a member watches (heartbeats, and reports when silent) the `k` that follow it, so
// each member is watched by the `k` that precede it, and idle heartbeats cost O(k) messages per
// member per interval instead of one to every other member. With at most k + 1 members every
// member watches every other one. A pure function of the topology: any thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <ingrid/topology.h>

namespace ingrid {

// How many members each member watches (NodeImpl::heartbeatTick): two, so that a member is still
// watched by another when one of its watchers has died too (and by the leader, through its lease
// requests, always). Clusters of up to three members watch all-to-all. Each watcher costs every
// member a heartbeat and its answer per interval, most of an idle member's cost
// (docs/operations.md, "Failure detection and idle cost").
inline constexpr std::size_t kWatchedPerMember = 2;

// The members `self` watches in `t`, in ring order after `self`: the next `k` ids (wrapping
// around), without `self`. Empty if `self` is not a member.
inline std::vector<MemberId> watchedBy(const Topology& t, MemberId self,
                                       std::size_t k = kWatchedPerMember) {
  std::vector<MemberId> ids;
  ids.reserve(t.members.size());
  for (const MemberInfo& m : t.members) ids.push_back(m.id);
  std::sort(ids.begin(), ids.end());
  const auto at = std::lower_bound(ids.begin(), ids.end(), self);
  if (at == ids.end() || *at != self) return {};
  const std::size_t n = ids.size();
  const std::size_t i = static_cast<std::size_t>(at - ids.begin());
  std::vector<MemberId> watched;
  for (std::size_t step = 1; step < n && watched.size() < k; ++step) {
    watched.push_back(ids[(i + step) % n]);
  }
  return watched;
}

}  // namespace ingrid
