// TestCluster: several embedded nodes on 127.0.0.1 (ephemeral ports) in one process, for tests.
#pragma once

#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/node.h>

#include "support/eventually.h"

namespace ingrid::testing {

// Options for a small test cluster: 64 partitions, 1 backup, `workers` worker threads, a
// failure timeout of 10 s.
inline NodeOptions smallClusterOptions(std::shared_ptr<const Clock> clock = nullptr,
                                       unsigned workers = 1) {
  NodeOptions o;
  o.partitions = 64;
  o.workerThreads = workers;
  o.completionThreads = 1;
  o.backups = 1;
  o.clock = std::move(clock);
  // Far above any stall a loaded sanitizer build shows; failure tests set their own.
  o.failureTimeout = std::chrono::seconds(10);
  return o;
}

class TestCluster {
 public:
  explicit TestCluster(NodeOptions base) : base_(std::move(base)) {}
  ~TestCluster() {
    for (auto& n : nodes_) {
      if (n) n->stop();
    }
  }

  // Starts one more node, joining through the first live node (or bootstrapping the cluster).
  Node& add(ProcessorRegistry registry = ProcessorRegistry::withBuiltins()) {
    NodeOptions o = base_;
    if (customize_) customize_(o, nodes_.size());
    // Distinct: node i listens (and dials) on 127.0.0.<i+2>, so an IP names a node (FrameFaults).
    o.listenAddress = distinct_ ? "127.0.0." + std::to_string(nodes_.size() + 2) + ":0"
                                : std::string("127.0.0.1:0");
    for (auto& n : nodes_) {
      if (n && n->running()) {
        o.seeds = {n->listenAddress()};
        break;
      }
    }
    auto node = std::make_unique<Node>(o, std::move(registry));
    lastStart_ = node->start();
    nodes_.push_back(std::move(node));
    return *nodes_.back();
  }
  // Starts `n` more nodes at once (each start() on a thread of its own), all joining through the
  // first live node, as a fleet whose processes start together. Returns each one's start().
  std::vector<Result<bool>> addAtOnce(int n) {
    std::string seed;
    for (auto& node : nodes_) {
      if (node && node->running()) {
        seed = node->listenAddress();
        break;
      }
    }
    std::vector<std::unique_ptr<Node>> fresh;
    for (int i = 0; i < n; ++i) {
      NodeOptions o = base_;
      o.listenAddress = "127.0.0.1:0";
      if (!seed.empty()) o.seeds = {seed};
      fresh.push_back(std::make_unique<Node>(o));
    }
    std::vector<Result<bool>> results(static_cast<std::size_t>(n), Result<bool>(false));
    std::vector<std::thread> starters;
    for (int i = 0; i < n; ++i) {
      starters.emplace_back([&, i] { results[i] = fresh[i]->start(); });
    }
    for (auto& t : starters) t.join();
    for (auto& node : fresh) nodes_.push_back(std::move(node));
    return results;
  }
  const Result<bool>& lastStart() const { return lastStart_; }
  // add() hands node i's options (the base's) to `f` before starting it: a zone per node, say.
  void customize(std::function<void(NodeOptions&, std::size_t)> f) { customize_ = std::move(f); }
  // Nodes added from now on listen on distinct loopback addresses (see add()).
  void useDistinctAddresses() { distinct_ = true; }

  // Starts n nodes and waits until the cluster has settled; false (with lastStart()) if not.
  bool start(int n) {
    for (int i = 0; i < n; ++i) {
      add();
      if (!lastStart_) {
        std::cerr << "TestCluster: node " << nodes_.size() - 1
                  << " did not start: " << lastStart_.error().message() << "\n";
        return false;
      }
    }
    // Settled, every member holds its primary lease (readiness: a write sent at once, with no
    // client's retries, is not refused for the want of one), and the cluster is safe (the control
    // plane has every voter it wants: a crash during a promotion may cost a young cluster its
    // quorum).
    return eventually([this] { return settled(); }) && eventually([this] {
             for (Node* node : live()) {
               if (!node->readiness().ok) return false;
             }
             return settled() && live().front()->clusterSafe().ok;
           });
  }

  // Stops node i gracefully (it leaves the cluster first) and forgets it.
  void remove(std::size_t i) {
    nodes_[i]->stop();
    nodes_[i].reset();
  }

  // Stops node i as if its process died (no leave) and forgets it.
  void crash(std::size_t i) {
    nodes_[i]->TEST_crash();
    nodes_[i].reset();
  }
  // Crashes every node still running (no leave, no hand-over).
  void crashAll() {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]) crash(i);
    }
  }

  std::vector<Node*> live() const {
    std::vector<Node*> out;
    for (auto& n : nodes_) {
      if (n && n->running()) out.push_back(n.get());
    }
    return out;
  }
  Node& at(std::size_t i) { return *nodes_[i]; }

  // Every live node has the same topology, listing exactly the live nodes, with the balanced
  // table and no replica still syncing (no migration in flight).
  bool settled() const {
    auto nodes = live();
    if (nodes.empty()) return true;
    const TopologyPtr first = nodes[0]->topology();
    std::vector<MemberId> ids;
    for (Node* n : nodes) ids.push_back(n->memberId());
    std::sort(ids.begin(), ids.end());
    if (first->memberIds() != ids) return false;
    const PartitionTable ideal =
        Topology::balancedFor(first->table.partitionCount(), first->members, first->backups);
    // The balanced table alone is not enough: after a crash, T1 already is the balanced table
    // while replicas still receive their snapshots.
    if (!(first->table == ideal) || !first->syncing.empty()) return false;
    for (Node* n : nodes) {
      if (n->topology()->version != first->version) return false;
    }
    return true;
  }

  Node* byId(MemberId id) const {
    for (Node* n : live()) {
      if (n->memberId() == id) return n;
    }
    return nullptr;
  }

 private:
  NodeOptions base_;
  std::function<void(NodeOptions&, std::size_t)> customize_;
  bool distinct_ = false;
  std::vector<std::unique_ptr<Node>> nodes_;
  Result<bool> lastStart_ = true;
};

}  // namespace ingrid::testing
