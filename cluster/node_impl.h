// NodeImpl: the machinery behind Node (internal header; users include node.h).
//
// NodeImpl assembles a member: the transport, membership, failure detection and leases
// (node_failure.cpp), the control plane (cluster/control/) and the data plane (DataPlane,
// cluster/shard/), which runs the partitions and replication. It routes embedded calls
// (CallRouter) and dispatches each request a connection brings to the part that serves it. Its
// code is cut by job, one file each (cluster/README.md): start and stop (node_lifecycle.cpp),
// joining (node_join.cpp), leaving (node_leave.cpp), the dispatch of requests (node_dispatch.cpp),
// handshakes (node_handshake.cpp), join admission (node_join_admission.cpp), topology install
// (node_topology.cpp), links to members (node_links.cpp), the coordinator's host (CoordinatorRole,
// node_coordinator_host.cpp) and the control plane's host (ControlRole, node_control_host.cpp).
//
// Threads: partition workers (the data plane's), one network thread (transport, peers, the
// coordinator role while this member leads the control plane, the ack collection of
// replication), the control plane's thread (Raft: the committed topology), completion threads
// (owned by Node). Members marked "network thread" are touched only there.
//
// In a simulation (a SimulatedMember installed for the thread that calls start(), runtime.h) the
// node starts no thread: the simulator polls the network's and the control plane's io_contexts
// (adopt), the partitions run on the network's (partitionsOnNetworkThread, so no shard ports), a
// rejoin runs on a baton thread (spawn), and every wait of start(), stop() and the code they call
// hands control to the simulator (SimulatedMember::block). What a simulator calls, each in the
// member's SimulatedMemberScope: the constructor (its timers, incarnation and client id are made
// then); start(), then stop() or crash(), each on a baton thread (they block); the destructor,
// after stop() or crash() returned (it does not block then) and before the SimulatedMember goes.
// It polls the adopted io_contexts in that scope too (the control plane adopts and forgets its
// own from a handler of the network's), and never restarts one that stopped. A simulated node
// needs a listenAddress; NodeOptions::clock (entries' expiry) is the simulator's to give.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include <ingrid/invoke_async.h>
#include <ingrid/node_options.h>
#include <ingrid/probe.h>
#include <ingrid/processors/registry.h>
#include <ingrid/result.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/admission.h"
#include "cluster/control/control_plane.h"
#include "cluster/control/coordinator.h"
#include "cluster/data_dir.h"
#include "cluster/failure_detector.h"
#include "cluster/primary_lease.h"
#include "cluster/shard/data_plane.h"
#include "cluster/tick_grid.h"
#include "cluster/transport/call_router.h"
#include "cluster/transport/logger.h"
#include "cluster/transport/messages.h"
#include "cluster/transport/peer.h"
#include "cluster/transport/runtime.h"
#include "cluster/transport/shard_links.h"
#include "cluster/transport/timer.h"
#include "cluster/transport/topology_watchers.h"
#include "cluster/transport/transport.h"

namespace ingrid {

class NodeImpl final : public ConnectionHandler, private CallRouter::Host, private DataPlaneHost {
 public:
  NodeImpl(NodeOptions options, ProcessorRegistry registry);
  ~NodeImpl() override;

  Result<bool> start();
  void stop();
  // stop() without leaving: what the other members see when this process dies. Blocks as stop()
  // does (in a simulation: a baton thread); a stop() after it returns at once.
  void crash() {
    crashed_.store(true);
    stop();
  }
  void invokeRaw(std::string key, std::string_view processor, std::string args, RawCompletion done);

  const NodeOptions& options() const noexcept { return options_; }
  const ProcessorRegistry& registry() const noexcept { return registry_; }
  bool running() const noexcept { return state_.load(std::memory_order_acquire) == kRunning; }
  // Node::partitionExecutor(): the network thread's executor while running, if it runs the
  // partitions (the data plane's rule in start()).
  std::optional<asio::io_context::executor_type> partitionExecutor() noexcept {
    if (!running() || !options_.partitionsOnNetworkThread || options_.listenAddress.empty()) {
      return std::nullopt;
    }
    return netIo_.get_executor();
  }
  MemberId memberId() const noexcept { return selfId_.load(std::memory_order_acquire); }
  std::string listenAddress() const { return selfAddress_; }
  TopologyPtr topology() const { return topology_.load(); }
  std::uint64_t TEST_entryCount() { return data_ ? data_->TEST_entryCount() : 0; }
  // DataPlane::TEST_writablePartitions while running (none otherwise).
  std::vector<PartitionId> TEST_writablePartitions() const {
    return running() && data_ ? data_->TEST_writablePartitions() : std::vector<PartitionId>{};
  }

  // --- metrics and probes (node_metrics.cpp): any thread but the node's own (in a simulation,
  // a baton thread) ---
  std::string metricsText();
  Probe liveness();
  Probe readiness();
  Probe clusterSafe();
  std::uint64_t reclaimedCount() const noexcept { return data_ ? data_->reclaimedCount() : 0; }
  std::vector<std::pair<std::string, Entry>> TEST_partitionEntries(PartitionId p) {
    return running() ? data_->TEST_partitionEntries(p) : decltype(TEST_partitionEntries(p)){};
  }
  std::uint64_t TEST_partitionSeq(PartitionId p) {
    return running() ? data_->TEST_partitionSeq(p) : 0;
  }
  std::uint64_t TEST_executed() const noexcept { return data_ ? data_->TEST_executed() : 0; }
  std::uint64_t degradedWrites() const noexcept { return data_ ? data_->degradedWrites() : 0; }
  std::uint64_t TEST_barriers() const noexcept { return data_ ? data_->TEST_barriers() : 0; }
  // Closes the shard ports and returns once each worker has closed its own.
  void TEST_closeShardPorts();
  std::pair<std::uint64_t, std::uint64_t> TEST_shardInvocations() const noexcept {
    if (!data_) return {0, 0};
    return {data_->TEST_shardRunInPlace(), data_->TEST_shardForwarded()};
  }
  std::pair<std::uint64_t, std::uint64_t> TEST_replicateBatches() const noexcept {
    if (!data_) return {0, 0};
    return {data_->TEST_replicateInPlace(), data_->TEST_replicateDispatched()};
  }
  std::uint64_t TEST_snapshotsRefused() const noexcept {
    return data_ ? data_->TEST_snapshotsRefused() : 0;
  }
  std::uint64_t TEST_parkedCopies() const noexcept {
    return data_ ? data_->TEST_parkedCopies() : 0;
  }

  // ConnectionHandler (network thread).
  void onRequest(const std::shared_ptr<Connection>& conn, Frame frame) override;
  void onClosed(const std::shared_ptr<Connection>& conn, const Error& reason) override;
  // A request on worker `w`'s shard port (that worker's thread; node_shards.cpp): a
  // Hello, Auth or Invoke, or a member's Replicate or Snapshot; anything else is refused,
  // naming the member port to use.
  void onShardRequest(unsigned w, const std::shared_ptr<Connection>& conn, Frame frame);

 private:
  enum State : int { kCreated, kRunning, kStopping, kStopped };
  // --- the embedded invoke path (node.cpp): admission and routing; the data plane runs it ---
  void finishInvocation() noexcept;
  // CallRouter::Host.
  TopologyPtr routingTopology() const override { return topology(); }
  bool runLocally(RoutedCallPtr& call, MemberId primary) override;
  // A call this member forwards goes to the primary's shard port for its partition (on a link
  // that says Hello as this member), or over the member link.
  std::shared_ptr<Peer> peerForCall(const MemberInfo& primary, PartitionId p) override {
    if (auto link = shardLinks_ ? shardLinks_->forCall(primary, p) : nullptr) return link;
    return peerFor(primary.id, primary.address);
  }
  void learnTopology(const TopologyPtr&) override {}  // members learn only by commit
  void callFinished() noexcept override { finishInvocation(); }

  // DataPlaneHost (selfId, currentTopology and peerFor: below).
  bool beginInvocation() noexcept override {
    // Count first, then check the state: stop() flips the state and then waits for the count.
    inflight_.fetch_add(1, std::memory_order_acq_rel);
    return state_.load(std::memory_order_acquire) == kRunning;
  }
  void endInvocation() noexcept override { finishInvocation(); }
  bool stopped() const noexcept override { return state_.load() == kStopped; }
  bool runsShardPorts() const noexcept override { return !replicaLinks_.empty(); }
  std::shared_ptr<Peer> replicaLink(unsigned w, const MemberInfo& member, PartitionId p) override;
  std::uint64_t incarnation() const noexcept override { return incarnation_.load(); }
  void reportSynced(PartitionId p, MemberId member, std::uint64_t version) override;

  // --- start and stop (node_lifecycle.cpp) ---
  Result<bool> bootstrap();
  // The waits of start(), stop(), join, leave and rejoin, on their thread (never the network
  // thread). Outside a simulation each waits as a thread does: on topoCv_ (under topoMu_; stop()
  // and each installed topology notify it) or on the future; in one (sim_), the simulator runs
  // until it is over (SimulatedMember::block).
  // Until ready() or `deadline`; returns ready(). ready() runs under topoMu_ outside a simulation.
  bool waitUntil(SteadyTime deadline, const std::function<bool()>& ready);
  // Until topoCv_ is notified (a topology installed, stop()) or `deadline`: a pause between polls.
  void pauseUntil(SteadyTime deadline);
  // Until `f` is ready or `deadline`; returns whether it is.
  template <class T>
  bool waitFor(std::future<T>& f, SteadyTime deadline = SteadyTime::max()) {
    if (sim_) {
      return sim_->block(deadline, [&f] {
        return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
      });
    }
    if (deadline == SteadyTime::max()) {
      f.wait();
      return true;
    }
    return f.wait_until(deadline) == std::future_status::ready;
  }
  // A random incarnation: per process start, and anew on a rejoin.
  static std::uint64_t randomIncarnation();

  // --- joining (node_join.cpp) and leaving (node_leave.cpp) ---
  // Joins through `seeds` and options_.seedProvider's candidates; with mayBootstrap (start(), not
  // a rejoin), starts a new cluster instead when NodeOptions::bootstrapExpect's rule holds.
  Result<bool> join(const std::vector<std::string>& seeds, bool mayBootstrap = false);
  // One round's candidates: `seeds`, then the provider's (its error in *providerError), without
  // duplicates and without this node's own address; *discovered gets the provider's alone.
  std::vector<std::string> seedRound(const std::vector<std::string>& seeds,
                                     std::vector<std::string>* discovered,
                                     std::string* providerError) const;
  // This member learned it was removed (paused or cut off past the failure timeout): drop the old
  // identity and join again as a new member without data (on rejoinThread_).
  void rejoin(std::vector<std::string> seeds);
  // Network thread: this member's control plane, coordinator, links (they said Hello as it),
  // failure-detection state and lease go (a rejoin, or a restored identity ending).
  void dropIdentity();
  // Network thread: dropIdentity, and this node is no member (id 0, no restored Raft server); the
  // topology installed now is its committed view (a new Raft server replays the log from its
  // start, and must not take what the old one committed for news).
  void forgetIdentity();
  void leave();

  // --- the dispatch of requests (node_dispatch.cpp) ---
  // Every request frame, on either port, first: admit() (admission.h) decides; refused, the
  // connection is closed or answered an error naming the reason, and false is returned. The
  // thread of the connection.
  bool admitted(const std::shared_ptr<Connection>& conn, const Frame& frame, Port port);
  // Refusals at admission, by verdict (index: Verdict - 1); any thread.
  std::array<std::atomic<std::uint64_t>, kRefusalVerdicts> refusals_{};

  // --- handshakes (node_handshake.cpp) ---
  // A Hello: a client's, or a member's (which, once proven, makes the connection that member's:
  // with `link`, its Peer adopts it as the member link; without, on a shard port, it only carries
  // that member's calls). Any thread with `link` false; the network thread otherwise.
  void handleHello(const std::shared_ptr<Connection>& conn, Frame frame, bool link = true);
  // The dialing member's proof of the cluster secret (member_auth.h): accepted, the connection
  // becomes that member's (adopted as its link with `link`); refused, it is closed with the reason.
  void handleAuth(const std::shared_ptr<Connection>& conn, Frame frame, bool link = true);
  // Why `conn` may not act as a member under TLS (no certificate the CA signed, or a client's:
  // one whose extended key usage does not name serverAuth); nullopt if it may, or without TLS.
  std::optional<std::string> memberCertificateRefusal(const Connection& conn) const;
  // Marks `conn` as member `id`'s (Connection::peerId) and, with `link`, has its Peer adopt it.
  void acceptMember(const std::shared_ptr<Connection>& conn, MemberId id,
                    const std::string& address, bool link);

  // --- join admission (node_join_admission.cpp) ---
  void handleJoin(const std::shared_ptr<Connection>& conn, Frame frame);

  // --- topology install (node_topology.cpp) ---
  // Fences the partitions `next` takes from this member and drains their replication.
  void prepareTopology(const Topology& next, UniqueFunction<void()> done);
  // A Prepare from the control plane's leader: refused from an older term or for a version that
  // is not newer than the installed one.
  void handlePrepare(const std::shared_ptr<Connection>& conn, Frame frame);
  // Installs a committed topology newer than the last one (from this member's control plane, the
  // leader's TopologyCommit, or a member's answer); an older or equal one changes nothing.
  void commitTopology(TopologyPtr next);
  // The control plane's leader sends `t`, which it committed in its term, to every other member:
  // only the voters receive the Raft log. Best effort: a member that misses it fetches it when
  // its lease grant or a heartbeat answer names a newer version (catchUp).
  void announceTopology(const TopologyPtr& t);
  // A TopologyCommit (admitted: from the leader that committed it): installed if newer.
  void handleTopologyCommit(const std::shared_ptr<Connection>& conn, Frame frame);

  // --- links to members (node_links.cpp) ---
  std::shared_ptr<Peer> peerFor(MemberId id, const std::string& address) override;
  // The link to member `id`, made if needed. `dialedByThem`: it just dialed us (its Hello), so
  // it exists even if our topology does not list it yet.
  std::shared_ptr<Peer> linkTo(MemberId id, const std::string& address, bool dialedByThem);
  // The options of a link to member `id`: its Hello as this member, the check of its reply (the
  // process there must be that member, proving the cluster secret if there is one), the Auth.
  PeerOptions memberLinkOptions(MemberId id);
  // The options of a link from this member to a member's shard port: it says Hello as this member.
  PeerOptions shardLinkOptions(MemberId id);
  void syncPeers(const Topology& t);

  // --- metrics and probes (node_metrics.cpp), continued ---
  // What the metrics read on the network thread (gaugesHere), or nothing if it did not answer
  // within a second (gauges, from another thread).
  struct Gauges {
    MemberStatusBody status;
    std::size_t members = 0;
    std::size_t migrationsPending = 0;
    std::map<std::pair<std::string, std::string>, std::size_t> partitions;  // (role, state)
    std::size_t accepted = 0;
    std::size_t memberLinks = 0;
  };
  Gauges gaugesHere() const;
  std::optional<Gauges> gauges();

  // --- shard ports (node_shards.cpp) ---
  // Each worker listens on a port of its own (NodeOptions::shardPorts), with the member port's
  // options `base` and limits shared with it; fills shardPorts_. An Error names the port that
  // could not be opened.
  Result<bool> startShardPorts(const TransportOptions& base);
  // Stops the shard ports' transports (their connections close on their workers), after closing
  // the workers' replica links. Idempotent.
  void stopShardPorts();
  // The links each worker keeps to the members' shard ports for its partitions' replication
  // (replicaLinks_): kept to the members of `t` (on each worker), or all closed.
  void retainReplicaLinks(const TopologyPtr& t);
  void closeReplicaLinks();

  // Starts this member's control plane (network thread; node_control_host.cpp); bootstrap: the
  // first member. With `recovery`: from a recovered topology (kRecover).
  Result<bool> startControl(MemberId self, bool bootstrap,
                            std::optional<ControlRecovery> recovery = std::nullopt);
  // Admitted as member `id` (network thread): ends a restored identity (its control plane, its
  // links), records `id` in the data directory, and starts the control plane as `id`.
  Result<bool> becomeMember(MemberId id);
  // The data directory now belongs to member `id` (its Raft state forgotten); no-op without one.
  Result<bool> claimDataDir(MemberId id);
  // start(): opens the data directory; if it holds a member's Raft state, restores it (network
  // thread: the control plane starts as that member, voting) and returns that member's id.
  Result<MemberId> openDataDir();
  // join(), restored: the committed topology lists only this node's address (the restored member
  // was the whole cluster).
  bool restoredAlone() const;
  // Ends the restored identity and starts a new cluster (bootstrap) instead (caller's thread).
  Result<bool> startAfresh();
  // kRecover (node_recovery.cpp, network thread): restarts the control plane from the recovered
  // topology the operator sent, or answers why not.
  void handleRecover(const std::shared_ptr<Connection>& conn, Frame frame);

  // --- failure detection (node_failure.cpp), network thread ---
  void startHeartbeats();
  void heartbeatTick();
  // A member answered with a newer topology than ours: fetch it and install it.
  void catchUp(MemberId from, const std::string& address) override;
  // Just admitted (network thread): asks the leader at `address` for its topology until one
  // lists this member or `deadline` passes (a watch at a time; a topology the leader sent before
  // this member knew its id reached no link).
  void awaitAdmission(const std::string& address, MemberId admitted,
                      std::chrono::steady_clock::time_point deadline);
  // Asks member `m`, which this one does not dial (the smaller id dials) and has not heard for a
  // failure timeout, for its topology over a connection of this member's own (network thread).
  // A member removed while it was cut off learns so this way, and rejoins: the others no longer
  // dial it. When: FailureDetector::probeDue (at most one per failure timeout per member).
  void probeTopology(const MemberInfo& m);
  // Asks the control plane's leader to renew this member's primary lease (network thread).
  void renewLease();
  // Renews the lease every renewInterval() (network thread) until the node stops.
  void leaseTick();
  // The leader's verdict on silent members (network thread), every judgeInterval() while this
  // member leads.
  void judgeTick();
  // Runs judgeTick after a judge interval (network thread).
  void armJudgeTick();
  // This member has become the leader: the members it has not heard while watching them get a
  // failure timeout to ask it for a lease (network thread).
  void startJudging();
  // A heartbeat answer or lease request from member `id` (network thread).
  void heard(MemberId id) { detector_.heard(id, steadyNow()); }
  // The control plane's leader as this member knows it: Raft's, or else the topology's (which
  // may name this member). 0 if none (network thread).
  MemberId knownLeader(const Topology& t) const;
  // DataPlaneHost and CallRouter::Host: an attempt to reach `id` failed; watched closely for a
  // while (any thread).
  void memberUnanswered(MemberId id) override;
  void handleLease(const std::shared_ptr<Connection>& conn, Frame frame);
  // kStatus: this member's own view (network thread).
  MemberStatusBody ownStatus() const;
  std::chrono::milliseconds leaseDuration() const noexcept override {
    return options_.leaseDuration.count() > 0 ? options_.leaseDuration
                                              : options_.failureTimeout / 2;
  }
  // The control plane's election timeout: NodeOptions::electionTimeout, or by default a fifth of
  // the lease (at least 50 ms), so that a leader's successor is elected (an election starts up to
  // 2 1/2 timeouts after the leader's last heartbeat) while the leases the old one granted run.
  std::chrono::milliseconds electionTimeout() const noexcept {
    return options_.electionTimeout.count() > 0
               ? options_.electionTimeout
               : std::max(std::chrono::milliseconds(50), leaseDuration() / 5);
  }
  // How often this member asks for its lease (cluster/tick_grid.h): at least three times per
  // lease, on the heartbeat's ticks.
  std::chrono::milliseconds renewInterval() const noexcept {
    return renewalInterval(options_.heartbeatInterval, leaseDuration());
  }
  // Whether this member may write as a primary now (PrimaryLease::validAt). Any thread.
  bool primaryLeaseValid() const noexcept override { return lease_.validAt(steadyNow()); }
  // The node's monotonic time: failure detection, the lease and the coordinator read it here.
  static FailureDetector::SteadyTime steadyNow() noexcept { return ingrid::steadyNow(); }
  static FailureDetector::Timing detectorTiming(const NodeOptions& o,
                                                std::chrono::milliseconds leaseDuration) {
    return {o.failureTimeout, o.heartbeatInterval, leaseDuration};
  }

  // DataPlaneHost, continued.
  MemberId selfId() const override { return memberId(); }
  TopologyPtr currentTopology() const override { return topology(); }
  // The topology a new cluster starts with: this member alone (node_coordinator_host.cpp).
  std::shared_ptr<Topology> firstTopology() const;
  // Whether this member heard from member `id` within the last few heartbeats (network thread).
  bool hearsFrom(MemberId id) const { return detector_.hearsFrom(id, steadyNow()); }
  // Runs the detector's discountStall at `now` with this member's cadence: the leader's judge
  // interval, or else the heartbeat interval (network thread).
  void discountStall(FailureDetector::SteadyTime now) {
    detector_.discountStall(
        now, judging_ ? detector_.timing().judgeInterval() : options_.heartbeatInterval);
  }

  // The node's side of the leader's coordinator (node_coordinator_host.cpp): the CoordinatorHost
  // (control/coordinator_host.h) that coordinator_ is given. Network thread; lives as long as the
  // node.
  class CoordinatorRole final : public CoordinatorHost {
   public:
    explicit CoordinatorRole(NodeImpl& node) : node_(node) {}
    MemberId selfId() const override { return node_.memberId(); }
    // The latest committed topology, installed or not (a restored leader's lists it as an
    // earlier incarnation, and installs none until it is a member again).
    TopologyPtr currentTopology() const override { return node_.committed_; }
    bool onNetworkThread() const override;
    void sendToMember(const MemberInfo& member, MessageType type, std::string body,
                      Connection::ResponseHandler done) override;
    void prepareLocally(const Topology& next, UniqueFunction<void()> done) override;
    void proposeTopology(std::shared_ptr<Topology> next,
                         UniqueFunction<void(Result<bool>)> done) override;
    std::uint64_t controlTerm() const override;
    std::shared_ptr<Topology> firstTopology() const override { return node_.firstTopology(); }
    void runAfter(std::chrono::milliseconds delay, UniqueFunction<void()> fn) override;
    void barrier(UniqueFunction<void(Result<bool>)> done) override;
    std::chrono::milliseconds leaseWait() const override;
    SteadyTime now() const override { return node_.steadyNow(); }
    bool hearsFrom(MemberId id) const override { return node_.hearsFrom(id); }
    std::chrono::milliseconds hearingWindow() const override {
      return node_.detector_.timing().hearingWindow();
    }
    std::chrono::milliseconds migrationStallTimeout() const override {
      return node_.options_.migrationStallTimeout;
    }
    std::optional<MemberId> raftServerAt(const std::string& address) const override;
    bool raftConfigurationCommitted() const override {
      return node_.control_ && node_.control_->status().configurationCommitted;
    }
    bool selfRestored() const override { return node_.restored_.load() != 0; }

   private:
    NodeImpl& node_;
  };

  // The control plane's host (node_control_host.cpp): called on the control thread, each call
  // only posts to the network thread, where the NodeImpl members below act on it.
  class ControlRole final : public ControlHost {
   public:
    explicit ControlRole(NodeImpl& node) : node_(node) {}
    void sendControl(MemberId to, const std::string& address, std::string bytes) override;
    void topologyCommitted(TopologyPtr topology) override;
    void leadershipChanged(bool leader, std::uint64_t term) override;
    void leaderLearnt(MemberId leader, std::uint64_t term) override;

   private:
    NodeImpl& node_;
  };
  // Network thread: sends raft bytes to member `to` (best effort); this member became the leader
  // of `term` or stopped leading (the Coordinator's life); `leader` leads now (renew the lease).
  void sendRaft(MemberId to, const std::string& address, std::string bytes);
  void leadershipNews(bool leader, std::uint64_t term);
  void leaderNews(MemberId leader);

  NodeOptions options_;
  ProcessorRegistry registry_;
  std::shared_ptr<const Clock> clock_;
  // NodeOptions::logSink and logLevel; a copy goes to each part that logs.
  Logger log_;
  std::atomic<int> state_{kCreated};
  std::atomic<bool> stopCalled_{false};
  std::atomic<bool> crashed_{false};
  std::atomic<std::int64_t> inflight_{0};
  // This member's primary lease (standalone without a listen address).
  PrimaryLease lease_{options_.listenAddress.empty() ? PrimaryLease::Mode::kStandalone
                                                     : PrimaryLease::Mode::kMember};
  std::atomic<MemberId> selfId_{0};
  std::string selfAddress_;                // constant after start()
  std::vector<std::uint16_t> shardPorts_;  // constant after start(); worker i's at i
  // Random per process start, and anew on a rejoin: tells a restart from a retried join.
  std::atomic<std::uint64_t> incarnation_;
  std::atomic<bool> rejoining_{false};
  // NodeOptions::dataDir, opened and locked by start(); null without one.
  std::unique_ptr<DataDir> dataDir_;
  // The member whose Raft state this process restored from its data directory, while it votes
  // as that member and joins again (becomeMember ends it); 0 otherwise. Until then its topology
  // entry is an earlier incarnation's: nothing is installed in the data plane.
  std::atomic<MemberId> restored_{0};
  // The latest committed topology, installed or not (network thread): the coordinator's view.
  TopologyPtr committed_;
  // Its members' addresses, where a restored process looks for the cluster (join's seeds).
  mutable std::mutex committedMu_;
  std::vector<std::string> committedAddresses_;  // guarded by committedMu_
  // The simulator running this member (runtime.h), as start() found it; null outside a
  // simulation. Constant after start().
  SimulatedMember* sim_ = nullptr;
  std::mutex rejoinMu_;       // guards rejoinThread_ (made on the network thread, joined by stop)
  std::thread rejoinThread_;  // a removed member joining again as a new one
  // In a simulation, the rejoins' baton threads instead (each joined by stop()).
  std::vector<std::unique_ptr<SimulatedMember::Thread>> simRejoins_;
  SharedTopology topology_;

  // Network (absent for a node without a listenAddress).
  asio::io_context netIo_{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> netGuard_;
  std::thread netThread_;
  std::unique_ptr<Transport> transport_;
  // What handles the connections of each shard port (outlives them: destroyed after data_, whose
  // workers' io_contexts hold the last of them).
  class ShardHandler final : public ConnectionHandler {
   public:
    ShardHandler(NodeImpl& node, unsigned worker) : node_(node), worker_(worker) {}
    void onRequest(const std::shared_ptr<Connection>& conn, Frame frame) override {
      node_.onShardRequest(worker_, conn, std::move(frame));
    }
    void onClosed(const std::shared_ptr<Connection>&, const Error&) override {}

   private:
    NodeImpl& node_;
    const unsigned worker_;
  };
  std::vector<std::unique_ptr<ShardHandler>> shardHandlers_;
  // The partitions (made by start(); after netIo_, so destroyed before it).
  std::unique_ptr<DataPlane> data_;
  // The shard ports' transports, each on its worker's io_context (destroyed before data_).
  std::vector<std::unique_ptr<Transport>> shardTransports_;
  // Worker w's links to members' shard ports, made with shardTransports_[w], which carry its
  // partitions' replication (worker w only; destroyed before the transports).
  std::vector<std::unique_ptr<ShardLinks>> replicaLinks_;
  // The member id worker w's replica links said Hello as (worker w only).
  std::vector<MemberId> replicaLinksAs_;
  std::unordered_map<MemberId, std::shared_ptr<Peer>> peers_;  // network thread
  // Links to members that left the topology, kept until their requests' deadline (syncPeers):
  // Raft's answers still reach a departed member that leads the control plane until it hands
  // leadership over (network thread).
  std::unordered_map<MemberId, std::shared_ptr<Peer>> departed_;
  // Links to members' shard ports for the calls this member forwards (made with transport_;
  // network thread).
  std::optional<ShardLinks> shardLinks_;
  CoordinatorRole coordinatorRole_{*this};    // coordinator_'s host: outlives it
  ControlRole controlRole_{*this};            // control_'s host: outlives it
  std::unique_ptr<Coordinator> coordinator_;  // network thread
  std::unique_ptr<ControlPlane> control_;     // made and reset on the network thread
  CallRouter router_{static_cast<CallRouter::Host&>(*this), netIo_};
  // Failure detection (network thread).
  Timer heartbeatTimer_{netIo_};
  Timer leaseTimer_{netIo_};
  Timer judgeTimer_{netIo_};
  bool heartbeatsStopped_ = false;
  // Whom this member hears and watches, and the verdicts on silence (network thread).
  FailureDetector detector_{detectorTiming(options_, leaseDuration())};
  // memberUnanswered's throttle (any thread): when each member was last posted.
  std::mutex suspectMu_;
  std::unordered_map<MemberId, std::chrono::steady_clock::time_point> suspectPostedAt_;
  // Whether judgeTick runs (this member leads; network thread).
  bool judging_ = false;
  bool catchingUp_ = false;
  // Clients' GetTopology watches, answered when a newer topology is installed (network thread).
  TopologyWatchers watchers_{netIo_};

  // Lets start()/stop() wait for topology changes.
  std::mutex topoMu_;
  std::condition_variable topoCv_;
  // How many times topoCv_ was notified (changed under topoMu_): in a simulation, pauseUntil's
  // notification.
  std::atomic<std::uint64_t> topoNotified_{0};
};

}  // namespace ingrid
