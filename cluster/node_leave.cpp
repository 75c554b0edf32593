// NodeImpl leaving its cluster gracefully (stop()): asks the coordinator to remove this member,
// waits until it is gone, and hands the control plane's leadership over.
#include "cluster/node_impl.h"

#include <chrono>
#include <future>

namespace ingrid {
namespace {

using SteadyClock = std::chrono::steady_clock;

}  // namespace

void NodeImpl::leave() {
  const auto deadline = steadyNow() + options_.leaveTimeout;
  const MemberId self = memberId();
  // Gone once a topology without this member is committed (and installed here).
  auto gone = [this, self] { return !topology()->hasMember(self); };
  while (!gone() && steadyNow() < deadline) {
    if (topology()->members.size() <= 1) return;  // last member: nothing to hand over
    asio::post(netIo_, [this, self] {
      const TopologyPtr t = topology();
      if (t->coordinator() == self) {
        if (coordinator_) coordinator_->requestLeave(self);
        return;
      }
      const MemberInfo* c = t->member(t->coordinator());
      if (auto peer = c ? peerFor(c->id, c->address) : nullptr) {
        peer->request(MessageType::kLeave, t->version, encode(LeaveBody{self}),
                      options_.requestTimeout, [](Result<Frame>) {});
      }
    });
    waitUntil(steadyNow() + std::chrono::milliseconds(2000), gone);
  }
  // A leader that left hands the control plane to another voter (ControlPlane::reconcile); wait
  // a little for that, so that the others need not wait for an election.
  const auto handOver = steadyNow() + 2 * electionTimeout();
  while (steadyNow() < handOver) {
    std::promise<bool> leading;
    auto answer = leading.get_future();
    asio::post(netIo_, [this, &leading] { leading.set_value(control_ && control_->isLeader()); });
    waitFor(answer);
    if (!answer.get()) break;
    // A bounded poll: leadership has no condition to wait on.
    pauseUntil(steadyNow() + std::chrono::milliseconds(10));
  }
}

}  // namespace ingrid
