// Backend: what a test cluster's network does (testing/README.md): where node i lives, how its
// process starts and stops, how time passes, and how a link or a node is cut off. Cluster::Impl
// (cluster.cpp) holds the checks and bookkeeping both networks share and calls one of these:
// SimulatedBackend (simulated_backend.cpp) or LoopbackBackend (loopback_backend.cpp).
//
// Thread safety: the test's thread only, as the Cluster.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <ingrid/node.h>
#include <ingrid/node_options.h>
#include <ingrid/probe.h>
#include <ingrid/processors/registry.h>
#include <ingrid/result.h>
#include <ingrid/testing/cluster.h>

namespace ingrid {
class FrameFaults;
}

namespace ingrid::testing {

class Backend {
 public:
  using Duration = std::chrono::nanoseconds;
  using NodeProbe = std::function<Probe(Node&)>;

  virtual ~Backend() = default;

  // The host node i lives on ("10.0.0.3", "127.0.0.4"): its IP in FrameFaults rules.
  virtual std::string host(std::size_t i) const = 0;
  // The address node i's next process listens on: its former one after a first start.
  virtual std::string listenAddress(std::size_t i) const = 0;
  // Sets what this network needs in `options` (a simulated clock, no shard ports).
  virtual void prepare(std::size_t i, NodeOptions& options) = 0;
  // Starts a new process for node i (a stopped one is destroyed first); returns once its start()
  // returned, with its result, or an error after `limit`, or at once while node i's previous
  // start or stop still runs (one that timed out).
  virtual Result<bool> start(std::size_t i, NodeOptions options, const ProcessorRegistry& registry,
                             Duration limit) = 0;
  // Stops node i (crash: no leave) and returns once it has stopped; the node stays, stopped.
  virtual Result<bool> stop(std::size_t i, bool crash) = 0;
  // Node i's current process, or null if it never started.
  virtual Node* node(std::size_t i) = 0;
  virtual const Node* node(std::size_t i) const = 0;

  virtual void pause(std::size_t i) = 0;
  virtual void resume(std::size_t i) = 0;
  // Cuts (heals) the direction from -> to.
  virtual void cut(std::size_t from, std::size_t to) = 0;
  virtual void heal(std::size_t from, std::size_t to) = 0;

  virtual Duration elapsed() const = 0;
  virtual void advance(Duration d) = 0;
  virtual bool runUntil(const std::function<bool()>& done, Duration limit) = 0;
  // Node i's invokeRaw, waited for (at most `limit`).
  virtual Result<std::string> invokeRaw(std::size_t i, std::string key, std::string_view processor,
                                        std::string args, Duration limit) = 0;
  // A blocking call of node i (a probe), where it may block; not ok if it did not return within
  // `limit`.
  virtual Probe probe(std::size_t i, const NodeProbe& ask, Duration limit) = 0;
  virtual std::uint64_t traceHash() const = 0;
  // Whether the network is being run now by a call of the Cluster (simulated: a handler runs
  // inside it, and a call of the Cluster from there would run it again, nested). Loopback: false.
  virtual bool running() const { return false; }
};

// `faults` is the FrameFaults every node's options carry (NodeOptions::frameFaults). The
// simulated backend reports a fatal error of the simulation to options.onFatal.
std::unique_ptr<Backend> makeSimulatedBackend(const ClusterOptions& options,
                                              std::shared_ptr<FrameFaults> faults);
std::unique_ptr<Backend> makeLoopbackBackend(const ClusterOptions& options,
                                             std::shared_ptr<FrameFaults> faults);

}  // namespace ingrid::testing
