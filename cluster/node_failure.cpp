// Failure detection: heartbeats between members, the coordinator's verdict on a silent member,
// and the next-oldest member taking the coordinator role over when the coordinator falls silent.
#include <algorithm>
#include <chrono>

#include <ingrid/cluster/node_impl.h>

namespace ingrid {

using SteadyClock = std::chrono::steady_clock;

void NodeImpl::startHeartbeats() { heartbeatTick(); }

void NodeImpl::heartbeatTick() {
  if (heartbeatsStopped_) return;
  const TopologyPtr t = topology();
  const MemberId self = memberId();
  const auto now = SteadyClock::now();
  // The silence of a member is measured from when this node first saw it listed.
  std::erase_if(lastHeard_, [&](const auto& kv) { return !t->hasMember(kv.first); });
  const std::string beat = encode(HeartbeatBody{self});
  for (const MemberInfo& m : t->members) {
    if (m.id == self) continue;
    lastHeard_.try_emplace(m.id, now);
    std::shared_ptr<Peer> peer = peerFor(m.id, m.address);
    if (!peer) continue;
    peer->request(MessageType::kHeartbeat, t->version, beat, options_.failureTimeout,
                  [this, id = m.id, address = m.address](Result<Frame> r) {
                    if (!r) return;
                    if (auto it = lastHeard_.find(id); it != lastHeard_.end()) {
                      it->second = SteadyClock::now();
                    }
                    newestSeen_ = std::max(newestSeen_, r->header.topologyVersion);
                    if (r->header.topologyVersion > topology()->version) catchUp(id, address);
                  });
  }
  if (self != 0 && t->hasMember(self)) {
    std::vector<MemberId> silent;
    for (const auto& [id, heard] : lastHeard_) {
      if (now - heard > options_.failureTimeout) silent.push_back(id);
    }
    auto isSilent = [&](MemberId id) {
      return std::find(silent.begin(), silent.end(), id) != silent.end();
    };
    // The coordinator judges; if it is silent itself, the oldest member still answering takes
    // the role over (every member older than this one is silent).
    const bool olderAnswering = std::any_of(t->members.begin(), t->members.end(), [&](auto& m) {
      return m.id < self && !isSilent(m.id);
    });
    // A takeover plans from this node's topology: only once it is as new as any answering
    // member's, or its versions would collide with ones the old coordinator already issued.
    const bool caughtUp = newestSeen_ <= t->version;
    if (!silent.empty() && (coordinator_ || (!olderAnswering && caughtUp))) {
      if (!coordinator_) {
        coordinator_ = std::make_unique<Coordinator>(static_cast<CoordinatorHost&>(*this));
      }
      std::sort(silent.begin(), silent.end());
      for (MemberId id : silent) coordinator_->memberFailed(id);
    }
  }
  heartbeatTimer_.expires_after(options_.heartbeatInterval);
  heartbeatTimer_.async_wait([this](std::error_code ec) {
    // A tick already due when stop() cancelled the timer still runs without an error: the flag
    // (checked first thing in heartbeatTick) ends the loop.
    if (!ec) heartbeatTick();
  });
}

void NodeImpl::catchUp(MemberId from, const std::string& address) {
  if (catchingUp_) return;
  std::shared_ptr<Peer> peer = peerFor(from, address);
  if (!peer) return;
  catchingUp_ = true;
  peer->request(
      MessageType::kGetTopology, topology()->version, {}, options_.requestTimeout,
      [this](Result<Frame> r) {
        catchingUp_ = false;
        if (!r) return;
        try {
          // A version committed elsewhere: every member it kept has prepared for it.
          commitTopology(std::make_shared<Topology>(decode<TopologyBody>(r->body).topology));
        } catch (const std::exception&) {
          // An undecodable topology is ignored; the next heartbeat tries again.
        }
      });
}

}  // namespace ingrid
