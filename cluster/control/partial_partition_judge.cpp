#include "cluster/control/partial_partition_judge.h"

#include <algorithm>

namespace ingrid {

bool PartialPartitionJudge::report(MemberId reporter, const std::vector<MemberId>& unreachable,
                                   SteadyTime now) {
  if (unreachable.empty()) {
    unreachable_.erase(reporter);
    return false;
  }
  Report& r = unreachable_[reporter];
  std::map<MemberId, SteadyTime> since;
  for (MemberId id : unreachable) {
    const auto before = r.since.find(id);
    since.emplace(id, before != r.since.end() ? before->second : now);
  }
  r.since = std::move(since);
  r.at = now;
  return true;
}

std::vector<PartialPartitionJudge::Removal> PartialPartitionJudge::judge(
    const Topology& t, MemberId self, const std::vector<MemberId>& live, SteadyTime now,
    std::chrono::milliseconds freshFor, std::chrono::milliseconds confirmAfter) const {
  auto cut = [&](MemberId a, MemberId b) {
    for (MemberId x : {a, b}) {
      const auto it = unreachable_.find(x);
      if (it == unreachable_.end() || now - it->second.at >= freshFor) continue;
      const auto since = it->second.since.find(x == a ? b : a);
      if (since != it->second.since.end() && now - since->second >= confirmAfter) return true;
    }
    return false;
  };
  std::map<MemberId, std::size_t> cuts;
  for (MemberId a : live) {
    for (MemberId b : live) {
      if (a != b && cut(a, b)) ++cuts[a];
    }
  }
  if (cuts.empty()) return {};
  std::vector<MemberId> order = live;
  std::sort(order.begin(), order.end(), [&](MemberId a, MemberId b) {
    return std::make_pair(cuts[a], a) < std::make_pair(cuts[b], b);
  });
  std::vector<MemberId> keep{self};
  std::vector<MemberId> drop;
  for (MemberId m : order) {
    if (m == self) continue;
    const bool fits = std::none_of(keep.begin(), keep.end(), [&](MemberId k) { return cut(k, m); });
    (fits ? keep : drop).push_back(m);
  }
  std::vector<Removal> out;
  for (MemberId m : drop) {
    // The partitions m holds the only complete replica of would restart empty.
    Removal removal{m, {}};
    for (PartitionId p : t.table.partitionsOf(m)) {
      if (t.syncingReplica(p, m) != nullptr) continue;
      bool another = false;
      for (MemberId o : t.table.owners(p)) {
        // Another complete replica counts only on a member this leader hears now: one that
        // merely has not been declared failed yet may be dead.
        if (o != m && t.syncingReplica(p, o) == nullptr &&
            std::find(drop.begin(), drop.end(), o) == drop.end() &&
            std::find(live.begin(), live.end(), o) != live.end()) {
          another = true;
        }
      }
      if (!another) removal.sole.push_back(p);
    }
    out.push_back(std::move(removal));
  }
  return out;
}

std::set<MemberId> PartialPartitionJudge::named(SteadyTime now,
                                                std::chrono::milliseconds freshFor) const {
  std::set<MemberId> out;
  for (const auto& [reporter, r] : unreachable_) {
    if (now - r.at >= freshFor) continue;
    out.insert(reporter);
    for (const auto& [m, since] : r.since) out.insert(m);
  }
  return out;
}

}  // namespace ingrid
