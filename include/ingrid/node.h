// Node: an embedded ingrid node. Runs entry processors atomically on the partitions it owns.
//
// A Node is created with NodeOptions and a ProcessorRegistry, started once, used, and stopped
// once. invokeAsync() sends an entry processor to the key's partition, runs it there (one task
// after another per partition, invariant 1) and completes with Result<P::Result>.
//
// Completions never run on a partition worker (invariant 9): a handler runs on its associated
// executor (Asio's rule) or, if it has none, on the node's completion threads.
//
// In a simulation (constructed inside a simulated member's scope, as the test kit
// include/ingrid/testing/cluster.h does): the node starts no thread. Completions run on an
// io_context the simulator polls on its own thread, in the member's scope; invokeRaw() and
// invokeAsync() may be called from the simulator's thread (they enter the member's scope
// themselves). start(), stop(), TEST_crash(), the probes and metricsText() block, and run only
// where the simulator lets a thread block (its baton threads: the test kit's Cluster runs them
// so); on the simulator's thread start() refuses (Errc::would_deadlock), a probe is not ok
// (naming the reason), metricsText() is empty, and stop() and TEST_crash() do nothing but log an
// error line (use Cluster::stop() and Cluster::crash()). invoke() and the blocking TEST_ calls
// wait in a way the simulator cannot run, so they refuse on every thread (invoke:
// Errc::would_deadlock, naming Cluster::invoke; the TEST_ calls: see each). stop()'s remaining
// completions run at the simulator's next poll.
//
// Thread safety: invoke(), invokeAsync() and the const members are safe from any thread,
// concurrently. start() and stop() must not race each other. invoke() blocks and refuses to run
// on a partition worker thread (Errc::would_deadlock). In a simulation there is one thread at a
// time, the simulator's or a baton thread it hands control to: call the node only from those.
//
// Start/stop sequence:
//   start(): validate options -> start partition workers (each binds its partitions and begins
//            expiry sweeps) -> listen -> bootstrap a cluster, or join one through the seeds ->
//            admit invocations, and send heartbeats to the other members.
//   stop():  leave the cluster (the coordinator moves this member's partitions to the others
//            while it keeps serving) -> refuse new invocations (Errc::shutting_down) -> wait
//            until every admitted invocation has completed -> stop heartbeats, close peers and
//            the listener, join the network thread -> stop sweeps and join the workers -> run
//            the remaining completions and join the completion threads. The destructor calls
//            stop(). A member that dies without stop() is declared failed by the others after
//            NodeOptions::failureTimeout, and its backups take over.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>
#include <asio/thread_pool.hpp>

#include <ingrid/invoke_async.h>
#include <ingrid/node_options.h>
#include <ingrid/probe.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/registry.h>
#include <ingrid/result.h>
#include <ingrid/topology.h>
#include <ingrid/unique_function.h>

namespace ingrid {

class NodeImpl;
class SimulatedMember;  // cluster/transport/runtime.h (internal): the simulator's seam

class Node {
  // Defined before the templates below use it: its return type is deduced, and clang deduces it
  // where a template names it.
  auto rawInvoker() {
    return [this](std::string k, std::string_view name, std::string args, RawCompletion done) {
      invokeRaw(std::move(k), name, std::move(args), std::move(done));
    };
  }

 public:
  explicit Node(NodeOptions options = {},
                ProcessorRegistry registry = ProcessorRegistry::withBuiltins());
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();

  // Starts the node: with no listenAddress, a single member with no network; with one and no
  // seeds, a new cluster; with seeds, joins the cluster through them (start() returns once this
  // node is a member). Errors: invalid_configuration, join_refused (naming the difference),
  // unreachable (naming the seeds tried), not_running (a Node is started once).
  Result<bool> start();
  // Leaves the cluster gracefully (this member's partitions move first, within leaveTimeout),
  // then stops; see the sequence above. Idempotent. Not from a completion handler. In a
  // simulation, on the simulator's thread, a running node is left running and the refusal logged
  // (Cluster::stop() stops it on a baton thread).
  void stop();

  // Runs `processor` on `key`'s entry, on the key's primary (here, or one round trip away) and
  // completes with Result<P::Result>. CompletionToken is any Asio completion token with
  // signature void(Result<P::Result>): a callback, asio::use_future, asio::use_awaitable, ...
  template <EntryProcessor P, class CompletionToken>
  auto invokeAsync(std::string key, const P& processor, CompletionToken&& token) {
    if (simulatedCompletions_ != nullptr) [[unlikely]] {
      // Simulated: the simulator polls this context until the node is destroyed.
      return asyncInvoke<P>(rawInvoker(), simulatedCompletions_->get_executor(), std::move(key),
                            processor, std::forward<CompletionToken>(token));
    }
    if (completionsClosed_.load(std::memory_order_acquire)) {
      // Stopped: the completion threads are gone; the refusal still completes the token.
      return asyncInvoke<P>(rawInvoker(), asio::system_executor(), std::move(key), processor,
                            std::forward<CompletionToken>(token));
    }
    return asyncInvoke<P>(rawInvoker(), completionPool_->get_executor(), std::move(key), processor,
                          std::forward<CompletionToken>(token));
  }

  // Blocking form of invokeAsync. Refuses (Errc::would_deadlock) on a partition worker thread,
  // and in a simulation on every thread (the test kit's Cluster::invoke runs the simulation
  // until the answer instead).
  template <EntryProcessor P>
  Result<typename P::Result> invoke(std::string key, const P& processor) {
    if (simulated_ != nullptr || onPartitionWorker()) return wouldDeadlock(P::kName);
    return blockingInvoke<P>(rawInvoker(), std::move(key), processor);
  }

  // The erased form: runs the processor registered as `processor` with encoded arguments.
  // `done` runs exactly once, on a partition worker, the network thread, or inline (an immediate
  // error, or the whole call when made on the thread that owns the key's partition); it must not
  // block and must not run user code there, only hand on.
  void invokeRaw(std::string key, std::string_view processor, std::string args, RawCompletion done);

  // The executor of the one thread that runs both this node's partitions and its network
  // (NodeOptions::partitionsOnNetworkThread with a listenAddress), while the node runs: from
  // start()'s success until stop() begins. std::nullopt otherwise (worker threads, no network,
  // not started, stopping). Any thread. For gateways that serve their connections on that thread,
  // so that a call on a local partition involves no thread switch (cluster/resp/resp_server.h):
  // invokeAsync() made there runs such a call in place, and still posts its completion. Code run
  // there runs where the partitions live, which invariant 9 keeps user completions away
  // from: it must not block, must not call invoke() (would_deadlock) or stop(), and must be done
  // before stop() is called (work posted there once stop() has closed the network never runs).
  std::optional<asio::io_context::executor_type> partitionExecutor() const noexcept;

  const NodeOptions& options() const noexcept;
  const ProcessorRegistry& registry() const noexcept;
  bool running() const noexcept;
  // This member's id in the cluster (1 for the first member); 0 before start().
  MemberId memberId() const noexcept;
  // "host:port" this node listens on (after start(); empty without a network).
  std::string listenAddress() const;
  // The topology this node routes by.
  TopologyPtr topology() const;

  // This member's metrics in Prometheus's text exposition format (docs/operations.md lists
  // them). Waits up to about 2 s for the network thread and the workers; not on a worker.
  std::string metricsText();
  // Liveness: the node runs and its event loops (network thread, every worker) turn within 1 s.
  Probe liveness();
  // Readiness: a member with a valid primary lease and every partition it owns installed.
  Probe readiness();
  // Cluster safety: no partition migrating; every member reports every replica it owns complete
  // and no backup behind on a partition it leads; and the control plane's leader has every voter
  // it wants and suspects no member (none it is removing, none unheard, none reported unreachable)
  // (each member asked now, within 1 s). What a rolling restart waits for between two stops.
  Probe clusterSafe();

  // Entries stored on this node (live and expired-not-yet-reclaimed). Blocks; not on a worker.
  // In a simulation: refused, returns 0 and logs an error line naming the call (as do
  // TEST_partitionEntries, empty, and TEST_partitionSeq, 0).
  std::uint64_t TEST_entryCount();
  // Entries reclaimed by expiry sweeps so far.
  std::uint64_t reclaimedCount() const noexcept;
  // Writes this node acknowledged (as primary) while fewer copies held them than the cluster
  // could hold (backups + 1, at most one per member): after a failure, until the re-sync
  // (NodeOptions::minInSyncReplicas). Any thread.
  std::uint64_t degradedWrites() const noexcept;
  // Live entries of partition p held here (as primary or backup), sorted by key. Blocks.
  std::vector<std::pair<std::string, Entry>> TEST_partitionEntries(PartitionId p);
  // Updates of partition p applied here (its replication sequence number). Blocks.
  std::uint64_t TEST_partitionSeq(PartitionId p);
  // Processors executed on this node so far (as primary).
  std::uint64_t TEST_executed() const noexcept;
  // Answers this node, as a promoted primary, confirmed by a barrier through its backups before
  // giving them (requests that ran on a former primary).
  std::uint64_t TEST_barriers() const noexcept;
  // Copies of a request that arrived while its update was replicating, answered when it resolved.
  std::uint64_t TEST_parkedCopies() const noexcept;
  // Invocations taken on this node's shard ports (NodeOptions::shardPorts): run by the worker
  // that read them (first), and forwarded to the worker that owns their partition (second).
  std::pair<std::uint64_t, std::uint64_t> TEST_shardInvocations() const noexcept;
  // Replication batches this node took as a backup: applied on the thread that read them (first;
  // a primary's worker sends them to the backup's worker that owns their partitions), and handed
  // to the workers from another thread (second).
  std::pair<std::uint64_t, std::uint64_t> TEST_replicateBatches() const noexcept;
  // Snapshots this node refused as a new owner because they lacked an update it had acknowledged
  // meanwhile (the update overtook the snapshot; the primary sends a fresh one).
  std::uint64_t TEST_snapshotsRefused() const noexcept;
  // Closes this node's shard ports (listeners and connections, its workers' own links to other
  // members' shard ports among them), as a firewall that cuts them would; the member port keeps
  // serving. For failure tests.
  void TEST_closeShardPorts();
  // Stops like a crash: no leave, no drain; connections just close. For failure tests. In a
  // simulation, on the simulator's thread: refused as stop() is (Cluster::crash() crashes it).
  void TEST_crash();
  // In a simulation: the completions queued or still to come are dropped without running from
  // now on (destroyed with the node), for a harness about to destroy what they capture (the test
  // kit's ~Cluster). No effect otherwise: a completion thread runs each one.
  void TEST_dropCompletions() noexcept;

 private:
  Error wouldDeadlock(std::string_view processor) const;
  // stop() without its refusal on the simulator's thread (the destructor's).
  void stopNow();
  // Whether a blocking call must refuse here (in a simulation, on the simulator's thread, with
  // the node running); logs the refusal of `call` if so.
  bool refuseBlocking(const char* call) const;
  // Logs that `call` refused because it cannot wait in a simulation.
  void logSimulatedRefusal(const char* call) const;
  // Whether the calling thread is a partition worker (of any node); invoke() refuses there.
  static bool onPartitionWorker() noexcept;
  // False in a simulation on a thread that may not block (the simulator's own); true otherwise.
  bool mayBlock() const noexcept;

  std::unique_ptr<NodeImpl> impl_;
  // In a simulation: the member the constructor ran for, and the context it polls in place of
  // completion threads (held busy by a work guard until the destructor). Null otherwise.
  SimulatedMember* simulated_ = nullptr;
  std::unique_ptr<asio::io_context> simulatedCompletions_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> simulatedWork_;
  std::optional<asio::thread_pool> completionPool_;  // empty in a simulation
  // Set by stop() before it joins the pool. Unused in a simulation.
  std::atomic<bool> completionsClosed_{false};
};

}  // namespace ingrid
