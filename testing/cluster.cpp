// Cluster and Cluster::Impl: the checks and bookkeeping both networks share (indexes, which nodes
// are up or paused, the link faults in force, the nodes' options), over a Backend.
#include <ingrid/testing/cluster.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <ingrid/topology.h>

#include "cluster/transport/frame_faults.h"
#include "testing/backend.h"

namespace ingrid::testing {

namespace {
using namespace std::chrono_literals;

std::string nodeName(std::size_t i) { return "node " + std::to_string(i); }
}  // namespace

NodeOptions defaultNodeOptions() {
  NodeOptions o;
  o.partitions = 64;
  o.backups = 1;
  o.workerThreads = 1;
  o.completionThreads = 1;
  o.failureTimeout = std::chrono::seconds(3);
  return o;
}

class Cluster::Impl {
 public:
  explicit Impl(ClusterOptions options)
      : o_(std::move(options)),
        faults_(std::make_shared<FrameFaults>(o_.seed ^ 0x5eedULL)),
        backend_(o_.network == Network::kSimulated ? makeSimulatedBackend(o_, faults_)
                                                   : makeLoopbackBackend(o_, faults_)),
        nodes_(o_.nodes) {}

  // A call that runs the simulation, made from a handler the simulation runs: it would nest.
  std::optional<Error> nested(const char* what) const {
    if (!backend_->running()) return std::nullopt;
    return Error(Errc::would_deadlock,
                 std::string("Cluster::") + what +
                     "() called from a handler the simulation runs: it would run the simulation "
                     "inside itself; record what the handler learned and call it after the "
                     "Cluster's call returns");
  }

  Result<bool> start() {
    if (auto bad = nested("start")) return *bad;
    if (started_) return Error(Errc::not_running, "Cluster::start(): a Cluster is started once");
    started_ = true;
    if (o_.nodes == 0) {
      return Error(Errc::invalid_configuration, "ClusterOptions.nodes must be at least 1, got 0");
    }
    if (o_.network == Network::kLoopback && o_.nodes > 250) {
      return Error(Errc::invalid_configuration,
                   "ClusterOptions.nodes must be at most 250 on loopback (127.0.0.2 to "
                   "127.0.0.251), got " +
                       std::to_string(o_.nodes));
    }
    for (std::size_t i = 0; i < o_.nodes; ++i) {
      if (Result<bool> r = startNode(i); !r) return r;
    }
    return waitClusterSafe(o_.startTimeout);
  }

  // --- checks ---
  std::optional<Error> badIndex(std::size_t i, const char* what) const {
    if (!started_) {
      return Error(Errc::not_running,
                   std::string("Cluster::") + what + "(): the cluster is not started");
    }
    if (i >= o_.nodes) {
      return Error(Errc::invalid_argument, std::string("Cluster::") + what + "(): no node " +
                                               std::to_string(i) + " (the cluster has " +
                                               std::to_string(o_.nodes) + ")");
    }
    return std::nullopt;
  }
  std::optional<Error> notUp(std::size_t i, const char* what) const {
    if (auto bad = badIndex(i, what)) return bad;
    if (!nodes_[i].up) {
      return Error(Errc::not_running,
                   std::string("Cluster::") + what + "(): " + nodeName(i) + " is down");
    }
    return std::nullopt;
  }
  std::optional<Error> badLink(std::size_t from, std::size_t to, const char* what) const {
    if (auto bad = badIndex(from, what)) return bad;
    if (auto bad = badIndex(to, what)) return bad;
    if (from == to) {
      return Error(Errc::invalid_argument, std::string("Cluster::") + what +
                                               "(): a link joins two nodes; both are " +
                                               nodeName(from));
    }
    return std::nullopt;
  }

  // --- nodes ---
  Node& node(std::size_t i) {
    if (auto bad = badIndex(i, "node")) throw std::out_of_range(bad->message());
    Node* n = backend_->node(i);
    if (n == nullptr) throw std::out_of_range("Cluster::node(): " + nodeName(i) + " never started");
    return *n;
  }
  std::string address(std::size_t i) const {
    const Node* n = i < o_.nodes ? backend_->node(i) : nullptr;
    return n == nullptr ? std::string() : n->listenAddress();
  }
  bool up(std::size_t i) const noexcept { return i < o_.nodes && nodes_[i].up; }
  bool paused(std::size_t i) const noexcept { return i < o_.nodes && nodes_[i].paused; }

  Result<bool> crash(std::size_t i) { return stopNode(i, true, "crash"); }
  Result<bool> stop(std::size_t i) { return stopNode(i, false, "stop"); }

  Result<bool> restart(std::size_t i, bool keepDataDir) {
    if (auto bad = nested("restart")) return *bad;
    if (auto bad = badIndex(i, "restart")) return *bad;
    if (nodes_[i].up) {
      return Error(Errc::invalid_argument,
                   "Cluster::restart(): " + nodeName(i) + " is up; crash() or stop() it first");
    }
    nodes_[i].wipeDataDir = !keepDataDir;
    return startNode(i);
  }

  Result<bool> pause(std::size_t i) {
    if (auto bad = notUp(i, "pause")) return *bad;
    if (nodes_[i].paused) {
      return Error(Errc::invalid_argument, "Cluster::pause(): " + nodeName(i) + " is paused");
    }
    backend_->pause(i);
    nodes_[i].paused = true;
    return true;
  }
  Result<bool> resume(std::size_t i) {
    if (auto bad = badIndex(i, "resume")) return *bad;
    if (!nodes_[i].paused) {
      return Error(Errc::invalid_argument, "Cluster::resume(): " + nodeName(i) + " is not paused");
    }
    backend_->resume(i);
    nodes_[i].paused = false;
    return true;
  }

  Result<bool> cut(std::size_t from, std::size_t to, bool both, const char* what) {
    if (auto bad = badLink(from, to, what)) return *bad;
    cutLink(from, to);
    if (both) cutLink(to, from);
    return true;
  }

  Result<bool> drop(std::size_t from, std::size_t to, double probability) {
    if (auto bad = badLink(from, to, "drop")) return *bad;
    if (!(probability > 0 && probability <= 1)) {
      return Error(
          Errc::invalid_argument,
          "Cluster::drop(): the probability must be in (0, 1], got " + std::to_string(probability));
    }
    FrameFaults::Rule r;
    r.from = backend_->host(from);
    r.to = backend_->host(to);
    r.drop = probability;
    rules_.push_back(faults_->add(r));
    return true;
  }
  Result<bool> delay(std::size_t from, std::size_t to, std::chrono::milliseconds d) {
    if (auto bad = badLink(from, to, "delay")) return *bad;
    if (d.count() <= 0) {
      return Error(Errc::invalid_argument, "Cluster::delay(): the delay must be > 0 ms, got " +
                                               std::to_string(d.count()) + " ms");
    }
    FrameFaults::Rule r;
    r.from = backend_->host(from);
    r.to = backend_->host(to);
    r.delayMin = d;
    r.delayMax = d;
    rules_.push_back(faults_->add(r));
    return true;
  }

  Result<bool> partition(const std::vector<std::vector<std::size_t>>& groups) {
    if (!started_) {
      return Error(Errc::not_running, "Cluster::partition(): the cluster is not started");
    }
    std::vector<std::size_t> groupOf(o_.nodes, 0);
    std::size_t g = 1;
    for (const auto& group : groups) {
      for (std::size_t i : group) {
        if (i >= o_.nodes) {
          return Error(Errc::invalid_argument, "Cluster::partition(): no node " +
                                                   std::to_string(i) + " (the cluster has " +
                                                   std::to_string(o_.nodes) + ")");
        }
        if (groupOf[i] != 0) {
          return Error(Errc::invalid_argument,
                       "Cluster::partition(): " + nodeName(i) + " is in two groups");
        }
        groupOf[i] = g;
      }
      ++g;
    }
    for (std::size_t i = 0; i < o_.nodes; ++i) {
      if (groupOf[i] == 0) groupOf[i] = g++;  // in no group: alone
    }
    for (std::size_t a = 0; a < o_.nodes; ++a) {
      for (std::size_t b = 0; b < o_.nodes; ++b) {
        if (a != b && groupOf[a] != groupOf[b]) cutLink(a, b);
      }
    }
    return true;
  }

  void heal() {
    for (const auto& [from, to] : std::set<std::pair<std::size_t, std::size_t>>(cuts_)) {
      backend_->heal(from, to);
    }
    cuts_.clear();
    for (int id : rules_) faults_->remove(id);
    rules_.clear();
    for (std::size_t i = 0; i < o_.nodes; ++i) {
      if (nodes_[i].paused) {
        backend_->resume(i);
        nodes_[i].paused = false;
      }
    }
  }

  // --- time and calls ---
  Duration elapsed() const noexcept { return backend_->elapsed(); }
  void advance(Duration d) {
    if (!nested("advance")) backend_->advance(d);
  }
  bool runUntil(const std::function<bool()>& done, Duration limit) {
    if (nested("runUntil")) return false;
    return backend_->runUntil(done, limit);
  }
  Result<std::string> invokeRaw(std::size_t i, std::string key, std::string_view processor,
                                std::string args) {
    if (auto bad = nested("invoke")) return *bad;
    if (auto bad = notUp(i, "invoke")) return *bad;
    const Duration limit = backend_->node(i)->options().requestTimeout + 5s;
    return backend_->invokeRaw(i, std::move(key), processor, std::move(args), limit);
  }

  // --- health ---
  Probe clusterSafe(std::size_t i) {
    if (auto bad = nested("clusterSafe")) return Probe{false, bad->message()};
    if (auto bad = notUp(i, "clusterSafe")) return Probe{false, bad->message()};
    return backend_->probe(
        i, [](Node& n) { return n.clusterSafe(); }, 10s);
  }
  Probe readiness(std::size_t i) {
    if (auto bad = nested("readiness")) return Probe{false, bad->message()};
    if (auto bad = notUp(i, "readiness")) return Probe{false, bad->message()};
    return backend_->probe(
        i, [](Node& n) { return n.readiness(); }, 10s);
  }

  Result<bool> waitClusterSafe(Duration limit) {
    if (auto bad = nested("waitClusterSafe")) return *bad;
    if (!started_) {
      return Error(Errc::not_running, "Cluster::waitClusterSafe(): the cluster is not started");
    }
    const Duration deadline = elapsed() + limit;
    std::string why;
    while (true) {
      const Duration left = deadline - elapsed();
      if (left <= Duration::zero() || !backend_->runUntil([&] { return settled(&why); }, left)) {
        break;
      }
      // Settled as far as the topologies tell: now every up member's own verdicts.
      std::size_t first = o_.nodes;
      bool ok = true;
      for (std::size_t i = 0; i < o_.nodes && ok; ++i) {
        if (!nodes_[i].up) continue;
        if (first == o_.nodes) first = i;
        const Probe ready = readiness(i);
        if (!ready.ok) {
          ok = false;
          why = nodeName(i) + " is not ready: " + ready.reason;
        }
      }
      if (ok && first < o_.nodes) {
        const Probe safe = clusterSafe(first);
        if (!safe.ok) {
          ok = false;
          why = "not cluster-safe: " + safe.reason;
        }
      }
      if (ok) return true;
      if (elapsed() >= deadline) break;
      backend_->advance(std::min<Duration>(100ms, deadline - elapsed()));
    }
    return Error(
        Errc::timeout,
        "the cluster was not safe within " +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(limit).count()) +
            " ms: " + why + "\n" + describe());
  }

  std::uint64_t traceHash() const noexcept { return backend_->traceHash(); }

  std::string describe() const {
    std::string out;
    for (std::size_t i = 0; i < o_.nodes; ++i) {
      const Node* n = backend_->node(i);
      out += nodeName(i) + " " + backend_->listenAddress(i) + ": ";
      out += nodes_[i].up ? (nodes_[i].paused ? "paused" : "up") : "down";
      if (n != nullptr && nodes_[i].up) {
        const TopologyPtr t = n->topology();
        out += ", member " + std::to_string(n->memberId()) + ", topology version " +
               std::to_string(t ? t->version : 0) + " of " +
               std::to_string(t ? t->members.size() : 0) + " members";
      }
      out += "\n";
    }
    return out;
  }

  std::size_t size() const noexcept { return o_.nodes; }
  Network network() const noexcept { return o_.network; }

 private:
  struct NodeState {
    bool started = false;  // started at least once
    bool up = false;
    bool paused = false;
    bool wipeDataDir = false;  // the next start empties its data directory first
  };

  NodeOptions optionsFor(std::size_t i) {
    NodeOptions o = o_.node;
    if (o_.customize) o_.customize(i, o);
    o.listenAddress = backend_->listenAddress(i);
    o.seeds.clear();
    // Node 0's first start bootstraps the cluster; every other start joins through the nodes
    // that are up (in a simulation through every other node: a dial to one that is down is
    // refused at once).
    if (i != 0 || nodes_[i].started) {
      for (std::size_t j = 0; j < o_.nodes; ++j) {
        if (j == i) continue;
        if (o_.network == Network::kSimulated || nodes_[j].up) {
          o.seeds.push_back(backend_->listenAddress(j));
        }
      }
    }
    o.frameFaults = faults_;
    backend_->prepare(i, o);
    return o;
  }

  Result<bool> startNode(std::size_t i) {
    NodeOptions o = optionsFor(i);
    if (nodes_[i].wipeDataDir && !o.dataDir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(o.dataDir, ec);
      if (ec) {
        return Error(Errc::invalid_configuration, "Cluster::restart(): cannot empty " +
                                                      nodeName(i) + "'s data directory " +
                                                      o.dataDir + ": " + ec.message());
      }
    }
    nodes_[i].wipeDataDir = false;
    nodes_[i].started = true;
    Result<bool> r = backend_->start(i, std::move(o), o_.registry, o_.startTimeout);
    nodes_[i].up = r.ok();
    return r;
  }

  Result<bool> stopNode(std::size_t i, bool crash, const char* what) {
    if (auto bad = nested(what)) return *bad;
    if (auto bad = notUp(i, what)) return *bad;
    if (nodes_[i].paused) backend_->resume(i);
    nodes_[i].paused = false;
    nodes_[i].up = false;
    return backend_->stop(i, crash);
  }

  void cutLink(std::size_t from, std::size_t to) {
    if (cuts_.insert({from, to}).second) backend_->cut(from, to);
  }

  // One topology, of exactly the up members, balanced and with no replica syncing, on every up
  // node; none paused.
  bool settled(std::string* why) const {
    TopologyPtr first;
    std::vector<MemberId> ids;
    for (std::size_t i = 0; i < o_.nodes; ++i) {
      if (!nodes_[i].up) continue;
      const Node* n = backend_->node(i);
      if (nodes_[i].paused) {
        *why = nodeName(i) + " is paused";
        return false;
      }
      if (!n->running() || n->memberId() == 0) {
        *why = nodeName(i) + " is not a member (rejoining?)";
        return false;
      }
      const TopologyPtr t = n->topology();
      if (!first) first = t;
      if (t->version != first->version) {
        *why = "the nodes' topology versions differ (" + nodeName(i) + " has " +
               std::to_string(t->version) + ", another " + std::to_string(first->version) + ")";
        return false;
      }
      ids.push_back(n->memberId());
    }
    if (!first) {
      *why = "no node is up";
      return false;
    }
    std::sort(ids.begin(), ids.end());
    if (first->memberIds() != ids) {
      *why = "the topology lists " + std::to_string(first->members.size()) + " members, " +
             std::to_string(ids.size()) + " nodes are up";
      return false;
    }
    if (!first->syncing.empty()) {
      *why = std::to_string(first->syncing.size()) + " replicas are still syncing";
      return false;
    }
    if (!(first->table ==
          Topology::balancedFor(first->table.partitionCount(), first->members, first->backups))) {
      *why = "partitions are still moving to their balanced owners";
      return false;
    }
    return true;
  }

  ClusterOptions o_;
  std::shared_ptr<FrameFaults> faults_;
  std::unique_ptr<Backend> backend_;
  std::vector<NodeState> nodes_;
  std::set<std::pair<std::size_t, std::size_t>> cuts_;  // directions cut (from, to)
  std::vector<int> rules_;                              // drop and delay rules
  bool started_ = false;
};

Cluster::Cluster(ClusterOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Cluster::~Cluster() = default;
Result<bool> Cluster::start() { return impl_->start(); }
std::size_t Cluster::size() const noexcept { return impl_->size(); }
Network Cluster::network() const noexcept { return impl_->network(); }
Node& Cluster::node(std::size_t i) { return impl_->node(i); }
std::string Cluster::address(std::size_t i) const { return impl_->address(i); }
bool Cluster::up(std::size_t i) const noexcept { return impl_->up(i); }
bool Cluster::paused(std::size_t i) const noexcept { return impl_->paused(i); }
Cluster::Duration Cluster::elapsed() const noexcept { return impl_->elapsed(); }
void Cluster::advance(Duration d) { impl_->advance(d); }
bool Cluster::runUntil(const std::function<bool()>& done, Duration limit) {
  return impl_->runUntil(done, limit);
}
Result<std::string> Cluster::invokeRaw(std::size_t i, std::string key, std::string_view processor,
                                       std::string args) {
  return impl_->invokeRaw(i, std::move(key), processor, std::move(args));
}
Result<bool> Cluster::crash(std::size_t i) { return impl_->crash(i); }
Result<bool> Cluster::stop(std::size_t i) { return impl_->stop(i); }
Result<bool> Cluster::restart(std::size_t i, bool keepDataDir) {
  return impl_->restart(i, keepDataDir);
}
Result<bool> Cluster::pause(std::size_t i) { return impl_->pause(i); }
Result<bool> Cluster::resume(std::size_t i) { return impl_->resume(i); }
Result<bool> Cluster::cut(std::size_t a, std::size_t b) { return impl_->cut(a, b, true, "cut"); }
Result<bool> Cluster::cutOneWay(std::size_t from, std::size_t to) {
  return impl_->cut(from, to, false, "cutOneWay");
}
Result<bool> Cluster::drop(std::size_t from, std::size_t to, double probability) {
  return impl_->drop(from, to, probability);
}
Result<bool> Cluster::delay(std::size_t from, std::size_t to, std::chrono::milliseconds d) {
  return impl_->delay(from, to, d);
}
Result<bool> Cluster::partition(const std::vector<std::vector<std::size_t>>& groups) {
  return impl_->partition(groups);
}
void Cluster::heal() { impl_->heal(); }
Result<bool> Cluster::waitClusterSafe(Duration limit) { return impl_->waitClusterSafe(limit); }
Probe Cluster::clusterSafe(std::size_t i) { return impl_->clusterSafe(i); }
Probe Cluster::readiness(std::size_t i) { return impl_->readiness(i); }
std::uint64_t Cluster::traceHash() const noexcept { return impl_->traceHash(); }
std::string Cluster::describe() const { return impl_->describe(); }

}  // namespace ingrid::testing
