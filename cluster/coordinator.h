// Coordinator: the oldest member's role. Admits and removes members, numbers each topology, and
// moves partitions without loss (DESIGN invariants 5 and 7).
//
// One membership change at a time, in two topologies:
//   T1 = the current owners of every partition, plus its new owners (by rendezvous over the new
//        member list) as extra backups. Primaries send each new owner a snapshot while
//        replicating every new update to it, and report kSynced when it has everything.
//   T2 = the new owners only, installed once every new owner is synced.
// A member declared failed (silent past the failure timeout) is removed the same way, except that
// T1 already drops it: of each partition it owned, the first complete surviving owner becomes
// the primary, and every other owner resyncs from that primary. A failure during a change
// re-plans the change from the topology installed now (its syncing replicas carried over).
//
// Each topology is installed in two phases: Prepare (members fence the partitions they are about
// to stop being primary of, and drain their in-flight replication), then Commit (members install
// it). So no partition ever has two serving primaries.
//
// Thread safety: network thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include <ingrid/cluster/connection.h>
#include <ingrid/cluster/frame.h>
#include <ingrid/cluster/topology.h>
#include <ingrid/grid/result.h>
#include <ingrid/grid/unique_function.h>

namespace ingrid {

// What the coordinator needs from its node.
class CoordinatorHost {
 public:
  virtual MemberId selfId() const = 0;
  virtual TopologyPtr currentTopology() const = 0;
  // Sends a request to a member (which may not be in the current topology yet, or any more);
  // `done` runs once on the network thread.
  virtual void sendToMember(const MemberInfo& member, MessageType type, std::string body,
                            Connection::ResponseHandler done) = 0;
  // The coordinator's own node takes part in Prepare and Commit like any member.
  virtual void prepareLocally(const Topology& next, UniqueFunction<void()> done) = 0;
  virtual void commitLocally(TopologyPtr next) = 0;
  // A commit round is out (started) or every member has answered it (finished): a coordinator
  // that is leaving must not shut down while its last commit is still in flight.
  virtual void commitRoundStarted() = 0;
  virtual void commitRoundFinished() = 0;

 protected:
  ~CoordinatorHost() = default;
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorHost& host) : host_(host) {}

  // Queues the admission of a node listening at `address`; `reply` gets its member id once the
  // change starts. The same address with the same incarnation is a retried join (the same id
  // again); with another incarnation it is that member restarted: the old member is removed as
  // failed and the node admitted afresh.
  void requestJoin(std::string address, std::uint64_t incarnation,
                   UniqueFunction<void(Result<MemberId>)> reply);
  // Queues the graceful removal of a member.
  void requestLeave(MemberId id);
  // Removes a member that stopped answering, without its help (it may be dead). Idempotent.
  void memberFailed(MemberId id);
  // A primary reports that `member` holds a complete replica of `partition`.
  void onSynced(PartitionId partition, MemberId member, std::uint64_t version);
  // No change running or queued.
  bool idle() const noexcept { return !busy_ && queue_.empty(); }

 private:
  enum class Kind { kJoin, kLeave, kFail, kReplan };
  struct Change {
    Kind kind = Kind::kJoin;
    MemberId id = 0;
    std::string address;
    std::uint64_t incarnation = 0;
    UniqueFunction<void(Result<MemberId>)> reply;
    std::vector<MemberInfo> members;  // kReplan: the member list the interrupted change aimed at
  };

  void pump();
  void run(Change change);
  // Installs T1 (from the current topology towards `after`), then T2 once every new owner is
  // synced.
  void migrate(std::vector<MemberInfo> after, MemberId nextId);
  // T1 is installed: wait for syncs, or re-plan if a member failed meanwhile.
  void migrating();
  void finishMigration();
  void install(TopologyPtr next, UniqueFunction<void()> then);
  void commit(TopologyPtr next, UniqueFunction<void()> then);
  // Every member of the current or the next topology except this node.
  std::vector<MemberInfo> othersIn(const Topology& next) const;

  CoordinatorHost& host_;
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
  bool replan_ = false;        // a member failed during the change in progress
};

}  // namespace ingrid
