// NodeImpl::CoordinatorRole, the node's side of the control plane leader's coordinator: the
// CoordinatorHost (control/coordinator_host.h): requests to members, Prepare here, proposals and
// barriers on the control plane, timers; and the first topology of a new cluster. Network thread.
#include "cluster/node_impl.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

namespace ingrid {

std::shared_ptr<Topology> NodeImpl::firstTopology() const {
  auto t = std::make_shared<Topology>();
  t->version = 1;
  t->members.push_back(
      MemberInfo{1, selfAddress_, incarnation_.load(), shardPorts_, options_.zone});
  t->table = Topology::balancedFor(options_.partitions, t->members, options_.backups);
  t->backups = options_.backups;
  t->dedupWindowMs = static_cast<std::uint32_t>(options_.dedupWindow.count());
  t->nextMemberId = 2;
  return t;
}

bool NodeImpl::CoordinatorRole::onNetworkThread() const {
  return node_.netIo_.get_executor().running_in_this_thread();
}

std::uint64_t NodeImpl::CoordinatorRole::controlTerm() const {
  return node_.control_ ? node_.control_->term() : 0;
}

void NodeImpl::CoordinatorRole::sendToMember(const MemberInfo& member, MessageType type,
                                             std::string body, Connection::ResponseHandler done) {
  std::shared_ptr<Peer> peer = node_.peerFor(member.id, member.address);
  if (!peer) {
    done(Error(Errc::unreachable, "no link to member " + std::to_string(member.id)));
    return;
  }
  // Bounded by the failure timeout: a member silent that long is about to be declared failed, and
  // must not hold up a change meanwhile.
  peer->request(type, node_.topology()->version, std::move(body), node_.options_.failureTimeout,
                std::move(done));
}

void NodeImpl::CoordinatorRole::prepareLocally(const Topology& next, UniqueFunction<void()> done) {
  node_.prepareTopology(next, std::move(done));
}

void NodeImpl::CoordinatorRole::proposeTopology(std::shared_ptr<Topology> next,
                                                UniqueFunction<void(Result<bool>)> done) {
  if (!node_.control_) {
    done(Error(Errc::shutting_down, "no control plane"));
    return;
  }
  auto shared = std::make_shared<UniqueFunction<void(Result<bool>)>>(std::move(done));
  node_.control_->propose(std::move(next), [this, shared](Result<bool> r) {
    // After the commit itself (posted earlier by the same thread): the topology is installed.
    asio::post(node_.netIo_, [shared, r = std::move(r)]() mutable { (*shared)(std::move(r)); });
  });
}

void NodeImpl::CoordinatorRole::runAfter(std::chrono::milliseconds delay,
                                         UniqueFunction<void()> fn) {
  auto timer = std::make_shared<Timer>(node_.netIo_, delay);
  auto shared = std::make_shared<UniqueFunction<void()>>(std::move(fn));
  timer->async_wait([timer, shared](std::error_code ec) {
    if (!ec) (*shared)();
  });
}

void NodeImpl::CoordinatorRole::barrier(UniqueFunction<void(Result<bool>)> done) {
  if (!node_.control_) {
    done(Error(Errc::shutting_down, "no control plane"));
    return;
  }
  auto shared = std::make_shared<UniqueFunction<void(Result<bool>)>>(std::move(done));
  node_.control_->barrier([this, shared](Result<bool> r) {
    asio::post(node_.netIo_, [shared, r = std::move(r)]() mutable { (*shared)(std::move(r)); });
  });
}

std::chrono::milliseconds NodeImpl::CoordinatorRole::leaseWait() const {
  // Clock rates are assumed to differ by less than 10% (steady clocks differ by parts per
  // million); the margin covers the timer's own lateness.
  return node_.leaseDuration() + node_.leaseDuration() / 10 + std::chrono::milliseconds(10);
}

}  // namespace ingrid
