#include <ingrid/cluster/node.h>

#include <thread>

namespace ingrid {
namespace {

unsigned resolveThreads(unsigned requested) {
  if (requested != 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : hw;
}

std::shared_ptr<const Clock> resolveClock(std::shared_ptr<const Clock> clock) {
  if (clock) return clock;
  return std::make_shared<SystemClock>();
}

}  // namespace

Node::Node(NodeOptions options, ProcessorRegistry registry)
    : options_(std::move(options)),
      registry_(std::move(registry)),
      clock_(resolveClock(options_.clock)),
      completionPool_(options_.completionThreads == 0 ? 1 : options_.completionThreads) {}

Node::~Node() { stop(); }

Result<bool> Node::start() {
  if (state_.load() != kCreated) {
    return Error(Errc::not_running, "start(): a Node is started once; this one already was");
  }
  if (options_.partitions == 0) {
    return Error(Errc::invalid_configuration, "NodeOptions.partitions must be > 0");
  }
  if (options_.expirySweepInterval.count() <= 0 || options_.expirySweepBuckets == 0) {
    return Error(Errc::invalid_configuration,
                 "NodeOptions.expirySweepInterval and expirySweepBuckets must be > 0");
  }
  const unsigned threads = resolveThreads(options_.workerThreads);
  workers_ =
      std::make_unique<PartitionWorkers>(options_.partitions, threads, clock_,
                                         options_.expirySweepInterval, options_.expirySweepBuckets);
  workers_->start();
  state_.store(kRunning, std::memory_order_release);
  return true;
}

void Node::stop() {
  int expected = kRunning;
  if (!state_.compare_exchange_strong(expected, kStopping)) {
    if (expected == kCreated) state_.store(kStopped);
    // Already stopping/stopped elsewhere: completions still drain in completionPool_.join().
    completionPool_.join();
    return;
  }
  // Every invocation admitted before the state change completes; new ones are refused.
  for (std::int64_t n = inflight_.load(); n != 0; n = inflight_.load()) inflight_.wait(n);
  workers_->stop();
  completionPool_.join();
  state_.store(kStopped, std::memory_order_release);
}

Error Node::wouldDeadlock(std::string_view processor) {
  return Error(Errc::would_deadlock,
               "invoke('" + std::string(processor) +
                   "') called on a partition worker thread; use invokeAsync there");
}

void Node::finishInvocation() noexcept {
  if (inflight_.fetch_sub(1, std::memory_order_acq_rel) == 1) inflight_.notify_all();
}

void Node::invokeRaw(std::string key, std::string_view processor, std::string args,
                     RawCompletion done) {
  // Count first, then check the state: stop() flips the state and then waits for the count, so
  // an invocation either sees kStopping and backs out or is waited for.
  inflight_.fetch_add(1, std::memory_order_acq_rel);
  const int state = state_.load(std::memory_order_acquire);
  if (state != kRunning) {
    finishInvocation();
    done(Error(state == kCreated ? Errc::not_running : Errc::shutting_down,
               "cannot run processor '" + std::string(processor) + "'"));
    return;
  }
  if (key.size() > kMaxKeyBytes) {
    finishInvocation();
    done(Error(Errc::invalid_key, "key of " + std::to_string(key.size()) +
                                      " bytes is longer than the limit of " +
                                      std::to_string(kMaxKeyBytes)));
    return;
  }
  ErasedProcessorFn fn = registry_.find(processor);
  if (fn == nullptr) {
    finishInvocation();
    done(Error(Errc::unknown_processor,
               "no processor named '" + std::string(processor) + "' is registered on this node"));
    return;
  }
  const PartitionId p = partitionOf(key, options_.partitions);
  workers_->post(p, [this, fn, key = std::move(key), args = std::move(args),
                     done = std::move(done)](PartitionStore& store) mutable {
    const Nanos now = clock_->now();
    MutableEntry entry(key, store.find(key, now));
    Result<std::string> result = fn(args, entry, now);
    if (result.ok()) store.apply(key, entry);  // a failed processor changes nothing
    done(std::move(result));
    finishInvocation();
  });
}

}  // namespace ingrid
