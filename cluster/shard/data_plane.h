// DataPlane: a member's partitions and what runs on them (internal; the Node assembles it).
//
// It owns the partition workers (their stores and dedup tables), each partition's replica state,
// and the batches of updates bound for each backup. It runs a request on its partition's worker
// (execute), replicates the change to the backups and answers once they acknowledge it; on a
// backup it applies replicated updates and snapshots (handleReplicate, handleSnapshot). Membership
// reaches it only through prepare() (fence the partitions a new topology takes away) and
// install() (a committed topology: drop, promote, send snapshots). What it needs of the rest of the
// node (the topology, links to members, the lease, the control plane) it asks its DataPlaneHost.
//
// Threads: members marked "worker of p" only on partition p's worker; "network thread" only on
// the node's network thread (which runs the transport); the rest from any thread. Replication
// runs on the worker of its partition (a shard per thread): each worker batches its partitions'
// updates per backup link (its Lane) and sends them on links of its own (DataPlaneHost::
// replicaLink), so an update is made, sent, acknowledged and answered on one thread. Each
// partition's updates and snapshots to a backup take one ordered path, fixed by configuration
// (replicatesOnShardPorts): the worker's link to the backup's shard port when both members run
// shard ports, else the network thread's link to the backup (the request goes there, its answer
// comes back to the worker). A path that is down fails the attempt, which is tried again on the
// same path: never on the other one, which is not ordered with it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <ingrid/invoke_async.h>
#include <ingrid/processors/registry.h>
#include <ingrid/replication_mode.h>
#include <ingrid/result.h>
#include <ingrid/string_pool.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

#include "cluster/shard/partition_workers.h"
#include "cluster/shard/request_metrics.h"
#include "cluster/transport/connection.h"
#include "cluster/transport/messages.h"
#include "cluster/transport/peer.h"
#include "cluster/transport/write_round.h"
#include "grid/dedup_table.h"

namespace ingrid {

// Whether a partition's updates and snapshots from a member that runs shard ports (`senderRuns`)
// to member `to` travel on shard ports (both run them); else on the member link. The one path.
inline bool replicatesOnShardPorts(bool senderRuns, const MemberInfo& to) noexcept {
  return senderRuns && !to.shardPorts.empty();
}

// What the data plane asks of the node that embeds it. Any thread unless marked.
class DataPlaneHost {
 public:
  virtual MemberId selfId() const = 0;
  virtual TopologyPtr currentTopology() const = 0;
  // The link to member `id` at `address`, made if needed (network thread).
  virtual std::shared_ptr<Peer> peerFor(MemberId id, const std::string& address) = 0;
  // Whether this member runs shard ports (it lists them in its MemberInfo). Fixed once started.
  virtual bool runsShardPorts() const noexcept = 0;
  // On worker w: w's own link to the shard port of `member` that owns partition p, made if needed
  // (and made anew after a failed dial), which alone carries p's updates and snapshots to it when
  // both members run shard ports; nullptr while there is none (this member has no id, or is
  // stopping): the attempt fails and is tried again.
  virtual std::shared_ptr<Peer> replicaLink(unsigned w, const MemberInfo& member,
                                            PartitionId p) = 0;
  // Whether this member holds a valid primary lease (invariant 13), and for how long one lasts.
  virtual bool primaryLeaseValid() const noexcept = 0;
  virtual std::chrono::milliseconds leaseDuration() const noexcept = 0;
  // A backup named another primary or a newer epoch: fetch its topology (network thread).
  virtual void catchUp(MemberId from, const std::string& address) = 0;
  // Tells the coordinator that `member`'s replica of p is complete as of `version` (network
  // thread).
  virtual void reportSynced(PartitionId p, MemberId member, std::uint64_t version) = 0;
  // Counts an invocation in (stop() waits for the count); returns whether the node runs. Each
  // call is matched by one endInvocation(), whatever it returned.
  virtual bool beginInvocation() noexcept = 0;
  virtual void endInvocation() noexcept = 0;
  // Whether the node has stopped (retries end).
  virtual bool stopped() const noexcept = 0;
  // Random per process start and rejoin: tells this member's snapshots from an earlier self's.
  virtual std::uint64_t incarnation() const noexcept = 0;
  // An attempt to reach member `id` failed (a worker's thread, or the network thread): failure
  // detection watches it closely for a while. Cheap; never blocks.
  virtual void memberUnanswered(MemberId id) = 0;

 protected:
  ~DataPlaneHost() = default;
};

// What the data plane reads of NodeOptions (node_options.h has each field's meaning and default):
// a copy of those fields alone, so that a change to NodeOptions recompiles none of cluster/shard/.
struct DataPlaneOptions {
  std::uint32_t partitions = 0;
  ReplicationMode replication = ReplicationMode::kSync;
  std::uint32_t minInSyncReplicas = 1;
  std::uint32_t minMembers = 0;
  std::chrono::milliseconds requestTimeout{};
  std::chrono::milliseconds dedupWindow{};
  std::chrono::milliseconds heartbeatInterval{};
  std::chrono::milliseconds expirySweepInterval{};
  std::size_t expirySweepEntries = 0;
};

class DataPlane {
 public:
  // `net` is the node's network thread's context; with `partitionsOnNet` the partitions run on
  // that thread too (one thread per node), otherwise on `threads` workers of their own.
  DataPlane(DataPlaneHost& host, const DataPlaneOptions& options, const ProcessorRegistry& registry,
            std::shared_ptr<const Clock> clock, asio::io_context& net, unsigned threads,
            bool partitionsOnNet);
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  void start() { workers_.start(); }
  // Runs every task already posted, then joins the workers. REQUIRES: nothing posts any more (and
  // with partitionsOnNet, the network thread has ended).
  void stop() {
    beginStop();
    workers_.stop();
  }
  // From now on updates and snapshots are not tried again and make no new link (their timers run
  // on the workers). Before the node closes its shard ports. Any thread.
  void beginStop() noexcept { closing_.store(true); }
  // A single member without a network: every partition is a complete replica at once.
  void markAllReady();

  // Runs fn(PartitionStore&) on p's worker.
  template <class F>
  void post(PartitionId p, F&& fn) {
    workers_.post(p, std::forward<F>(fn));
  }
  // Runs fn(PartitionStore&) on p's worker: in place when called there
  // (PartitionWorkers::dispatch).
  template <class F>
  void dispatch(PartitionId p, F&& fn) {
    workers_.dispatch(p, std::forward<F>(fn));
  }

  // On p's worker: run the processor if this node is p's unfenced primary, apply, replicate
  // (within `deadline`). A request with a valid `id` that ran before gets its recorded answer
  // instead (grid/dedup_table.h); one whose deadline passed before it started does not run.
  // `done` gets the encoded result, Errc::not_owner (redirect), Errc::unavailable (fenced, or a
  // copy of a request still replicating) or another error.
  // `processor` is fn's index in the registry (ProcessorRegistry::indexOf): what its metrics
  // are labelled with (RequestMetrics; a copy answered from its dedup record is not counted again).
  void execute(PartitionId p, PartitionStore& store, std::string_view key, ErasedProcessorFn fn,
               std::size_t processor, std::string_view args, const RequestId& id,
               std::chrono::steady_clock::time_point deadline, RawCompletion done);
  // Adds up every worker's request metrics into `into` (sized for this registry). Any thread.
  void addMetrics(RequestMetricsTotal& into) const;

  // The data-plane requests from a connection (network thread).
  void handleInvoke(const std::shared_ptr<Connection>& conn, Frame frame);
  // An Invoke on worker `w`'s shard port (on worker w): run at once if w owns its partition, else
  // forwarded to the worker that does (answered from there, through the connection's thread).
  void handleShardInvoke(unsigned w, const std::shared_ptr<Connection>& conn, Frame frame);
  // The workers, and the io_context each runs (shard ports' transports run on it).
  unsigned workerCount() const noexcept { return workers_.threadCount(); }
  asio::io_context& workerIo(unsigned w) noexcept { return workers_.io(w); }
  void handleReplicate(const std::shared_ptr<Connection>& conn, Frame frame);
  void handleSnapshot(const std::shared_ptr<Connection>& conn, Frame frame);

  // Membership's two calls (network thread). prepare: the topology `next` is about to be
  // committed; fences every partition this member leads in `cur` and not in `next`, and calls
  // `done` once their in-flight replication is acknowledged (or `drainLimit` passed). A fence
  // lifts by itself if no topology at least as new as `next` is installed within `fenceLimit`.
  void prepare(const Topology& cur, const Topology& next, std::chrono::milliseconds drainLimit,
               std::chrono::milliseconds fenceLimit, UniqueFunction<void()> done);
  // install: `next` replaced `cur` here: partitions moved away are dropped, those it now leads
  // serve, and the new replicas it leads get snapshots.
  void install(const TopologyPtr& cur, const TopologyPtr& next);

  // The partitions a write would run on here now: those whose unfenced primary this member is at
  // its topology (servesAsPrimary), while its primary lease is valid. The simulator's checker
  // asks every member after every event. Any thread.
  std::vector<PartitionId> TEST_writablePartitions() const {
    std::vector<PartitionId> writable;
    if (!host_.primaryLeaseValid()) return writable;
    const TopologyPtr topo = topology();
    for (PartitionId p = 0; p < options_.partitions; ++p) {
      if (servesAsPrimary(p, *topo)) writable.push_back(p);
    }
    return writable;
  }
  // For a status report (any thread): whether p is fenced, and whether its replica is complete.
  bool fenced(PartitionId p) const noexcept { return replicas_[p].primary.fenced.load(); }
  // (Primary side) Whether a backup of p lacks an update made here: an attempt to send it one
  // failed, and that backup has since acknowledged no later update (a backup applies in order,
  // so one that acknowledges a later update holds the earlier ones), installed no snapshot taken
  // at or after it, and is still an owner of p. Any thread.
  bool backupBehind(PartitionId p) const noexcept {
    return replicas_[p].primary.laggingCount.load(std::memory_order_relaxed) > 0;
  }
  bool complete(PartitionId p) const noexcept {
    return replicas_[p].mode.load() == ReplicaMode::kReady;
  }
  std::uint64_t reclaimedCount() const noexcept { return workers_.reclaimedCount(); }
  std::uint64_t TEST_entryCount() { return workers_.TEST_entryCount(); }
  PartitionWorkers::Census census(std::chrono::milliseconds wait) { return workers_.census(wait); }
  // Times a replica here missed an update and went to wait for a snapshot. Any thread.
  std::uint64_t resyncs() const noexcept { return resyncs_.load(std::memory_order_relaxed); }
  // Invocations that arrived after their wall-clock deadline (plus the clock skew allowed), and
  // were refused, not run: copies delayed in transit. Any thread.
  std::uint64_t lateRequests() const noexcept {
    return lateRequests_.load(std::memory_order_relaxed);
  }
  // Blocking: ask p's worker (REQUIRES: running).
  std::vector<std::pair<std::string, Entry>> TEST_partitionEntries(PartitionId p);
  std::uint64_t TEST_partitionSeq(PartitionId p);
  std::uint64_t TEST_executed() const noexcept { return executed_.load(); }
  // Writes acknowledged while held by fewer copies than the cluster could hold (backups + 1, at
  // most one per member): after a failure, until the re-sync. Any thread.
  std::uint64_t degradedWrites() const noexcept { return degradedWrites_.load(); }
  std::uint64_t TEST_barriers() const noexcept { return barriers_.load(); }
  std::uint64_t TEST_parkedCopies() const noexcept { return parkedCopies_.load(); }
  // Invocations taken on a shard port: run on the worker that read them, or forwarded to another.
  std::uint64_t TEST_shardRunInPlace() const noexcept { return shardInPlace_.load(); }
  std::uint64_t TEST_shardForwarded() const noexcept { return shardForwarded_.load(); }
  // Replication batches applied on the thread that read them, or handed to the workers.
  std::uint64_t TEST_replicateInPlace() const noexcept { return replicateInPlace_.load(); }
  std::uint64_t TEST_replicateDispatched() const noexcept { return replicateDispatched_.load(); }
  // Snapshots refused for lacking an update acknowledged meanwhile (stageSnapshot).
  std::uint64_t TEST_snapshotsRefused() const noexcept { return snapshotsRefused_.load(); }

 private:
  enum class ReplicaMode : std::uint8_t {
    kEmpty,   // holds nothing authoritative; updates are acknowledged and ignored
    kReady,   // a complete replica: updates apply in seq order
    kResync,  // missed an update: refuses updates until a new snapshot arrives
  };
  // A backup's side of one partition's replica (worker of p): the snapshot it is staging and
  // the updates it acknowledged without holding them.
  struct BackupState {
    // A snapshot arriving in chunks: staged here, and installed whole with its last chunk, so a
    // complete replica that resyncs keeps what it had until the new copy is whole.
    std::uint64_t stagingId = 0;    // 0: none under way
    std::uint32_t stagingNext = 0;  // the index of the chunk it expects next
    std::vector<SnapshotEntry> staging;
    std::vector<SnapshotCompletion> stagingCompletions;
    // (kEmpty) The newest update acknowledged and ignored: a snapshot installed must hold it.
    std::uint64_t ignoredSeq = 0;
    std::uint64_t ignoredEpoch = 0;
    // The epoch of the primary whose snapshot this replica installed last: its state holds all
    // of that primary's acknowledged updates up to (lastEpoch, seq).
    std::uint64_t syncedEpoch = 0;
  };
  // A primary's side of one partition's replica (worker of p, except the atomics): the snapshots
  // it sends, its fence, its replications in flight and the backups that lag.
  struct PrimaryState {
    std::uint64_t snapshotsSent = 0;  // numbers the snapshots it sends
    // The members a snapshot is on its way to (until its last chunk's answer), and those that
    // asked for one meanwhile (a fresh one goes once that one is answered).
    std::vector<MemberId> snapshotsUnderWay;
    std::vector<MemberId> snapshotsWanted;
    // About to lose the partition: refuses invocations. Written on the worker of p; atomic so
    // that a status request (network thread) can read it.
    std::atomic<bool> fenced{false};
    std::uint64_t fencedFor = 0;      // the topology version the fence was set for
    std::atomic<int> outstanding{0};  // replications awaiting acks
    // (worker of p) The backups that lack an update made here, each with the newest update an
    // attempt to send it failed for (backupBehind); its size in laggingCount, which a status
    // request reads on the network thread.
    std::vector<std::pair<MemberId, std::uint64_t>> lagging;
    std::atomic<std::uint32_t> laggingCount{0};
  };
  // Replication state of one partition on this node: its place in the update sequence, and its
  // backup's or primary's side. Worker of p, except the atomics.
  struct Replica {
    std::uint64_t seq = 0;  // updates applied (primary: produced)
    // The epoch (Topology::epoch) of the primary that made update `seq` (0: none yet).
    std::uint64_t lastEpoch = 0;
    // Written on the worker of p; atomic so that a status request (network thread) can read it.
    std::atomic<ReplicaMode> mode{ReplicaMode::kEmpty};
    BackupState backup;
    PrimaryState primary;
  };
  // The backups that lag (data_plane_replicate.cpp).
  // Whether this member is p's primary in the topology installed now (any thread).
  bool stillPrimaryOf(PartitionId p) const;
  // Worker of p: backup `b` lacks update `seq` (an attempt to send it failed).
  void noteLagging(PartitionId p, MemberId b, std::uint64_t seq);
  // Worker of p: backup `b` holds every update up to `seq` (it acknowledged it in order, or
  // installed a snapshot taken then); it lags no more if it lacked none after.
  void noteCaughtUp(PartitionId p, MemberId b, std::uint64_t seq);
  // Worker of p: forgets the lagging backups that `keep` rejects (no longer owners), or all.
  template <class Keep>
  void pruneLagging(PartitionId p, Keep keep) {
    Replica& rep = replicas_[p];
    std::erase_if(rep.primary.lagging, [&](const auto& l) { return !keep(l.first); });
    rep.primary.laggingCount.store(static_cast<std::uint32_t>(rep.primary.lagging.size()),
                                   std::memory_order_relaxed);
  }

  // --- the primary's side: the invoke path (data_plane_invoke.cpp), replication to the backups
  // (data_plane_replicate.cpp) and its group commit (data_plane_group_commit.cpp) ---
  // An Invoke request, checked: its fields in the body, the processor, its partition and deadline.
  struct AdmittedInvoke {
    InvokeRequestSpans spans;
    ErasedProcessorFn fn = nullptr;
    std::size_t processor = 0;  // fn's index in the registry
    PartitionId partition = 0;
    std::chrono::steady_clock::time_point deadline;
  };
  // Decodes and admits an Invoke (counted by beginInvocation); answers a refusal itself and
  // returns nothing then.
  std::optional<AdmittedInvoke> admitInvoke(const std::shared_ptr<Connection>& conn,
                                            const Frame& frame);
  // Posts an admitted Invoke to its partition's worker, which runs it (runInvoke).
  void postInvoke(const std::shared_ptr<Connection>& conn, Frame frame, const AdmittedInvoke& call);
  // Runs an admitted Invoke on its partition's worker and answers it on `conn`; then gives its
  // body back to this thread's StringPool (nothing keeps a view of it).
  void runInvoke(PartitionStore& store, const std::shared_ptr<Connection>& conn,
                 const FrameHeader& header, std::string body, const AdmittedInvoke& call);
  // The steps of execute() (p's worker):
  // Why this member may not run a request on p now (not its primary, or fenced), or nothing.
  std::optional<Error> servingRefusal(PartitionId p, const Topology& topo) const;
  // servingRefusal(p, topo) is nothing: this member has an id, is p's primary at `topo`, and p is
  // not fenced.
  bool servesAsPrimary(PartitionId p, const Topology& topo) const noexcept {
    const MemberId self = memberId();
    return self != 0 && topo.table.primary(p) == self && !replicas_[p].primary.fenced;
  }
  // REQUIRES: id.valid(). Answers a request the dedup table has seen (its answer, parked on its
  // replication, a barrier for an inherited one, or a refusal): true; a new one: false.
  bool answeredBefore(PartitionId p, PartitionStore& store, const TopologyPtr& topo,
                      const RequestId& id, std::chrono::steady_clock::time_point deadline,
                      std::chrono::steady_clock::time_point steadyNow, RawCompletion& done);
  // Numbers a change of p that has no backup to go to, counted degraded if a backup is missing.
  void commitWithoutBackups(PartitionId p, const Topology& topo);
  // p's next update (nextUpdate) for a change to `key`: a put of `stored` or a remove, with the
  // request's id and answer `result` if it has an id. It views its arguments.
  ReplicateUpdateView changeUpdate(PartitionId p, const Topology& topo, std::string_view key,
                                   const std::optional<EntryView>& stored, const RequestId& id,
                                   const Result<std::string>& result);
  // Why this member may not change p now (no valid lease, too few members), or nothing.
  std::optional<Error> writeRefusal(PartitionId p, const Topology& topo) const;
  // Numbers p's next change (p's worker): its sequence number and epoch; returns the epoch of the
  // change before it.
  std::uint64_t advance(PartitionId p, const Topology& topo);
  // The header of p's next replicated update (p's worker): advance(), as an update to send.
  ReplicateUpdateView nextUpdate(PartitionId p, const Topology& topo);
  // A request this primary learnt from a former one (DedupTable::Lookup::kInherited): answers it
  // once a barrier through the backups confirms that each holds its update.
  void confirmInherited(PartitionId p, PartitionStore& store, const TopologyPtr& topo,
                        const RequestId& id, std::string answer,
                        std::chrono::steady_clock::time_point deadline, RawCompletion done);
  // The answer to a request the dedup table has seen (`seen.kind` is not kNew, kAnswered or
  // kInherited).
  static Error dedupAnswer(PartitionId p, const RequestId& id, const DedupTable::Lookup& seen);
  // One replicated update on its way to the backups, and what its caller waits for: one
  // allocation per change, shared by the attempts to each backup until the last one answers.
  // Made on p's worker (makeReplication); afterwards touched only on the network thread, except
  // `outcome`, which the dedup table reads on p's worker.
  struct Replication {
    Replication() = default;
    Replication(const Replication&) = delete;
    Replication& operator=(const Replication&) = delete;
    ~Replication() {
      StringPool::give(std::move(encoded));
      if (result.ok()) StringPool::give(std::move(result.value()));  // (a copy was answered)
    }
    PartitionId partition = 0;
    std::uint64_t seq = 0;
    bool barrier = false;
    // The update as encode(ReplicateUpdateView) wrote it; batches join these (joinReplicateBatch).
    std::string encoded;
    std::size_t pending = 0;  // backups yet to answer
    // Copies that hold the update: the primary's, and each backup that was complete when the
    // update was made and acknowledged it (a new owner before its snapshot acknowledges and drops
    // updates, and a backup a newer topology dropped answers nothing: neither counts).
    std::size_t copies = 1;
    Result<std::string> result{std::string()};  // the caller's answer, once all have answered
    RawCompletion done;
    std::string failures;
    // Shared with the request's dedup record (which must not keep the rest of this alive: the
    // completion holds the caller's connection; copies parked on the outcome hold theirs until it
    // resolves, which the last acknowledgement or the deadline does); null when nothing records
    // the request.
    std::shared_ptr<ReplicationOutcome> outcome;
    // For the metrics, counted when it is answered: the processor that made it (kNoProcessor for
    // a barrier), the answer's verdict and when it started.
    std::size_t processor = kNoProcessor;
    ProcessorVerdict verdict;
    std::chrono::steady_clock::time_point started;
  };
  static constexpr std::size_t kNoProcessor = ~std::size_t{0};
  // Counts a request of `processor` (not kNoProcessor) on the calling worker's lane.
  void countRequest(PartitionId p, std::size_t processor, std::size_t outcome, bool nearLimit,
                    std::chrono::steady_clock::time_point started);
  // `update` encoded (its views are read here, so what they point to may change afterwards).
  static std::shared_ptr<Replication> makeReplication(const ReplicateUpdateView& update);
  // Gives `r` an outcome for a dedup record of its request and returns it (null with kAsyncBackups:
  // nothing to wait for), marked as a barrier's if it is one. Before replicate(r).
  std::shared_ptr<const ReplicationOutcome> trackOutcome(Replication& r) const;
  // Replication (data_plane_replicate.cpp).
  // Sends the update in `r` to every backup of its partition in `topo` (the topology it ran
  // under), trying until `deadline`; `done` gets `result` once every backup acknowledged.
  void replicate(std::shared_ptr<Replication> r, TopologyPtr topo, Result<std::string> result,
                 std::chrono::steady_clock::time_point deadline, RawCompletion done);
  // Why a tracked replication failed, for the copies (and a barrier's caller) asked to come again.
  static std::string replicationFailure(const Replication& r);
  // Sends r's update to backup b, again and again until b acknowledges, stops being an owner of
  // its partition, or `deadline` passes. Worker of r's partition.
  void sendUpdate(MemberId b, std::shared_ptr<Replication> r,
                  std::chrono::steady_clock::time_point deadline, const TopologyPtr& topo,
                  bool first);
  // The steps of sendUpdate's answer (worker of the update's partition):
  // Judges a failed attempt (`e`) to send backup b an update of p made under `made` against the
  // topology installed now: true if it keeps this member p's primary and dropped b (the attempt
  // counts as answered, holding nothing); if it deposed this member, `deadline` becomes now. A
  // backup that names another primary (not_owner) has its topology fetched (catchUp).
  bool judgeFailedAttempt(PartitionId p, MemberId b, const Topology& made, const Error& e,
                          std::chrono::steady_clock::time_point& deadline);
  // Backup b of p asks for a snapshot (or its link is down): sends it one from p's worker, or,
  // with one under way to it, has another follow that one.
  void resyncBackup(PartitionId p, MemberId b);
  // Sends r's update to backup b again (sendUpdate, not first) in 50 ms, judged against `topo`.
  void retryUpdate(MemberId b, const std::shared_ptr<Replication>& r,
                   std::chrono::steady_clock::time_point deadline, const TopologyPtr& topo);
  // Every backup answered r's update: resolves its outcome (and the copies parked on it), and
  // answers its caller.
  void finishReplication(Replication& r, const Topology& topo);
  // Group commit (data_plane_group_commit.cpp): the updates bound for one backup link wait here
  // until the worker has run what is ready (one round, write_round.h), then leave in one
  // kReplicate batch with one acknowledgement.
  struct QueuedUpdate {
    std::shared_ptr<const Replication> update;
    Connection::ResponseHandler arrive;  // gets the backup's verdict on it
    std::uint32_t order = 0;             // its place in the queue (the sort is stable by it)
  };
  struct OutgoingUpdates {
    MemberId member = 0;
    std::shared_ptr<Peer> peer;  // null: through the network thread's link to the member
    std::uint64_t version = 0;   // the newest topology any of them was made under
    std::vector<QueuedUpdate> updates;
    // The latest deadline among them: the batch waits for an answer at most until then.
    std::chrono::steady_clock::time_point latest = std::chrono::steady_clock::time_point::min();
    std::size_t bytes = 0;
    bool flushPosted = false;
  };
  // A worker's replication (worker w's lane, on worker w; with partitions on the network thread
  // the one worker is that thread): its batches, by backup link, and what it keeps for reuse.
  // Batches are keyed by (member, its shard port's index), or (member, kViaNetwork).
  static constexpr std::uint32_t kViaNetwork = ~std::uint32_t{0};
  using LinkKey = std::pair<MemberId, std::uint32_t>;
  struct Lane;
  // Hands each update of a batch sent to b its verdict from b's answer `r`.
  void settleBatch(MemberId b, std::vector<QueuedUpdate>& updates, Result<Frame> r);
  // Adds `update` to the next batch on `key`'s link (`peer`); `arrive` gets b's verdict on it.
  void queueUpdate(Lane& lane, LinkKey key, std::shared_ptr<Peer> peer, std::uint64_t version,
                   std::shared_ptr<const Replication> update,
                   std::chrono::steady_clock::time_point deadline,
                   Connection::ResponseHandler arrive);
  // Sends the updates waiting for `key`'s link as one batch.
  void flushUpdates(Lane& lane, LinkKey key);
  // The path p's updates and snapshots take from p's worker to member `to`: the key of its
  // batches and the worker's own link on it. (to, kViaNetwork) with no link when the network
  // thread's link is p's path to `to`; (to, its shard) with the worker's link to it
  // (DataPlaneHost::replicaLink), or none while it cannot be had (then the attempt fails). In
  // data_plane_replicate.cpp.
  std::pair<std::shared_ptr<Peer>, LinkKey> replicationPath(PartitionId p, const MemberInfo& to);
  // Sends a request to member `to` from worker w on the path `key` names: over `peer`, or, for
  // kViaNetwork, over the network thread's link to `to` (found then in the current topology), with
  // `handler` run back on worker w. A shard path without a link fails it (unreachable). On worker
  // w.
  void requestFrom(unsigned w, LinkKey key, const std::shared_ptr<Peer>& peer, MessageType type,
                   std::uint64_t version, std::string body, std::chrono::milliseconds timeout,
                   Connection::ResponseHandler handler);
  // Runs fn on the network thread: at once when this is it, else posted.
  template <class F>
  void onNetwork(F&& fn) {
    if (onNetworkThread()) {
      fn();
    } else {
      asio::post(net_, std::forward<F>(fn));
    }
  }
  // The lane of the calling thread, or null (the network thread, when the partitions have workers).
  Lane* laneHere() noexcept;

  // --- the backup's side, and migration (data_plane_replica.cpp) ---
  // A kReplicate batch being applied on the workers; the last of its tasks answers.
  struct ApplyBatch {
    std::shared_ptr<Connection> conn;
    FrameHeader header;
    std::string body;  // the frame's body, which `batch` reads in place
    ReplicateBatchIn batch;
    std::vector<std::vector<UpdateRefusal>> refusedBy;  // per worker, written by that worker
    std::atomic<unsigned> tasksLeft{0};
  };
  // On p's worker: applies update u (of partition p) from `conn` to p's replica. An error if the
  // replica refuses it, and then nothing changed.
  Error applyUpdate(const Connection& conn, PartitionStore& store, const Topology& topo,
                    const ReplicateUpdateView& u);
  // On the worker of s.partition: stages a snapshot chunk `s` from `conn` (its entries moved
  // out), installing the snapshot whole with its last chunk, and answers it.
  void stageSnapshot(PartitionStore& store, const std::shared_ptr<Connection>& conn,
                     const FrameHeader& header, SnapshotBody& s);
  // Whether `conn` comes from p's primary in `t` (and that is not this node).
  bool fromPrimary(const Connection& conn, const Topology& t, PartitionId p) const;
  Error notPrimaryError(const Connection& conn, const Topology& t, PartitionId p) const;
  // On p's worker: sends p's entries and dedup records to member `to` (in chunks), and reports it
  // synced once every chunk is acknowledged; tries again while this member leads p and `to` owns
  // it.
  void sendSnapshot(PartitionId p, PartitionStore& store, MemberId to, std::uint64_t version);

  TopologyPtr topology() const { return host_.currentTopology(); }
  MemberId memberId() const { return host_.selfId(); }
  bool onNetworkThread() const { return net_.get_executor().running_in_this_thread(); }

  struct Lane {
    Lane(asio::io_context& context, unsigned worker, std::size_t processors)
        : io(context), round(WriteRound::of(context)), index(worker), metrics(processors) {
      spareBatches.reserve(kSpareBatches);
    }
    asio::io_context& io;
    WriteRound& round;  // io's: the batches leave at the end of its round
    unsigned index;     // its worker
    absl::flat_hash_map<LinkKey, OutgoingUpdates> outgoing;
    // The arrays of answered batches, emptied and kept for the next batches to fill (several are
    // in flight at once): at most kSpareBatches, the capacity reserved at construction.
    std::vector<std::vector<QueuedUpdate>> spareBatches;
    // The job of the last batch a backup applied in place on this worker (handleReplicate), kept
    // with its array's capacity for the next one.
    std::shared_ptr<ApplyBatch> spareApply;
    RequestMetrics metrics;  // written by this worker only
  };
  static constexpr std::size_t kSpareBatches = 16;

  DataPlaneHost& host_;
  const DataPlaneOptions options_;
  const ProcessorRegistry& registry_;
  std::shared_ptr<const Clock> clock_;
  asio::io_context& net_;
  PartitionWorkers workers_;
  std::unique_ptr<Replica[]> replicas_;
  std::vector<std::unique_ptr<Lane>> lanes_;  // one per worker; lanes_[w] only on worker w
  std::atomic<bool> closing_{false};  // stop() began: updates and snapshots are not tried again
  std::atomic<std::uint64_t> executed_{0};
  std::atomic<std::uint64_t> resyncs_{0};
  std::atomic<std::uint64_t> lateRequests_{0};
  std::atomic<std::uint64_t> degradedWrites_{0};
  std::atomic<std::uint64_t> barriers_{0};      // inherited answers confirmed by a barrier
  std::atomic<std::uint64_t> parkedCopies_{0};  // copies parked on a pending replication
  std::atomic<std::uint64_t> shardInPlace_{0};
  std::atomic<std::uint64_t> shardForwarded_{0};
  std::atomic<std::uint64_t> replicateInPlace_{0};
  std::atomic<std::uint64_t> replicateDispatched_{0};
  std::atomic<std::uint64_t> snapshotsRefused_{0};
};

}  // namespace ingrid
