#include <ingrid/node.h>

#include <future>

#include "cluster/node_impl.h"

namespace ingrid {

Node::Node(NodeOptions options, ProcessorRegistry registry)
    : impl_(std::make_unique<NodeImpl>(std::move(options), std::move(registry))),
      completionPool_(
          impl_->options().completionThreads == 0 ? 1 : impl_->options().completionThreads) {}

Node::~Node() { stop(); }

Result<bool> Node::start() { return impl_->start(); }

void Node::stop() {
  impl_->stop();
  completionsClosed_.store(true, std::memory_order_release);
  completionPool_.join();
}

void Node::invokeRaw(std::string key, std::string_view processor, std::string args,
                     RawCompletion done) {
  impl_->invokeRaw(std::move(key), processor, std::move(args), std::move(done));
}

Error Node::wouldDeadlock(std::string_view processor) {
  return Error(Errc::would_deadlock,
               "invoke('" + std::string(processor) +
                   "') called on a partition worker thread; use invokeAsync there");
}

const NodeOptions& Node::options() const noexcept { return impl_->options(); }
const ProcessorRegistry& Node::registry() const noexcept { return impl_->registry(); }
bool Node::running() const noexcept { return impl_->running(); }
MemberId Node::memberId() const noexcept { return impl_->memberId(); }
std::string Node::listenAddress() const { return impl_->listenAddress(); }
TopologyPtr Node::topology() const { return impl_->topology(); }
std::uint64_t Node::TEST_entryCount() { return impl_->TEST_entryCount(); }
std::uint64_t Node::reclaimedCount() const noexcept { return impl_->reclaimedCount(); }
std::vector<std::pair<std::string, Entry>> Node::TEST_partitionEntries(PartitionId p) {
  return impl_->TEST_partitionEntries(p);
}
std::uint64_t Node::TEST_partitionSeq(PartitionId p) { return impl_->TEST_partitionSeq(p); }
std::uint64_t Node::TEST_executed() const noexcept { return impl_->TEST_executed(); }
std::uint64_t Node::TEST_barriers() const noexcept { return impl_->TEST_barriers(); }
std::uint64_t Node::TEST_parkedCopies() const noexcept { return impl_->TEST_parkedCopies(); }
void Node::TEST_crash() { impl_->crash(); }

// --- NodeImpl test hooks ---

std::vector<std::pair<std::string, Entry>> NodeImpl::TEST_partitionEntries(PartitionId p) {
  if (!running()) return {};  // no worker would answer
  std::promise<std::vector<std::pair<std::string, Entry>>> got;
  auto answer = got.get_future();
  workers_->post(p, [this, &got](PartitionStore& store) {
    std::vector<std::pair<std::string, Entry>> out;
    store.forEach(clock_->now(), [&](std::string_view k, EntryView e) {
      out.emplace_back(std::string(k), Entry{std::string(e.value), e.expiresAt});
    });
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    got.set_value(std::move(out));
  });
  return answer.get();
}

std::uint64_t NodeImpl::TEST_partitionSeq(PartitionId p) {
  if (!running()) return 0;  // no worker would answer
  std::promise<std::uint64_t> got;
  auto answer = got.get_future();
  workers_->post(p, [this, p, &got](PartitionStore&) { got.set_value(replicas_[p].seq); });
  return answer.get();
}

}  // namespace ingrid

namespace ingrid {

bool Node::onPartitionWorker() noexcept { return PartitionWorkers::onAnyWorkerThread(); }

}  // namespace ingrid
