// LeaseTable: the control plane leader's primary leases. It grants a member its lease once a
// Raft barrier committed after the request proves this member still leads (invariant 13), refuses
// a member that is revoked, removed, another incarnation or behind a topology that moves a primary
// away from it, and knows when each member's last lease has surely expired.
//
// Owned by the Coordinator and living as long as it does (one leadership). Thread: the node's
// network thread only (checked: CoordinatorHost::onNetworkThread). Barrier callbacks it leaves
// with the host do nothing once it is gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <ingrid/result.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/control/coordinator_host.h"

namespace ingrid {

class LeaseTable {
 public:
  using SteadyTime = CoordinatorHost::SteadyTime;

  // `removed(id)`: whether the coordinator declared member `id` failed (such a member gets no
  // lease). Both must outlive this table.
  LeaseTable(CoordinatorHost& host, std::function<bool(MemberId)> removed)
      : host_(host), removed_(std::move(removed)), leaderSince_(host.now()) {}

  // A member asks for its primary lease, having installed topology `version`: see
  // Coordinator::requestLease. Requests are batched: one barrier in flight at a time, proposed
  // at least barrierSpacing() after the previous one; each is judged when it arrives and again
  // once the barrier commits.
  void request(MemberId id, std::uint64_t incarnation, std::uint64_t version,
               UniqueFunction<void(Result<bool>)> reply);
  // No more grants for `id`, ever (in this leadership). False if it was revoked already.
  bool revoke(MemberId id) { return revoked_.insert(id).second; }
  bool revoked(MemberId id) const { return revoked_.count(id) != 0; }
  // `id` is about to lose a primary at `version`: no grant until it has installed it (kept, since
  // versions only grow).
  void raiseFloor(MemberId id, std::uint64_t version);
  // When every lease `id` was granted (by this leader, or by an earlier one) has surely expired:
  // an earlier leader may have granted one until just before this one was elected, so nobody's
  // lease is known expired before this table's creation + CoordinatorHost::leaseWait().
  SteadyTime expiry(MemberId id) const;
  // Runs `then` once this leader has granted a lease to each of `ids`, or after `atMost`,
  // whichever comes first (at once if it has granted all of them already). Not run if this
  // table goes first.
  void whenGranted(const std::vector<MemberId>& ids, std::chrono::milliseconds atMost,
                   UniqueFunction<void()> then);
  // Member `id` failed: no whenGranted waits for it any more (those left with no member run).
  void giveUpOn(MemberId id);

 private:
  struct Ask {
    MemberId id = 0;
    std::uint64_t incarnation = 0;
    std::uint64_t version = 0;
    UniqueFunction<void(Result<bool>)> reply;
  };
  // Why `ask` gets no lease now, or an empty string.
  std::string refusal(const Ask& ask, const Topology& t) const;
  // Keeps `t` among the recent topologies that lease requests are judged against.
  void remember(const TopologyPtr& t);
  void runBarrier();
  // The least time between two barriers' proposals: a thirty-second of the lease wait, at most
  // kMaxBarrierSpacing (a grant waits at most that long more; leases are renewed several times
  // within one).
  std::chrono::milliseconds barrierSpacing() const;
  static constexpr std::chrono::milliseconds kMaxBarrierSpacing{50};
  // How long a barrier waits after the first request of its batch (at most the spacing): members
  // renew on a shared wall-clock grid (cluster/tick_grid.h), so one round's requests arrive within
  // a few milliseconds and one barrier grants them all, where the first request alone (the
  // leader's own) would take a barrier of its own and leave the rest to the next.
  static constexpr std::chrono::milliseconds kGather{5};

  CoordinatorHost& host_;
  const std::function<bool(MemberId)> removed_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);  // barrier callbacks hold a weak one
  const SteadyTime leaderSince_;                          // this table's creation (host_.now())
  std::map<MemberId, SteadyTime> lastGrant_;
  std::set<MemberId> revoked_;  // silent members: no more grants; removed once expired
  // A member about to lose a primary: no grant until it has installed this version.
  std::map<MemberId, std::uint64_t> leaseFloor_;
  // Recent committed topologies by version (the last kSeenTopologies this leader saw).
  static constexpr std::size_t kSeenTopologies = 64;
  std::map<std::uint64_t, TopologyPtr> seen_;
  std::vector<Ask> queue_;
  // whenGranted's: the members still without a grant, and what runs after (shared with the
  // timer that runs it anyway after its wait; emptied when it has run).
  struct Waiter {
    std::set<MemberId> ids;
    std::shared_ptr<UniqueFunction<void()>> then;
  };
  std::vector<Waiter> waiters_;
  // Takes out the waiters whose members all hold a lease, or whose wait ran out; returns what
  // the former run (the caller runs it, this table's state settled first).
  std::vector<std::shared_ptr<UniqueFunction<void()>>> takeDue();
  bool barrierInFlight_ = false;
  bool barrierDue_ = false;   // a runBarrier is scheduled (spacing)
  SteadyTime lastBarrier_{};  // when the latest barrier was proposed
  SteadyTime firstQueued_{};  // when the oldest request in queue_ arrived
};

}  // namespace ingrid
