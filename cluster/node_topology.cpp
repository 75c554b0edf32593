// NodeImpl installing topologies: a leader's Prepare (fence the partitions about to be lost and
// drain their replication), and the commit of each topology the control plane decides, handed to
// the data plane, the links and the watchers. Network thread.
#include "cluster/node_impl.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ingrid {

void NodeImpl::prepareTopology(const Topology& next, UniqueFunction<void()> done) {
  // The drain waits at most a failure timeout; a fence whose topology is not committed within
  // twice that (its leader was deposed, or failed) lifts, and the partitions serve again.
  data_->prepare(*topology(), next, options_.failureTimeout, 2 * options_.failureTimeout,
                 std::move(done));
}

void NodeImpl::handlePrepare(const std::shared_ptr<Connection>& conn, Frame frame) {
  const Topology next = decode<TopologyBody>(frame.body).topology;
  const TopologyPtr cur = topology();
  // (A member that does not vote knows the terms of its topologies; its Raft term stands still.)
  const std::uint64_t term = std::max(control_ ? control_->term() : 0, cur->term);
  // Only the leader of the current term may fence: a deposed or paused leader's Prepare (an
  // older term), or one for a topology that is not newer than ours, changes nothing.
  if (next.term < term || next.version <= cur->version || next.leader == 0 ||
      conn->peerId != next.leader) {
    conn->replyError(
        frame.header,
        Error(Errc::unavailable,
              "member " + std::to_string(memberId()) + " refuses Prepare of v" +
                  std::to_string(next.version) + " (term " + std::to_string(next.term) +
                  ", from member " + std::to_string(conn->peerId) + "): it is at v" +
                  std::to_string(cur->version) + ", term " + std::to_string(term)));
    return;
  }
  if (auto why = successorInvalidReason(*cur, next)) {
    conn->replyError(frame.header,
                     Error(Errc::invalid_configuration,
                           "member " + std::to_string(memberId()) + " refuses Prepare: " + *why));
    return;
  }
  prepareTopology(next, [conn, header = frame.header, this] {
    conn->reply(header, MessageType::kTopologyPrepare, topology()->version, {});
  });
}

void NodeImpl::announceTopology(const TopologyPtr& t) {
  if (heartbeatsStopped_ || !control_ || !control_->isLeader() ||
      t->leader != control_->status().self || t->version < committed_->version) {
    return;  // not this leader's (an entry of an earlier term, replayed), or superseded
  }
  const std::string body = encode(TopologyBody{*t});
  for (const MemberInfo& m : t->members) {
    std::shared_ptr<Peer> peer = peerFor(m.id, m.address);
    if (!peer) continue;
    peer->request(MessageType::kTopologyCommit, t->version, body, options_.requestTimeout,
                  [](Result<Frame>) {});
  }
}

void NodeImpl::handleTopologyCommit(const std::shared_ptr<Connection>& conn, Frame frame) {
  auto next = std::make_shared<Topology>(decode<TopologyBody>(frame.body).topology);
  commitTopology(std::move(next));
  conn->reply(frame.header, MessageType::kTopologyCommit, topology()->version, {});
}

void NodeImpl::commitTopology(TopologyPtr next) {
  const TopologyPtr cur = topology();
  if (next->version <= committed_->version) return;  // already installed
  const MemberId leaderWas = committed_->leader;
  if (auto why = successorInvalidReason(*committed_, *next)) {
    log_.warn({.member = knownMember(memberId()), .term = next->term}, "member ", memberId(), " (",
              selfAddress_, ") ignores ", *why);
    return;
  }
  committed_ = next;
  {
    std::lock_guard lock(committedMu_);
    committedAddresses_.clear();
    for (const auto& m : next->members) committedAddresses_.push_back(m.address);
  }
  if (memberId() == 0) {  // admitted, but the join reply has not arrived yet
    for (const auto& m : next->members) {
      if (m.address == selfAddress_ && m.incarnation == incarnation_.load()) {
        selfId_.store(m.id, std::memory_order_release);
      }
    }
  }
  const MemberId self = memberId();
  // This process is the member a topology lists under its id only with its incarnation: an
  // entry of an earlier one is the member whose Raft state it restored (NodeOptions::dataDir),
  // whose buckets died with it. Such a topology is never installed: the data plane would take
  // that member's place, and acknowledge updates for partitions it holds nothing of.
  const auto listsMe = [&](const Topology& t) {
    const MemberInfo* m = t.member(self);
    return m != nullptr && m->incarnation == incarnation_.load();
  };
  // A joining member replays the log from its start: topologies from before it was admitted
  // (that list neither it nor the members it links to yet) are history, not news.
  if (!listsMe(*cur) && !listsMe(*next)) {
    // A restored Raft server may lead meanwhile: it judges the members by their lease requests,
    // as any leader does, from when it first saw them listed.
    if (restored_.load() != 0) {
      const auto listedAt = steadyNow();
      for (const auto& m : next->members) {
        if (m.id != self) detector_.listed(m.id, listedAt);
      }
    }
    return;
  }
  {
    std::lock_guard lock(topoMu_);
    topology_.store(next);
    topoNotified_.fetch_add(1);
  }
  topoCv_.notify_all();
  watchers_.publish(next);
  // A member's silence is measured from when this node first saw it listed (not from its next
  // heartbeat tick, up to an interval later), until it answers a heartbeat.
  const auto listedAt = steadyNow();
  for (const auto& m : next->members) {
    if (m.id != self) detector_.listed(m.id, listedAt);
  }
  if (options_.onTopology) options_.onTopology(*next);
  // A new leader commits a topology of its own at once: a member that does not vote hears of it
  // this way, and asks it for a lease before the old leader's grant runs out. A member listed
  // for the first time (a joiner; the first member, whose leadership came before its first
  // topology) asks at once too, not at its next lease tick.
  const bool firstListed = self != 0 && next->hasMember(self) && !cur->hasMember(self);
  if (((next->leader != leaderWas && next->leader != self) || firstListed) && self != 0 &&
      next->hasMember(self)) {
    renewLease();
  }
  syncPeers(*next);
  retainReplicaLinks(next);
  if (self != 0 && cur->hasMember(self) && !next->hasMember(self) && !stopCalled_.load() &&
      !rejoining_.exchange(true)) {
    // Removed while alive (paused, or cut off, past the failure timeout): the others promoted
    // its backups long ago. It never acts on its old view again: it joins anew, empty.
    log_.warn({.member = self, .term = next->term}, "member ", self, " (", selfAddress_,
              ") was removed from the cluster at topology v", next->version,
              "; joining again as a new member");
    std::vector<std::string> seeds;
    for (const auto& m : next->members) seeds.push_back(m.address);
    seeds.insert(seeds.end(), options_.seeds.begin(), options_.seeds.end());
    std::lock_guard lock(rejoinMu_);
    if (stopCalled_.load()) {
      rejoining_.store(false);
    } else if (sim_) {
      // A baton thread, in this member's scope; an earlier one (finished) is joined by stop().
      simRejoins_.push_back(sim_->spawn([this, sim = sim_, seeds = std::move(seeds)] {
        SimulatedMemberScope scope(sim);
        rejoin(seeds);
      }));
    } else {
      if (rejoinThread_.joinable()) rejoinThread_.join();  // an earlier rejoin, finished
      rejoinThread_ = std::thread([this, seeds = std::move(seeds)] { rejoin(seeds); });
    }
  }
  data_->install(cur, next);
}

}  // namespace ingrid
