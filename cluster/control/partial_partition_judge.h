// PartialPartitionJudge: the control plane leader's judgement of partial partitions. From the
// members' reachability reports (sent with their lease requests) it decides which members to
// remove so that the leader keeps the largest group of members that all reach each other and
// the leader: a primary never waits forever on a backup it cannot reach.
//
// It keeps the reports and decides; the Coordinator that owns it acts (logs, removes). Thread:
// its owner's (the node's network thread); not thread-safe. A pure function of its reports and
// the arguments: time is a parameter.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <ingrid/topology.h>

namespace ingrid {

class PartialPartitionJudge {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  // Member `reporter` has not heard from `unreachable` for the failure timeout, as of `now`. An
  // empty list withdraws its report and returns false (nothing to judge); else true. A member
  // listed in the reporter's previous report keeps the time it was first listed; one left out
  // loses it.
  bool report(MemberId reporter, const std::vector<MemberId>& unreachable, SteadyTime now);

  struct Removal {
    MemberId member = 0;
    // The partitions of which `member` holds the only complete replica among the live members
    // kept: if any, removing it would lose acknowledged writes, so it must be kept (the cut link
    // then stays until it heals).
    std::vector<PartitionId> sole;
  };
  // The members of `live` that are cut from the group kept, in the order to act on them. `live`:
  // the members leader `self` hears from, itself included, none declared failed or revoked (one
  // the leader does not hear is judged by its failure detection). The group kept: greedily around
  // the leader, members with fewer cut links first, then smaller ids (exact for one cut link, a
  // bridge, one member cut from several; a heuristic beyond). Reports older than `freshFor` are
  // stale (the reporter went quiet) and ignored. A link counts as cut once its reporter has
  // listed it, report after report, for `confirmAfter`: long enough for the leader to stop
  // hearing a member that died (the leader hears it for a while after its last answer, and may
  // have heard it last later than the reporter did). Without that wait, a member that reported
  // the dead first looked cut from members that looked alive, and was removed in their place.
  std::vector<Removal> judge(const Topology& t, MemberId self, const std::vector<MemberId>& live,
                             SteadyTime now, std::chrono::milliseconds freshFor,
                             std::chrono::milliseconds confirmAfter) const;

  // Every member named in a report not older than `freshFor`, as a reporter or as unreachable:
  // the members a judgement may still remove (a report stays until its reporter sends a clean
  // one, which it does once it hears the others again).
  std::set<MemberId> named(SteadyTime now, std::chrono::milliseconds freshFor) const;

 private:
  struct Report {
    std::map<MemberId, SteadyTime> since;  // whom it cannot reach, each since its first listing
    SteadyTime at;                         // when it last reported
  };
  // The latest report of each member.
  std::map<MemberId, Report> unreachable_;
};

}  // namespace ingrid
