// Coordinator: the control plane leader's membership changes. It queues joins, leaves and
// failed members and runs them one change at a time: plans it (planMigration, migration_plan.h),
// has every member fence and drain (Prepare), commits each topology through the Raft log, and
// waits for the new owners' syncs. It owns the leader's LeaseTable (lease_table.h) and its
// PartialPartitionJudge (partial_partition_judge.h), which it consults and acts on. It exists on
// the member that leads the control plane (Raft) and only while it does; every topology it plans
// is committed through the Raft log (CoordinatorHost::proposeTopology), so a deposed or paused
// leader can install nothing (invariants 5, 7 and 12).
//
// On election it first commits its takeover topology (the committed one, numbered anew and
// stamped with its term and id), which proves its view is the latest; then it re-plans any change
// its predecessor left unfinished.
//
// One membership change at a time, in two topologies, T1 and T2 (migration_plan.h): T2 is
// installed once every new owner is synced. A member declared failed (silent past the failure
// timeout) is removed the same way, except that T1 already drops it. A failure during a change
// re-plans the change from the topology installed now (its syncing replicas carried over).
//
// Before proposing a topology, the coordinator asks every member to fence the partitions it is
// about to stop being primary of and drain their in-flight replication (kTopologyPrepare, carrying
// the topology with this leader's term; a member refuses one from an older term). A fence is
// released when the topology it was set for (or a newer one) is installed, or after a bound.
// A member that is about to lose a primary gets no lease renewal until it has installed that
// topology (LeaseTable::raiseFloor; and Topology::primariesChangedAt() once committed). If its
// Prepare fails (paused, cut off), the topology is proposed only once its last lease has surely
// expired: so the old primary has stopped writing before the new one starts, whether or not it
// saw the Prepare.
//
// Thread: the node's network thread only (checked: CoordinatorHost::onNetworkThread). Callbacks
// it leaves behind check that it still exists.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ingrid/result.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/control/coordinator_host.h"
#include "cluster/control/lease_table.h"
#include "cluster/control/migration_plan.h"
#include "cluster/control/partial_partition_judge.h"
#include "cluster/transport/connection.h"
#include "cluster/transport/frame.h"
#include "cluster/transport/logger.h"

namespace ingrid {

class Coordinator {
 public:
  // `log`: where the leader's verdicts and stalls are told.
  Coordinator(CoordinatorHost& host, Logger log)
      : host_(host),
        log_(std::move(log)),
        leases_(host, [this](MemberId m) { return failed_.count(m) != 0; }) {}

  // This member was just elected: commit the takeover topology, then finish what the previous
  // leader left (a migration under way). Joins and leaves queue meanwhile.
  void start();

  // Queues the admission of a node listening at `address`; `reply` gets its member id once the
  // change starts. The same address with the same incarnation is a retried join: answered at once
  // with the same id if the committed topology or the change under way lists it, else queued
  // (and then answered with the same id); with another incarnation it is a claim: the member
  // there is removed only once its last lease has surely expired (the joiner is answered
  // unavailable until then, and asks again), and then the node is admitted afresh.
  // `shardPorts` and `zone` go into its topology entry (MemberInfo).
  void requestJoin(std::string address, std::uint64_t incarnation,
                   std::vector<std::uint16_t> shardPorts, std::string zone,
                   UniqueFunction<void(Result<MemberId>)> reply);
  // Queues the graceful removal of a member.
  void requestLeave(MemberId id);
  // Removes a member that stopped answering, without its help (it may be dead). Idempotent. Its
  // lease is revoked at once (no more grants), and the removal (promoting its backups) waits
  // until its last lease has surely expired (invariant 13). With `why`, the first call logs it
  // (the member, why, and how long the removal waits).
  void memberFailed(MemberId id, const char* why = nullptr);
  // A member asks for its primary lease, having installed topology `version`. Granted (reply
  // true) once a barrier committed after the request proves this member still leads, if the asker
  // is a member with that incarnation, not revoked, and has installed every topology that moved a
  // primary away from it; otherwise an Error. Requests are batched: one barrier in flight at a
  // time.
  void requestLease(MemberId id, std::uint64_t incarnation, std::uint64_t version,
                    UniqueFunction<void(Result<bool>)> reply);
  // Member `reporter` has not heard from `unreachable` for the failure timeout (sent with its
  // lease requests). When two members that this leader hears from cannot reach each other, the
  // leader keeps the largest group of members that all reach each other and the leader (ties:
  // the one keeping smaller ids) and removes the others as failed, lease wait included: a primary
  // never waits forever on a backup it cannot reach. A member that holds the only complete replica
  // of a partition is not removed this way (that would lose acknowledged writes): the cut link
  // then stays until it heals, and is logged.
  void reportUnreachable(MemberId reporter, std::vector<MemberId> unreachable);
  // A primary reports that `member` holds a complete replica of `partition`.
  void onSynced(PartitionId partition, MemberId member, std::uint64_t version);
  // No change running or queued.
  bool idle() const noexcept { return !busy_ && queue_.empty(); }
  // The members of the committed topology this leader may be about to remove: declared failed or
  // revoked (a removal waiting for a lease to run out), not heard from within the hearing window,
  // or named in a fresh reachability report (a partial partition being judged). Empty when no
  // removal can follow from what it knows now: what `/cluster-safe` and `ingrid-cli status` wait
  // for, so that a fault is not struck while the last one's removal is still to come.
  std::vector<MemberId> suspects() const;

 private:
  enum class Kind { kJoin, kLeave, kFail, kReplan };
  // Joins admitted together in one change, at most.
  static constexpr std::size_t kMaxJoinsPerChange = 64;
  struct Change {
    Kind kind = Kind::kJoin;
    MemberId id = 0;
    std::string address;
    std::uint64_t incarnation = 0;
    UniqueFunction<void(Result<MemberId>)> reply;
    std::vector<MemberInfo> members;  // kReplan: the member list the interrupted change aimed at
    std::vector<std::uint16_t> shardPorts;  // kJoin: the joiner's
    std::string zone = {};                  // kJoin: the joiner's
  };

  using SteadyTime = CoordinatorHost::SteadyTime;
  void failMember(MemberId id);  // memberFailed, once the lease has run out

  void pump();
  void run(Change change);
  // Installs T1 (from the current topology towards `after`), then T2 once every new owner is
  // synced.
  void migrate(std::vector<MemberInfo> after, MemberId nextId);
  // T1 is installed: wait for syncs, or re-plan if a member failed meanwhile.
  void migrating();
  // While the migration planned as T1 `version` waits for syncs: re-plan it, restarting its
  // snapshots, if no awaited sync finished within the stall timeout.
  void watchStall(std::uint64_t version, std::uint64_t progress);
  void finishMigration();
  // Prepare (fence and drain on every member), then commit `next` through the log, then `then`.
  void install(std::shared_ptr<Topology> next, UniqueFunction<void()> then);
  void propose(std::shared_ptr<Topology> next, UniqueFunction<void()> then);
  // A proposal failed while this member still leads: plan again from what is committed.
  void proposalFailed(const Error& why);
  // Every member of the current or the next topology except this node.
  std::vector<MemberInfo> othersIn(const Topology& next) const;

  CoordinatorHost& host_;
  const Logger log_;
  // Callbacks left with the host (Prepare replies, proposals, timers) hold a weak reference and
  // do nothing once this coordinator is gone (it is destroyed when leadership is lost).
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
  std::deque<Change> queue_;
  bool busy_ = false;
  // The change in progress: T2 to install once every (partition, new owner) pair is synced.
  std::shared_ptr<Topology> target_;
  std::uint64_t t1Version_ = 0;
  // (partition, member) -> the topology version whose snapshot will count.
  std::map<std::pair<PartitionId, MemberId>, std::uint64_t> awaiting_;
  bool syncing_ = false;
  std::set<std::pair<PartitionId, MemberId>> synced_;  // reported complete in this change
  std::set<MemberId> failed_;  // declared failed: never asked anything again
  // Their addresses: a join from one waits until the Raft configuration is committed.
  std::set<std::string> departed_;
  LeaseTable leases_;  // after failed_, which it reads
  PartialPartitionJudge partialPartitions_;
  // A topology held back until the leases of members whose Prepare failed have expired; failing
  // one of them cancels it (the change is planned again without that member).
  struct LeaseWait {
    std::set<MemberId> members;
    std::shared_ptr<bool> cancelled;
  };
  std::optional<LeaseWait> leaseWait_;
  bool replan_ = false;            // a member failed during the change in progress
  std::uint64_t syncsDone_ = 0;    // awaited syncs finished (progress, for the stall watch)
  bool restartSnapshots_ = false;  // the next plan gives every syncing replica a new `since`
};

}  // namespace ingrid
