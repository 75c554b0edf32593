// SimulatedBackend: the nodes of a test cluster as members of one Simulation (cluster/sim), on
// its in-memory network, driven from the test's thread. Each node is a MemberProcess<Node>: made
// in its member's scope, started and stopped on baton threads, reaped after every event.
//
// Destruction: the nodes' completions are dropped first (the test's handlers may capture what is
// already gone), then every node still running is crashed and the simulation run until no baton
// runs, a few rounds at most; only then are the nodes destroyed.
#include <algorithm>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster/sim/member_process.h"
#include "cluster/sim/simulation.h"
#include "cluster/transport/frame_faults.h"
#include "cluster/transport/sim_network.h"
#include "testing/backend.h"

namespace ingrid::testing {

namespace {

using sim::Member;
using sim::MemberProcess;
using sim::Simulation;

// Every node listens on this port of its host.
constexpr const char* kPort = ":7000";

// The reason of the last fatal error of a simulation with no ClusterOptions::onFatal.
std::string& lastFatal() {
  static std::string reason;
  return reason;
}

// Installs a fatal sink of the simulation (sim::setFatalSink) that calls `onFatal` (or keeps the
// reason in lastFatal()) unless one is set, and removes it when destroyed.
class FatalSink {
 public:
  explicit FatalSink(std::function<void(std::string_view)> onFatal) {
    if (sim::hasFatalSink()) return;
    installed_ = true;
    sim::setFatalSink([onFatal = std::move(onFatal)](std::string_view what) {
      if (onFatal) {
        onFatal(what);
      } else {
        lastFatal() = what;
      }
    });
  }
  ~FatalSink() {
    if (installed_) sim::setFatalSink(nullptr);
  }
  FatalSink(const FatalSink&) = delete;
  FatalSink& operator=(const FatalSink&) = delete;

 private:
  bool installed_ = false;
};

SimNetwork::Options networkOptions(const ClusterOptions& o) {
  SimNetwork::Options n;
  n.minLatency = o.minLatency;
  n.maxLatency = std::max(o.maxLatency, o.minLatency);
  return n;
}

class SimulatedBackend final : public Backend {
 public:
  SimulatedBackend(const ClusterOptions& o, std::shared_ptr<FrameFaults> faults)
      : fatalSink_(o.onFatal),
        sim_(o.seed),
        network_(networkOptions(o)),
        faults_(std::move(faults)) {
    sim_.setNetwork(network_);
    for (std::size_t i = 0; i < o.nodes; ++i) {
      Member& m = sim_.addMember("10.0.0." + std::to_string(i + 1));
      processes_.push_back(std::make_unique<MemberProcess<Node>>(sim_, m, /*keepStopped=*/true));
    }
  }

  ~SimulatedBackend() override {
    // No handler of the test's runs from here on: it may capture what is already gone.
    for (auto& p : processes_) {
      if (Node* n = p->node()) n->TEST_dropCompletions();
    }
    // Paused members resumed (a paused member's baton never runs), then every node crashed, until
    // none runs and no baton is left: a start that timed out may still finish and bring its node
    // up, to be crashed in the next round.
    for (std::size_t i = 0; i < processes_.size(); ++i) {
      if (processes_[i]->member().paused) sim_.resume(i);
    }
    faults_->clear();
    constexpr int kRounds = 4;
    bool idleNow = false;
    for (int round = 0; round < kRounds && !idleNow; ++round) {
      for (auto& p : processes_) p->stop(/*crash=*/true);
      sim_.runUntilTrue([this] { return idle(); }, sim_.now() + std::chrono::minutes(10),
                        [this] { reap(); });
      reap();
      idleNow = idle() && std::none_of(processes_.begin(), processes_.end(),
                                       [](const auto& p) { return p->up(); });
    }
    if (!idleNow) {
      // Destroying a node a baton still runs in would end the process less clearly.
      sim::fatal("~Cluster: a node was still starting or stopping after " +
                 std::to_string(kRounds * 10) + " minutes of simulated time");
    }
    processes_.clear();  // each node destroyed in its member's scope
  }

  std::string host(std::size_t i) const override { return processes_[i]->member().host(); }
  std::string listenAddress(std::size_t i) const override { return host(i) + kPort; }

  void prepare(std::size_t i, NodeOptions& options) override {
    options.clock = std::make_shared<sim::MemberClock>(processes_[i]->member());
    options.shardPorts = false;  // the partitions run on the simulated network thread
  }

  Result<bool> start(std::size_t i, NodeOptions options, const ProcessorRegistry& registry,
                     Duration limit) override {
    MemberProcess<Node>& p = *processes_[i];
    if (!p.idle()) {
      return Error(Errc::unavailable, "node " + std::to_string(i) + " (" + listenAddress(i) +
                                          ") is still " + (p.stopping() ? "stopping" : "starting") +
                                          " (an earlier call timed out); advance() and retry");
    }
    // A probe still running (one that timed out) holds the node about to be replaced.
    if (!run([this] { return probes_.empty(); }, std::chrono::seconds(30))) {
      return Error(Errc::timeout, "node " + std::to_string(i) + " (" + listenAddress(i) +
                                      ") was not restarted: a probe of it still ran after 30 s " +
                                      "of simulated time");
    }
    if (!p.start([&] { return std::make_unique<Node>(std::move(options), registry); })) {
      return Error(Errc::unavailable, "node " + std::to_string(i) + " (" + listenAddress(i) +
                                          ") is still starting or stopping; advance() and retry");
    }
    if (!run([&p] { return p.idle(); }, limit)) {
      return Error(Errc::timeout, "node " + std::to_string(i) + " (" + listenAddress(i) +
                                      ") did not finish starting within " + ms(limit) +
                                      " of simulated time");
    }
    reap();
    if (!p.up()) {
      return Error(Errc::unavailable, "node " + std::to_string(i) + " (" + listenAddress(i) +
                                          ") did not start: " + p.startError());
    }
    return true;
  }

  Result<bool> stop(std::size_t i, bool crash) override {
    MemberProcess<Node>& p = *processes_[i];
    if (p.member().paused) sim_.resume(i);  // kill -9 ends a stopped process too
    if (!p.stop(crash)) {
      if (!p.idle()) {
        return Error(Errc::unavailable, "node " + std::to_string(i) + " is still " +
                                            (p.stopping() ? "stopping" : "starting") +
                                            " (an earlier call timed out); advance() and retry");
      }
      return Error(Errc::not_running, "node " + std::to_string(i) + " is not running");
    }
    // A stop waits for its leave (leaveTimeout, 15 s by default) and drain.
    if (!run([&p] { return !p.hasBaton(); }, std::chrono::minutes(5))) {
      return Error(Errc::timeout, "node " + std::to_string(i) + " did not stop within 5 minutes " +
                                      "of simulated time");
    }
    return true;
  }

  Node* node(std::size_t i) override { return processes_[i]->node(); }
  const Node* node(std::size_t i) const override { return processes_[i]->node(); }

  void pause(std::size_t i) override { sim_.pause(i); }
  void resume(std::size_t i) override { sim_.resume(i); }
  void cut(std::size_t from, std::size_t to) override { network_.cut(host(from), host(to)); }
  void heal(std::size_t from, std::size_t to) override { network_.heal(host(from), host(to)); }

  Duration elapsed() const override { return sim_.now() - sim_.start(); }
  void advance(Duration d) override {
    if (running_) return;  // Cluster::Impl refuses a nested call before it comes here
    Running guard(running_);
    sim_.runUntil(sim_.now() + d, [this] { reap(); });
  }
  bool runUntil(const std::function<bool()>& done, Duration limit) override {
    return run(done, limit);
  }

  Result<std::string> invokeRaw(std::size_t i, std::string key, std::string_view processor,
                                std::string args, Duration limit) override {
    struct Answer {
      std::optional<Result<std::string>> result;
    };
    auto answer = std::make_shared<Answer>();  // outlives this call if the answer comes late
    // Node::invokeRaw enters the member's scope itself.
    processes_[i]->node()->invokeRaw(
        std::move(key), processor, std::move(args),
        [answer](Result<std::string> r) { answer->result.emplace(std::move(r)); });
    if (!run([&] { return answer->result.has_value(); }, limit)) {
      return Error(Errc::timeout, "no answer from node " + std::to_string(i) + " to '" +
                                      std::string(processor) + "' within " + ms(limit) +
                                      " of simulated time");
    }
    return std::move(*answer->result);
  }

  Probe probe(std::size_t i, const NodeProbe& ask, Duration limit) override {
    MemberProcess<Node>& p = *processes_[i];
    Node* node = p.node();
    if (node == nullptr || !p.up()) return Probe{false, "node " + std::to_string(i) + " is down"};
    if (p.member().paused) return Probe{false, "node " + std::to_string(i) + " is paused"};
    auto answer = std::make_shared<std::optional<Probe>>();
    // The probe blocks: a baton thread of node i's member, run while the simulation waits for it.
    probes_.push_back(
        PendingProbe{p.member().spawn([node, ask, answer] { *answer = ask(*node); }), answer});
    if (!run([&] { return answer->has_value(); }, limit)) {
      return Probe{false, "node " + std::to_string(i) + "'s probe did not return within " +
                              ms(limit) + " of simulated time"};
    }
    return **answer;
  }

  std::uint64_t traceHash() const override { return sim_.traceHash(); }
  bool running() const override { return running_; }

 private:
  // Sets a flag for a scope.
  struct Running {
    explicit Running(bool& flag) : flag_(flag) { flag_ = true; }
    ~Running() { flag_ = false; }
    bool& flag_;
  };

  static std::string ms(Duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
  }

  // False at once if the simulation already runs (called from one of its handlers): it does
  // not nest (Cluster::Impl refuses such a call with Errc::would_deadlock first).
  bool run(const std::function<bool()>& done, Duration limit) {
    if (running_) return false;
    Running guard(running_);
    return sim_.runUntilTrue(done, sim_.now() + limit, [this] { reap(); });
  }

  // After each event: finished starts and stops reaped, finished probes' batons joined.
  void reap() {
    for (auto& p : processes_) p->reap();
    // A probe's baton sets its answer and returns without blocking again: once the answer is
    // there, the baton has finished.
    std::erase_if(probes_, [](const PendingProbe& p) { return p.answer->has_value(); });
  }

  bool idle() const {
    return std::all_of(processes_.begin(), processes_.end(),
                       [](const auto& p) { return !p->hasBaton(); }) &&
           probes_.empty();
  }

  FatalSink fatalSink_;  // first: removed once everything else is gone
  Simulation sim_;
  SimNetwork network_;  // after sim_: it outlives every node
  std::shared_ptr<FrameFaults> faults_;
  std::vector<std::unique_ptr<MemberProcess<Node>>> processes_;  // destroyed first
  struct PendingProbe {
    std::unique_ptr<SimulatedMember::Thread> baton;
    std::shared_ptr<std::optional<Probe>> answer;
  };
  std::vector<PendingProbe> probes_;  // probes whose baton has not finished
  bool running_ = false;              // run() or advance() is running the simulation
};

}  // namespace

std::string lastFatalReason() { return lastFatal(); }

std::unique_ptr<Backend> makeSimulatedBackend(const ClusterOptions& options,
                                              std::shared_ptr<FrameFaults> faults) {
  return std::make_unique<SimulatedBackend>(options, std::move(faults));
}

}  // namespace ingrid::testing
