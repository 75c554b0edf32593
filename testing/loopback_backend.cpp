// LoopbackBackend: the nodes of a test cluster on real TCP sockets and real time, node i on
// 127.0.0.<i+2> (an ephemeral port, kept across its restarts), each on its own threads. Link
// faults and pauses are FrameFaults rules on the frames the nodes write (frame_faults.h).
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "cluster/transport/frame_faults.h"
#include "cluster/transport/runtime.h"
#include "testing/backend.h"

namespace ingrid::testing {

namespace {

class LoopbackBackend final : public Backend {
 public:
  LoopbackBackend(const ClusterOptions& o, std::shared_ptr<FrameFaults> faults)
      : faults_(std::move(faults)),
        nodes_(o.nodes),
        ports_(o.nodes, "0"),
        start_(std::chrono::steady_clock::now()) {}

  ~LoopbackBackend() override {
    faults_->clear();
    for (auto& n : nodes_) {
      if (n && n->running()) n->TEST_crash();
    }
    nodes_.clear();
  }

  std::string host(std::size_t i) const override { return "127.0.0." + std::to_string(i + 2); }
  std::string listenAddress(std::size_t i) const override { return host(i) + ":" + ports_[i]; }
  void prepare(std::size_t, NodeOptions&) override {}

  Result<bool> start(std::size_t i, NodeOptions options, const ProcessorRegistry& registry,
                     Duration) override {
    // start() gives up by itself (NodeOptions::joinTimeout).
    nodes_[i].reset();
    nodes_[i] = std::make_unique<Node>(std::move(options), registry);
    Result<bool> started = nodes_[i]->start();
    if (!started) {
      return Error(started.error().code(), "node " + std::to_string(i) + " (" + listenAddress(i) +
                                               ") did not start: " + started.error().message());
    }
    const std::string bound = nodes_[i]->listenAddress();
    ports_[i] = bound.substr(bound.rfind(':') + 1);  // its restarts listen there again
    return true;
  }

  Result<bool> stop(std::size_t i, bool crash) override {
    Node* n = nodes_[i].get();
    if (n == nullptr || !n->running()) {
      return Error(Errc::not_running, "node " + std::to_string(i) + " is not running");
    }
    if (crash) {
      n->TEST_crash();
    } else {
      n->stop();
    }
    return true;
  }

  Node* node(std::size_t i) override { return nodes_[i].get(); }
  const Node* node(std::size_t i) const override { return nodes_[i].get(); }

  // Every frame to and from the node dropped (Hello aside, which FrameFaults never drops).
  void pause(std::size_t i) override {
    FrameFaults::Rule out, in;
    out.from = host(i);
    out.cut = true;
    in.to = host(i);
    in.cut = true;
    pauses_[i] = {faults_->add(out), faults_->add(in)};
  }
  void resume(std::size_t i) override {
    auto it = pauses_.find(i);
    if (it == pauses_.end()) return;
    faults_->remove(it->second.first);
    faults_->remove(it->second.second);
    pauses_.erase(it);
  }
  void cut(std::size_t from, std::size_t to) override {
    if (cuts_.contains({from, to})) return;
    FrameFaults::Rule r;
    r.from = host(from);
    r.to = host(to);
    r.cut = true;
    cuts_[{from, to}] = faults_->add(r);
  }
  void heal(std::size_t from, std::size_t to) override {
    auto it = cuts_.find({from, to});
    if (it == cuts_.end()) return;
    faults_->remove(it->second);
    cuts_.erase(it);
  }

  // Any thread (GrantAudit's completions): start_ never changes.
  Duration elapsed() const override { return std::chrono::steady_clock::now() - start_; }
  void advance(Duration d) override { std::this_thread::sleep_for(d); }
  bool runUntil(const std::function<bool()>& done, Duration limit) override {
    const SteadyTime deadline = steadyNow() + limit;
    while (!done()) {
      if (steadyNow() >= deadline) return done();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  Result<std::string> invokeRaw(std::size_t i, std::string key, std::string_view processor,
                                std::string args, Duration limit) override {
    auto answer = std::make_shared<std::promise<Result<std::string>>>();
    std::future<Result<std::string>> got = answer->get_future();
    // Setting a promise is not user code: it may run where the answer arrives.
    nodes_[i]->invokeRaw(std::move(key), processor, std::move(args),
                         [answer](Result<std::string> r) { answer->set_value(std::move(r)); });
    if (got.wait_for(limit) != std::future_status::ready) {
      return Error(
          Errc::timeout,
          "no answer from node " + std::to_string(i) + " to '" + std::string(processor) +
              "' within " +
              std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(limit).count()) +
              " ms");
    }
    return got.get();
  }

  Probe probe(std::size_t i, const NodeProbe& ask, Duration) override {
    Node* n = nodes_[i].get();
    if (n == nullptr || !n->running()) {
      return Probe{false, "node " + std::to_string(i) + " is down"};
    }
    return ask(*n);  // each probe bounds its own wait
  }

  std::uint64_t traceHash() const override { return 0; }

 private:
  std::shared_ptr<FrameFaults> faults_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::string> ports_;                           // "0" until the first start
  std::map<std::pair<std::size_t, std::size_t>, int> cuts_;  // (from, to) -> rule
  std::map<std::size_t, std::pair<int, int>> pauses_;        // node -> its two rules
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::unique_ptr<Backend> makeLoopbackBackend(const ClusterOptions& options,
                                             std::shared_ptr<FrameFaults> faults) {
  return std::make_unique<LoopbackBackend>(options, std::move(faults));
}

}  // namespace ingrid::testing
