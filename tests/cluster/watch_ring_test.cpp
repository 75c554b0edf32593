// The heartbeat ring (cluster/watch_ring.h): whom each member watches.
#include "cluster/watch_ring.h"

#include <catch2/catch.hpp>

#include <map>
#include <vector>

using ingrid::MemberId;
using ingrid::Topology;
using ingrid::watchedBy;

namespace {

Topology withMembers(const std::vector<MemberId>& ids) {
  Topology t;
  for (MemberId id : ids) t.members.push_back({id, "127.0.0.1:" + std::to_string(7000 + id)});
  return t;
}

}  // namespace

TEST_CASE("Each member watches the k members after it in id order, wrapping around",
          "[cluster][failure]") {
  // Listed out of order, ids with gaps (removed members' ids are never reused).
  const Topology t = withMembers({9, 2, 5, 14, 3, 11, 7});
  CHECK(watchedBy(t, 2, 3) == std::vector<MemberId>{3, 5, 7});
  CHECK(watchedBy(t, 11, 3) == std::vector<MemberId>{14, 2, 3});
  CHECK(watchedBy(t, 14, 3) == std::vector<MemberId>{2, 3, 5});
  CHECK(watchedBy(t, 4, 3).empty());  // not a member
}

TEST_CASE("Every member is watched by exactly k others, and small clusters watch all-to-all",
          "[cluster][failure]") {
  for (std::size_t n = 1; n <= 12; ++n) {
    std::vector<MemberId> ids;
    for (std::size_t i = 0; i < n; ++i) ids.push_back(static_cast<MemberId>(3 * i + 1));
    const Topology t = withMembers(ids);
    std::map<MemberId, std::size_t> watchers;
    for (MemberId id : ids) {
      const auto w = watchedBy(t, id);
      CHECK(w.size() == std::min<std::size_t>(n - 1, ingrid::kWatchedPerMember));
      for (MemberId x : w) {
        CHECK(x != id);
        ++watchers[x];
      }
    }
    for (MemberId id : ids) {
      INFO("members " << n << ", member " << id);
      CHECK(watchers[id] == std::min<std::size_t>(n - 1, ingrid::kWatchedPerMember));
    }
  }
}
