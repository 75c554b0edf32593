// ingrid::testing::Cluster: several embedded nodes in one process, for the tests of a service
// that embeds ingrid, with faults by node and by link. Link with ingrid::testing.
//
// Two networks (ClusterOptions::network):
//   kSimulated: the simulator's in-memory network and simulated time (docs/testing.md). Node i
//     is host 10.0.0.<i+1> of one seeded simulation that runs on the test's thread; nothing of
//     the nodes runs unless the test runs the simulation: advance(), runUntil(), invoke() and
//     every fault below run it, and a minute of failovers takes well under a second. The same
//     seed and the same calls give the same run.
//   kLoopback: real TCP on 127.0.0.<i+2> (ephemeral ports) and real time: the nodes run on their
//     own threads; advance() waits, runUntil() polls until a deadline.
//
// Faults, each in effect when its call returns: crash (stop without leaving), restart (a new
// process at the same address, with its data directory if NodeOptions::dataDir is set), stop
// (graceful leave), pause and resume, cut, cutOneWay, drop, delay, partition, heal. What each
// does in each network: docs/testing.md.
//
// Calls: invoke(i, key, processor) runs a processor through node i and returns its answer (in a
// simulation it runs the simulation until the answer). node(i).invokeAsync(...) starts one
// without waiting; in a simulation its handler runs while the simulation runs (advance(),
// runUntil(), ...), on the test's thread. In a simulation node(i)'s blocking calls (invoke(),
// the probes, the blocking TEST_ calls) refuse, and its stop() and TEST_crash() do nothing but
// log: ask the Cluster (invoke(), clusterSafe(), stop(), crash()).
//
// Handlers: a handler must not outlive what it captures. In a simulation none runs once the
// Cluster's destruction begins (the nodes' pending completions are dropped). On loopback the
// nodes' completion threads may run one until ~Cluster returns: declare what handlers capture
// before the Cluster, or capture it by shared_ptr. A handler the simulation runs must not call a
// member function of the Cluster that runs the simulation (start, advance, runUntil, invoke, the
// faults that wait: crash, stop, restart; waitClusterSafe, clusterSafe, readiness): such a call
// refuses (Errc::would_deadlock, naming the call; advance() does nothing, runUntil() returns
// false, a probe is not ok). Record what the handler learned and act after the call returns.
//
// Errors: a call with bad input (an index out of range, a node that is down, groups that name a
// node twice) returns an Error naming the thing and the reason; node(i) throws
// std::out_of_range for an index out of range (it cannot return a reference to nothing).
//
// Thread safety: one thread, the test's, for every member function but elapsed() (any thread).
// In a simulation, node(i)'s handlers run on that thread too, while a member function of the
// Cluster runs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ingrid/invoke_async.h>
#include <ingrid/node.h>
#include <ingrid/node_options.h>
#include <ingrid/probe.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/registry.h>
#include <ingrid/result.h>

namespace ingrid::testing {

enum class Network {
  kSimulated,  // in-memory network, simulated time, one thread
  kLoopback,   // TCP on 127.0.0.x, real time, the nodes' own threads
};

// The kit's default node options: 64 partitions, 1 backup, 1 worker and 1 completion thread,
// a failure timeout of 3 s (the NodeOptions defaults otherwise).
NodeOptions defaultNodeOptions();

struct ClusterOptions {
  // Nodes start() starts (node 0 bootstraps the cluster, the others join it). At least 1.
  // Default: 3.
  std::size_t nodes = 3;
  // Default: kSimulated.
  Network network = Network::kSimulated;
  // The options every node starts from. The kit sets listenAddress and seeds; it sets
  // frameFaults (its link faults); in a simulation it sets clock (the member's simulated wall
  // clock) and turns shard ports off. Default: defaultNodeOptions().
  NodeOptions node = defaultNodeOptions();
  // Called with each node's index and options before each start of that node (its first and
  // every restart), after `node` was copied and before the kit's settings: a zone, a data
  // directory, a log sink per node. Default: none.
  std::function<void(std::size_t, NodeOptions&)> customize = nullptr;
  // The processors every node registers. Default: the built-ins.
  ProcessorRegistry registry = ProcessorRegistry::withBuiltins();
  // The simulation's seed (Raft's elections, network latencies, frame faults): the same seed
  // and the same calls replay the same run. In loopback mode it seeds only the frame faults'
  // draws. Default: 1.
  std::uint64_t seed = 1;
  // Simulated network: the latency of each write, drawn in [minLatency, maxLatency].
  // Default: 1 ms to 2 ms.
  std::chrono::microseconds minLatency{1000};
  std::chrono::microseconds maxLatency{2000};
  // The longest a node's start (and a restart) may take before it is reported failed, and the
  // longest start() waits for the cluster to be safe; a restarted member is admitted only once
  // its former self's lease expired. Loopback: a node's start is bounded by its own
  // NodeOptions::joinTimeout instead (Node::start cannot be abandoned); the wait for safety by
  // this. Default: 60 s.
  std::chrono::milliseconds startTimeout{60000};
  // Simulated network: called with the reason when the simulation meets a broken contract it
  // cannot go on from (a node that blocks the test's thread, a livelock, a node that never
  // stops), on the thread that met it (the test's or a baton thread, one at a time), just before
  // the process aborts: report it through the test framework (or print it). Installed only if no
  // sink of the simulator is set already (sim::setFatalSink). Default: none; the reason is then
  // kept for lastFatalReason() (a debugger or a core dump shows it) and the process aborts.
  std::function<void(std::string_view)> onFatal = nullptr;
};

// The reason of the last fatal error of a simulation whose ClusterOptions had no onFatal; empty
// if none.
std::string lastFatalReason();

class Cluster {
 public:
  using Duration = std::chrono::nanoseconds;

  // Checks the options (an error from start()); starts nothing.
  explicit Cluster(ClusterOptions options = {});
  // Crashes every node still running (no leave), then destroys them. Simulated: first drops
  // every pending completion unrun, and waits out a start or stop still under way (a timed-out
  // one). Loopback: completion threads may run handlers until it returns.
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Starts the nodes (node 0 first, then the others joining through it) and returns once the
  // cluster is safe (waitClusterSafe), or the first error (a node that did not start, naming it
  // and why; a cluster not safe within startTimeout). Once per Cluster: a second call returns
  // Errc::not_running, as a second Node::start() does.
  Result<bool> start();

  std::size_t size() const noexcept;
  Network network() const noexcept;
  // Node i (0 <= i < size(), after start()): up, or stopped after a crash or stop until its
  // restart (a stopped node refuses calls: Errc::shutting_down). Throws std::out_of_range
  // otherwise. The reference is valid until restart(i) or the Cluster's destruction.
  Node& node(std::size_t i);
  // "host:port" node i listens on (empty before its first start).
  std::string address(std::size_t i) const;
  // Started and neither crashed nor stopped since (a paused node is up).
  bool up(std::size_t i) const noexcept;
  bool paused(std::size_t i) const noexcept;

  // --- time ---
  // Time since the Cluster was made: simulated, or real (the steady clock). Any thread.
  Duration elapsed() const noexcept;
  // Simulated: runs the simulation for `d`. Loopback: waits `d` (a real wait: prefer runUntil).
  void advance(Duration d);
  // Runs (simulated) or polls every millisecond (loopback) until `done()` or `limit` has passed;
  // returns done(). `done` runs on the test's thread, between events.
  bool runUntil(const std::function<bool()>& done, Duration limit);

  // --- calls ---
  // Runs `processor` on `key` through node i (i's own partition or one round trip away) and
  // returns its answer: Errc::timeout if none came within the node's requestTimeout plus 5 s (a
  // paused node's call waits for it). Simulated: runs the simulation until the answer.
  template <EntryProcessor P>
  Result<typename P::Result> invoke(std::size_t i, std::string key, const P& processor) {
    return decodeResult<P>(invokeRaw(i, std::move(key), P::kName, encode(processor)));
  }
  // The erased form: a registered processor's name and its encoded arguments.
  Result<std::string> invokeRaw(std::size_t i, std::string key, std::string_view processor,
                                std::string args);

  // --- faults: each in effect when it returns ---
  // Kills node i's process: no leave, its connections reset (simulated: at once, in flight
  // bytes lost; loopback: closed as its sockets close). The others declare it failed after
  // failureTimeout and its backups take over. A paused node is killed too.
  Result<bool> crash(std::size_t i);
  // Stops node i gracefully: it leaves (its partitions move first), then stops.
  Result<bool> stop(std::size_t i);
  // Starts a new process for node i at its address (after crash or stop), joining through the
  // others; returns once it is a member. With NodeOptions::dataDir it starts with that
  // directory, or with it emptied first if !keepDataDir. Simulated: Errc::unavailable while an
  // earlier start or stop of node i that timed out still runs (advance(), then retry).
  Result<bool> restart(std::size_t i, bool keepDataDir = true);
  // Freezes node i as SIGSTOP would (simulated: nothing of it runs, its events wait, its clock
  // goes on; loopback: every frame to and from it is dropped, its threads and timers still run,
  // see docs/testing.md). Past failureTimeout the others remove it; resumed, it rejoins.
  Result<bool> pause(std::size_t i);
  Result<bool> resume(std::size_t i);
  // Cuts the link between a and b both ways, or from `from` to `to` only (simulated: bytes held
  // as TCP's are across a partition, flowing again on heal; loopback: frames dropped).
  Result<bool> cut(std::size_t a, std::size_t b);
  Result<bool> cutOneWay(std::size_t from, std::size_t to);
  // Drops each frame from `from` to `to` with `probability` (0 < p <= 1); the link stays up.
  Result<bool> drop(std::size_t from, std::size_t to, double probability);
  // Holds each frame from `from` to `to` for `d` (> 0) before it is written.
  Result<bool> delay(std::size_t from, std::size_t to, std::chrono::milliseconds d);
  // Cuts every link between nodes of different groups, both ways. A node in no group is cut
  // from every other; a node named twice, or out of range, is an error.
  Result<bool> partition(const std::vector<std::vector<std::size_t>>& groups);
  // Ends every link fault (cuts, drops, delays, partitions) and resumes every paused node.
  // Crashed or stopped nodes stay down (restart()).
  void heal();

  // --- waiting for health ---
  // Returns once the cluster has healed: every up node running, unpaused, with one topology
  // version that lists exactly the up nodes, no replica syncing, and Node::clusterSafe() true on
  // one of them. Errc::timeout after `limit`, naming what was not yet so.
  Result<bool> waitClusterSafe(Duration limit = std::chrono::seconds(60));
  // Node i's clusterSafe() (simulated: asked on a baton thread while the simulation runs).
  Probe clusterSafe(std::size_t i);
  // Node i's readiness() (idem).
  Probe readiness(std::size_t i);

  // Simulated: a hash of every event so far (time, member, kind): two runs that agree on it ran
  // alike. Loopback: 0.
  std::uint64_t traceHash() const noexcept;
  // One line per node: address, member id, up/paused/down, topology version: for a failure's
  // message.
  std::string describe() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingrid::testing
