#include <ingrid/node.h>

#include <future>

#include "cluster/node_impl.h"
#include "cluster/transport/logger.h"

namespace ingrid {

Node::Node(NodeOptions options, ProcessorRegistry registry)
    : impl_(std::make_unique<NodeImpl>(std::move(options), std::move(registry))),
      simulated_(simulatedMember()) {
  if (simulated_ != nullptr) {
    // No thread: the simulator polls this context in the member's scope (runtime.h adopt()).
    simulatedCompletions_ = std::make_unique<asio::io_context>();
    simulatedWork_.emplace(simulatedCompletions_->get_executor());
    simulated_->adopt(*simulatedCompletions_);
    return;
  }
  completionPool_.emplace(
      impl_->options().completionThreads == 0 ? 1 : impl_->options().completionThreads);
}

Node::~Node() {
  stopNow();
  if (simulated_ != nullptr) {
    // Completions still queued are dropped with the context (their callers went with the node).
    simulated_->forget(*simulatedCompletions_);
    simulatedWork_.reset();
    simulatedCompletions_.reset();
  }
}

Result<bool> Node::start() {
  if (!mayBlock()) {
    return Error(Errc::would_deadlock,
                 "Node::start() blocks; in a simulation it runs on a baton thread of the "
                 "simulator (the test kit's Cluster starts its nodes so)");
  }
  return impl_->start();
}

void Node::stop() {
  if (refuseBlocking("Node::stop()")) return;
  stopNow();
}

void Node::stopNow() {
  impl_->stop();  // in a simulation on a baton thread; once stopped, at once (the destructor's)
  if (simulated_ != nullptr) return;  // no completion threads: the simulator polls the context
  completionsClosed_.store(true, std::memory_order_release);
  completionPool_->join();
}

void Node::TEST_dropCompletions() noexcept {
  if (simulated_ != nullptr) simulated_->forget(*simulatedCompletions_);
}

bool Node::mayBlock() const noexcept { return simulated_ == nullptr || simulated_->mayBlock(); }

bool Node::refuseBlocking(const char* call) const {
  if (mayBlock() || !impl_->running()) return false;
  Logger(impl_->options().logSink, impl_->options().logLevel)
      .error({.member = impl_->memberId()}, call,
             " ignored: it blocks, and in a simulation a node blocks only on a baton thread of "
             "the simulator; the test kit's Cluster::stop() and Cluster::crash() run it there");
  return true;
}

void Node::logSimulatedRefusal(const char* call) const {
  Logger(impl_->options().logSink, impl_->options().logLevel)
      .error({.member = impl_->memberId()}, call,
             " refused: it waits in a way the simulator cannot run (a simulated node runs only "
             "while the simulation does); read the node through the test kit's Cluster instead");
}

void Node::invokeRaw(std::string key, std::string_view processor, std::string args,
                     RawCompletion done) {
  if (simulated_ != nullptr && simulatedMember() != simulated_) [[unlikely]] {
    // Called from outside the member (the test's thread, another member's completion): its
    // code reads its own clock and network.
    SimulatedMemberScope scope(simulated_);
    impl_->invokeRaw(std::move(key), processor, std::move(args), std::move(done));
    return;
  }
  impl_->invokeRaw(std::move(key), processor, std::move(args), std::move(done));
}

Error Node::wouldDeadlock(std::string_view processor) const {
  if (simulated_ != nullptr) {
    return Error(Errc::would_deadlock,
                 "invoke('" + std::string(processor) +
                     "') on a simulated node: it would wait for an answer that comes only while "
                     "the simulation runs; use the test kit's Cluster::invoke (or invokeAsync)");
  }
  return Error(Errc::would_deadlock,
               "invoke('" + std::string(processor) +
                   "') called on a partition worker thread; use invokeAsync there");
}

std::optional<asio::io_context::executor_type> Node::partitionExecutor() const noexcept {
  return impl_->partitionExecutor();
}
const NodeOptions& Node::options() const noexcept { return impl_->options(); }
const ProcessorRegistry& Node::registry() const noexcept { return impl_->registry(); }
bool Node::running() const noexcept { return impl_->running(); }
MemberId Node::memberId() const noexcept { return impl_->memberId(); }
std::string Node::listenAddress() const { return impl_->listenAddress(); }
TopologyPtr Node::topology() const { return impl_->topology(); }
std::uint64_t Node::TEST_entryCount() {
  if (simulated_ != nullptr) {
    logSimulatedRefusal("Node::TEST_entryCount()");
    return 0;
  }
  return impl_->TEST_entryCount();
}
std::string Node::metricsText() { return mayBlock() ? impl_->metricsText() : std::string(); }
namespace {
Probe cannotBlock(const char* probe) {
  return Probe{false, std::string(probe) +
                          " blocks; in a simulation ask it from a baton thread (the test kit's "
                          "Cluster::clusterSafe, readiness)"};
}
}  // namespace
Probe Node::liveness() { return mayBlock() ? impl_->liveness() : cannotBlock("liveness()"); }
Probe Node::readiness() { return mayBlock() ? impl_->readiness() : cannotBlock("readiness()"); }
Probe Node::clusterSafe() {
  return mayBlock() ? impl_->clusterSafe() : cannotBlock("clusterSafe()");
}
std::uint64_t Node::reclaimedCount() const noexcept { return impl_->reclaimedCount(); }
std::vector<std::pair<std::string, Entry>> Node::TEST_partitionEntries(PartitionId p) {
  if (simulated_ != nullptr) {
    logSimulatedRefusal("Node::TEST_partitionEntries()");
    return {};
  }
  return impl_->TEST_partitionEntries(p);
}
std::uint64_t Node::TEST_partitionSeq(PartitionId p) {
  if (simulated_ != nullptr) {
    logSimulatedRefusal("Node::TEST_partitionSeq()");
    return 0;
  }
  return impl_->TEST_partitionSeq(p);
}
std::uint64_t Node::TEST_executed() const noexcept { return impl_->TEST_executed(); }
std::uint64_t Node::degradedWrites() const noexcept { return impl_->degradedWrites(); }
std::uint64_t Node::TEST_barriers() const noexcept { return impl_->TEST_barriers(); }
std::uint64_t Node::TEST_parkedCopies() const noexcept { return impl_->TEST_parkedCopies(); }
std::pair<std::uint64_t, std::uint64_t> Node::TEST_shardInvocations() const noexcept {
  return impl_->TEST_shardInvocations();
}
std::pair<std::uint64_t, std::uint64_t> Node::TEST_replicateBatches() const noexcept {
  return impl_->TEST_replicateBatches();
}
std::uint64_t Node::TEST_snapshotsRefused() const noexcept {
  return impl_->TEST_snapshotsRefused();
}
void Node::TEST_closeShardPorts() { impl_->TEST_closeShardPorts(); }
void Node::TEST_crash() {
  if (refuseBlocking("Node::TEST_crash()")) return;
  impl_->crash();
}

// --- NodeImpl: the embedded invoke path ---

void NodeImpl::finishInvocation() noexcept {
  if (inflight_.fetch_sub(1, std::memory_order_acq_rel) == 1) inflight_.notify_all();
}

void NodeImpl::invokeRaw(std::string key, std::string_view processor, std::string args,
                         RawCompletion done) {
  const bool running = beginInvocation();
  Error refused;
  ErasedProcessorFn fn = nullptr;
  if (!running) {
    const int state = state_.load(std::memory_order_acquire);
    refused = Error(state == kCreated ? Errc::not_running : Errc::shutting_down,
                    "cannot run processor '" + std::string(processor) + "'");
  } else if (auto bad = keyError(key)) {
    refused = std::move(*bad);
  } else if ((fn = registry_.find(processor)) == nullptr) {
    refused = Error(Errc::unknown_processor,
                    "no processor named '" + std::string(processor) + "' is registered");
  }
  if (fn == nullptr) {
    finishInvocation();
    done(std::move(refused));
    return;
  }
  router_.start(std::move(key), processor, std::move(args), std::move(done), options_.partitions,
                options_.requestTimeout);
}

bool NodeImpl::runLocally(RoutedCallPtr& call, MemberId primary) {
  if (primary != memberId()) return false;
  const PartitionId p = call->partition;
  // In place when called on p's thread (partitions on the network thread, a call made by a handler
  // there): the caller's completion is still posted (asyncInvoke posts inside an initiating call).
  data_->dispatch(p, [this, call = std::move(call)](PartitionStore& store) mutable {
    RoutedCall& c = *call;
    // Registered: invokeRaw checked it, and the registry is immutable while running.
    const auto [fn, index] = registry_.lookup(c.processor);
    const RequestId id = router_.requestId(c);
    data_->execute(c.partition, store, c.key, fn, index, c.args, id, c.deadline,
                   [this, call = std::move(call)](Result<std::string> r) mutable {
                     if (!r && transport_ &&
                         (r.error() == Errc::not_owner || r.error() == Errc::unavailable)) {
                       const Error why = r.error();
                       router_.retryLater(std::move(call), why);
                     } else {
                       router_.finish(std::move(call), std::move(r));
                     }
                   });
  });
  return true;
}

}  // namespace ingrid

namespace ingrid {

bool Node::onPartitionWorker() noexcept { return PartitionWorkers::onAnyWorkerThread(); }

}  // namespace ingrid
