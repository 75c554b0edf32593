// NodeImpl: the machinery behind Node (internal header; users include node.h).
//
// Threads: partition workers (own partitions: execute processors, apply replicas, take
// snapshots), one network thread (transport, peers, the coordinator role while this member leads
// the control plane, the ack collection of replication), the control plane's thread (Raft: the
// committed topology, cluster/control/), completion threads (owned by Node). Members marked
// "network thread" are touched only there; members marked "worker of p" only on partition p's
// worker.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include <ingrid/invoke_async.h>
#include <ingrid/node_options.h>
#include <ingrid/processors/registry.h>
#include <ingrid/result.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/control/control_plane.h"
#include "cluster/control/coordinator.h"
#include "cluster/shard/partition_workers.h"
#include "cluster/transport/call_router.h"
#include "cluster/transport/messages.h"
#include "cluster/transport/peer.h"
#include "cluster/transport/transport.h"

namespace ingrid {

class NodeImpl final : public ConnectionHandler,
                       private CoordinatorHost,
                       private CallRouter::Host,
                       private ControlHost {
 public:
  NodeImpl(NodeOptions options, ProcessorRegistry registry);
  ~NodeImpl() override;

  Result<bool> start();
  void stop();
  // stop() without leaving: what the other members see when this process dies.
  void crash() {
    crashed_.store(true);
    stop();
  }
  void invokeRaw(std::string key, std::string_view processor, std::string args, RawCompletion done);

  const NodeOptions& options() const noexcept { return options_; }
  const ProcessorRegistry& registry() const noexcept { return registry_; }
  bool running() const noexcept { return state_.load(std::memory_order_acquire) == kRunning; }
  MemberId memberId() const noexcept { return selfId_.load(std::memory_order_acquire); }
  std::string listenAddress() const { return selfAddress_; }
  TopologyPtr topology() const { return topology_.load(); }
  std::uint64_t TEST_entryCount() { return workers_ ? workers_->TEST_entryCount() : 0; }
  std::uint64_t reclaimedCount() const noexcept {
    return workers_ ? workers_->reclaimedCount() : 0;
  }
  std::vector<std::pair<std::string, Entry>> TEST_partitionEntries(PartitionId p);
  std::uint64_t TEST_partitionSeq(PartitionId p);
  std::uint64_t TEST_executed() const noexcept { return executed_.load(); }
  std::uint64_t TEST_barriers() const noexcept { return barriers_.load(); }
  std::uint64_t TEST_parkedCopies() const noexcept { return parkedCopies_.load(); }

  // ConnectionHandler (network thread).
  void onRequest(const std::shared_ptr<Connection>& conn, Frame frame) override;
  void onClosed(const std::shared_ptr<Connection>& conn, const Error& reason) override;

 private:
  enum State : int { kCreated, kRunning, kStopping, kStopped };
  enum class ReplicaMode : std::uint8_t {
    kEmpty,   // holds nothing authoritative; updates are acknowledged and ignored
    kReady,   // a complete replica: updates apply in seq order
    kResync,  // missed an update: refuses updates until a new snapshot arrives
  };
  // Replication state of one partition on this node. Worker of p, except `outstanding`.
  struct Replica {
    std::uint64_t seq = 0;  // updates applied (primary: produced)
    // The epoch (Topology::epoch) of the primary that made update `seq` (0: none yet).
    std::uint64_t lastEpoch = 0;
    // Written on the worker of p; atomic so that a status request (network thread) can read it.
    std::atomic<ReplicaMode> mode{ReplicaMode::kEmpty};
    // A snapshot arriving in chunks: staged here, and installed whole with its last chunk, so a
    // complete replica that resyncs keeps what it had until the new copy is whole.
    std::uint64_t stagingId = 0;    // 0: none under way
    std::uint32_t stagingNext = 0;  // the index of the chunk it expects next
    std::vector<SnapshotEntry> staging;
    std::vector<SnapshotCompletion> stagingCompletions;
    std::uint64_t snapshotsSent = 0;  // (primary side) numbers the snapshots it sends
    // Primary about to lose the partition: refuses invocations. Written on the worker of p; atomic
    // so that a status request (network thread) can read it.
    std::atomic<bool> fenced{false};
    std::uint64_t fencedFor = 0;      // the topology version the fence was set for
    std::atomic<int> outstanding{0};  // replications awaiting acks (primary side)
  };
  // --- invoke path (node_invoke.cpp) ---
  void finishInvocation() noexcept;
  // CallRouter::Host.
  TopologyPtr routingTopology() const override { return topology(); }
  bool runLocally(RoutedCallPtr& call, MemberId primary) override;
  void learnTopology(const TopologyPtr&) override {}  // members learn only by commit
  void callFinished() noexcept override { finishInvocation(); }
  // On p's worker: run the processor if this node is p's unfenced primary, apply, replicate
  // (within `deadline`). A request with a valid `id` that ran before gets its recorded answer
  // instead (grid/dedup_table.h); one whose deadline passed before it started does not run.
  // `done` gets the encoded result, Errc::not_owner (redirect), Errc::unavailable (fenced, or a
  // copy of a request still replicating) or another error.
  void execute(PartitionId p, PartitionStore& store, std::string_view key, ErasedProcessorFn fn,
               std::string_view args, const RequestId& id,
               std::chrono::steady_clock::time_point deadline, RawCompletion done);
  // Why this member may not change p now (no valid lease, too few members), or nothing.
  std::optional<Error> writeRefusal(PartitionId p, const Topology& topo) const;
  // The header of p's next replicated update (p's worker): the sequence number and epochs.
  std::shared_ptr<ReplicateBody> nextUpdate(PartitionId p, const Topology& topo);
  // A request this primary learnt from a former one (DedupTable::Lookup::kInherited): answers it
  // once a barrier through the backups confirms that each holds its update (issue 9).
  void confirmInherited(PartitionId p, PartitionStore& store, const TopologyPtr& topo,
                        const RequestId& id, std::string answer,
                        std::chrono::steady_clock::time_point deadline, RawCompletion done);
  // The answer to a request the dedup table has seen (`seen.kind` is not kNew, kAnswered or
  // kInherited).
  static Error dedupAnswer(PartitionId p, const RequestId& id, const DedupTable::Lookup& seen);
  // Sends `update` of p to every backup of p in `topo` (the topology it ran under), trying until
  // `deadline`. With `track`, returns the replication's outcome for a dedup record (null in
  // kPrimarySync: nothing to wait for), marked as a barrier's if `update` is one.
  std::shared_ptr<const ReplicationOutcome> replicate(
      PartitionId p, std::shared_ptr<const ReplicateBody> update, TopologyPtr topo,
      Result<std::string> result, std::chrono::steady_clock::time_point deadline,
      RawCompletion done, bool track = false);
  // The acknowledgements one replicated update waits for (network thread); its outcome is read by
  // the dedup table (p's worker).
  struct Acks {
    Acks(std::size_t backups, Result<std::string> r) : pending(backups), result(std::move(r)) {}
    std::size_t pending = 0;
    Result<std::string> result;
    RawCompletion done;
    std::string failures;
    // Shared with the request's dedup record (which must not keep the rest of this alive: the
    // completion holds the caller's connection; copies parked on the outcome hold theirs until it
    // resolves, which the last acknowledgement or the deadline does); null when nothing records
    // the request.
    std::shared_ptr<ReplicationOutcome> outcome;
  };
  // Why a tracked replication failed, for the copies (and a barrier's caller) asked to come again.
  static std::string replicationFailure(PartitionId p, const Acks& acks);
  // Sends `update` of p to backup b, again and again until b acknowledges, stops being an
  // owner of p, or `deadline` passes. Network thread.
  void sendUpdate(PartitionId p, MemberId b, std::shared_ptr<const ReplicateBody> update,
                  std::shared_ptr<Acks> acks, std::chrono::steady_clock::time_point deadline,
                  const TopologyPtr& topo, bool first);
  // Group commit: the updates bound for one backup wait here until the network thread has run
  // what is ready (one pass), then leave in one kReplicate batch with one acknowledgement.
  struct OutgoingUpdates {
    std::shared_ptr<Peer> peer;
    std::uint64_t version = 0;  // the newest topology any of them was made under
    std::vector<std::shared_ptr<const ReplicateBody>> updates;
    std::vector<Connection::ResponseHandler> arrivals;  // one per update
    // The latest deadline among them: the batch waits for an answer at most until then.
    std::chrono::steady_clock::time_point latest = std::chrono::steady_clock::time_point::min();
    std::size_t bytes = 0;
    bool flushPosted = false;
  };
  // Adds `update` to b's next batch; `arrive` gets b's verdict on it. Network thread.
  void queueUpdate(MemberId b, std::shared_ptr<Peer> peer, std::uint64_t version,
                   std::shared_ptr<const ReplicateBody> update,
                   std::chrono::steady_clock::time_point deadline,
                   Connection::ResponseHandler arrive);
  // Sends b's waiting updates as one batch. Network thread.
  void flushUpdates(MemberId b);
  void handleInvoke(const std::shared_ptr<Connection>& conn, Frame frame);

  // --- replicas and migration (node_replica.cpp) ---
  void handleReplicate(const std::shared_ptr<Connection>& conn, Frame frame);
  // A kReplicate batch being applied on the workers; the last of its tasks answers.
  struct ApplyBatch {
    std::shared_ptr<Connection> conn;
    FrameHeader header;
    ReplicateBatch batch;
    std::vector<std::vector<UpdateRefusal>> refusedBy;  // per worker, written by that worker
    std::atomic<unsigned> tasksLeft{0};
  };
  // On p's worker: applies update u (of partition p) from `conn` to p's replica. An error if the
  // replica refuses it, and then nothing changed.
  Error applyUpdate(const Connection& conn, PartitionStore& store, const Topology& topo,
                    const ReplicateBody& u);
  // Whether `conn` comes from p's primary in `t` (and that is not this node).
  bool fromPrimary(const Connection& conn, const Topology& t, PartitionId p) const;
  Error notPrimaryError(const Connection& conn, const Topology& t, PartitionId p) const;
  void handleSnapshot(const std::shared_ptr<Connection>& conn, Frame frame);
  void sendSnapshot(PartitionId p, PartitionStore& store, MemberId to, std::uint64_t version);
  void reportSynced(PartitionId p, MemberId member, std::uint64_t version);

  // --- membership (node_membership.cpp) ---
  Result<bool> bootstrap();
  Result<bool> join(const std::vector<std::string>& seeds);
  // This member learned it was removed (paused or cut off past the failure timeout): drop the old
  // identity and join again as a new member without data (on rejoinThread_).
  void rejoin(std::vector<std::string> seeds);
  void leave();
  void handleHello(const std::shared_ptr<Connection>& conn, Frame frame);
  // The dialing member's proof of the cluster secret (member_auth.h): accepted, the connection
  // becomes that member's link; refused, it is closed with the reason.
  void handleAuth(const std::shared_ptr<Connection>& conn, Frame frame);
  // Refuses a connection accepted past maxConnections that is not a member's (overloaded).
  void refuseOverLimit(const std::shared_ptr<Connection>& conn);
  // Refuses a connection that sent `type` before proving the client secret.
  void refuseUnauthenticatedClient(const std::shared_ptr<Connection>& conn, MessageType type);
  // Makes `conn` member `id`'s link (Connection::peerId, adopted by its Peer).
  void acceptMember(const std::shared_ptr<Connection>& conn, MemberId id,
                    const std::string& address);
  void handleJoin(const std::shared_ptr<Connection>& conn, Frame frame);
  void prepareTopology(const Topology& next, UniqueFunction<void()> done);
  // A Prepare from the control plane's leader: refused from an older term or for a version that
  // is not newer than the installed one.
  void handlePrepare(const std::shared_ptr<Connection>& conn, Frame frame);
  void commitTopology(TopologyPtr next);
  std::shared_ptr<Peer> peerFor(MemberId id, const std::string& address) override;
  // The link to member `id`, made if needed. `dialedByThem`: it just dialed us (its Hello), so
  // it exists even if our topology does not list it yet.
  std::shared_ptr<Peer> linkTo(MemberId id, const std::string& address, bool dialedByThem);
  void syncPeers(const Topology& t);
  bool waitForTopology(std::chrono::milliseconds limit, const std::function<bool()>& pred);

  // Starts this member's control plane (network thread); bootstrap: the first member.
  Result<bool> startControl(MemberId self, bool bootstrap);

  // --- failure detection (node_failure.cpp), network thread ---
  void startHeartbeats();
  void heartbeatTick();
  // A member answered with a newer topology than ours: fetch it and install it.
  void catchUp(MemberId from, const std::string& address);
  // Asks the control plane's leader to renew this member's primary lease (network thread).
  void renewLease();
  void handleLease(const std::shared_ptr<Connection>& conn, Frame frame);
  // kStatus: this member's own view (network thread).
  MemberStatusBody ownStatus() const;
  std::chrono::milliseconds leaseDuration() const noexcept {
    return options_.leaseDuration.count() > 0 ? options_.leaseDuration
                                              : options_.failureTimeout / 2;
  }
  // Whether this member may write now: it has a network (a cluster) and a lease that has not run
  // out. Any thread.
  bool holdsLease() const noexcept {
    return !transport_ || std::chrono::steady_clock::now().time_since_epoch().count() <
                              leaseUntil_.load(std::memory_order_acquire);
  }

  // CoordinatorHost (network thread).
  MemberId selfId() const override { return memberId(); }
  TopologyPtr currentTopology() const override { return topology(); }
  void sendToMember(const MemberInfo& member, MessageType type, std::string body,
                    Connection::ResponseHandler done) override;
  void prepareLocally(const Topology& next, UniqueFunction<void()> done) override;
  void proposeTopology(std::shared_ptr<Topology> next,
                       UniqueFunction<void(Result<bool>)> done) override;
  std::uint64_t controlTerm() const override { return control_ ? control_->term() : 0; }
  std::shared_ptr<Topology> firstTopology() const override;
  void runAfter(std::chrono::milliseconds delay, UniqueFunction<void()> fn) override;
  void barrier(UniqueFunction<void(Result<bool>)> done) override;
  std::chrono::milliseconds leaseWait() const override;
  bool hearsFrom(MemberId id) const override;
  // hearsFrom's window: a member answered within it.
  std::chrono::milliseconds hearingWindow() const;
  // Silence after which a member reports a peer as unreachable to the leader (with its lease
  // requests); always longer than hearingWindow().
  std::chrono::milliseconds unreachableThreshold() const;
  std::chrono::milliseconds migrationStallTimeout() const override {
    return options_.migrationStallTimeout;
  }

  // ControlHost (control thread: each only posts to the network thread).
  void sendControl(MemberId to, const std::string& address, std::string bytes) override;
  void topologyCommitted(TopologyPtr topology) override;
  void leadershipChanged(bool leader, std::uint64_t term) override;

  NodeOptions options_;
  ProcessorRegistry registry_;
  std::shared_ptr<const Clock> clock_;
  std::unique_ptr<PartitionWorkers> workers_;
  std::unique_ptr<Replica[]> replicas_;
  std::atomic<int> state_{kCreated};
  std::atomic<bool> stopCalled_{false};
  std::atomic<bool> crashed_{false};
  std::atomic<std::int64_t> inflight_{0};
  std::atomic<std::uint64_t> executed_{0};
  std::atomic<std::uint64_t> barriers_{0};      // inherited answers confirmed by a barrier
  std::atomic<std::uint64_t> parkedCopies_{0};  // copies parked on a pending replication
  // Until when (steady clock, its ticks) this member holds its primary lease.
  std::atomic<std::int64_t> leaseUntil_{0};
  std::atomic<MemberId> selfId_{0};
  std::string selfAddress_;  // constant after start()
  // Random per process start, and anew on a rejoin: tells a restart from a retried join.
  std::atomic<std::uint64_t> incarnation_;
  std::atomic<bool> rejoining_{false};
  std::mutex rejoinMu_;       // guards rejoinThread_ (made on the network thread, joined by stop)
  std::thread rejoinThread_;  // a removed member joining again as a new one
  SharedTopology topology_;

  // Network (absent for a node without a listenAddress).
  asio::io_context netIo_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> netGuard_;
  std::thread netThread_;
  std::unique_ptr<Transport> transport_;
  std::unordered_map<MemberId, std::shared_ptr<Peer>> peers_;      // network thread
  std::unordered_map<MemberId, OutgoingUpdates> outgoingUpdates_;  // network thread
  std::unique_ptr<Coordinator> coordinator_;                       // network thread
  std::unique_ptr<ControlPlane> control_;  // made and reset on the network thread
  CallRouter router_{static_cast<CallRouter::Host&>(*this), netIo_};
  // Failure detection (network thread).
  asio::steady_timer heartbeatTimer_{netIo_};
  bool heartbeatsStopped_ = false;
  std::unordered_map<MemberId, std::chrono::steady_clock::time_point> lastHeard_;
  bool catchingUp_ = false;

  // Lets start()/stop() wait for topology changes.
  std::mutex topoMu_;
  std::condition_variable topoCv_;
};

}  // namespace ingrid
