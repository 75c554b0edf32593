// NodeImpl and its control plane: starting it (startControl), and its ControlHost (ControlRole,
// control_plane.h), which the Raft server calls from its thread: each call only posts to the
// network thread (Raft messages out, committed topologies in, leadership made and lost: the
// Coordinator's life), where NodeImpl acts on it.
#include "cluster/node_impl.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace ingrid {

Result<bool> NodeImpl::startControl(MemberId self, bool bootstrap,
                                    std::optional<ControlRecovery> recovery) {
  if (control_) return true;
  ControlPlaneOptions o;
  o.self = self;
  o.address = selfAddress_;
  o.voters = options_.voters;
  if (dataDir_) o.dataDir = dataDir_->raftDir();
  o.electionTimeout = electionTimeout();
  o.heartbeatInterval = std::max(std::chrono::milliseconds(10), electionTimeout() / 2);
  control_ = std::make_unique<ControlPlane>(controlRole_, o, log_);
  Result<bool> started = control_->start(bootstrap, std::move(recovery));
  if (!started) control_.reset();
  return started;
}

void NodeImpl::ControlRole::sendControl(MemberId to, const std::string& address,
                                        std::string bytes) {
  asio::post(node_.netIo_, [&node = node_, to, address, bytes = std::move(bytes)]() mutable {
    node.sendRaft(to, address, std::move(bytes));
  });
}

void NodeImpl::ControlRole::topologyCommitted(TopologyPtr t) {
  asio::post(node_.netIo_, [&node = node_, t = std::move(t)]() mutable {
    node.commitTopology(t);
    node.announceTopology(t);
  });
}

void NodeImpl::ControlRole::leadershipChanged(bool leader, std::uint64_t term) {
  asio::post(node_.netIo_, [&node = node_, leader, term] { node.leadershipNews(leader, term); });
}

void NodeImpl::ControlRole::leaderLearnt(MemberId leader, std::uint64_t /*term*/) {
  asio::post(node_.netIo_, [&node = node_, leader] { node.leaderNews(leader); });
}

void NodeImpl::sendRaft(MemberId to, const std::string& address, std::string bytes) {
  if (state_.load() == kStopped || heartbeatsStopped_) return;
  // A member that left may still lead the control plane, handing it over (leave()): its link
  // lasts a request's deadline after it left the topology (syncPeers), and is used rather than a
  // new one.
  std::shared_ptr<Peer> peer;
  if (auto d = departed_.find(to); d != departed_.end() && !topology()->hasMember(to)) {
    peer = d->second;
  } else {
    peer = peerFor(to, address);
  }
  if (!peer) return;  // no link yet (the other side dials): raft sends again
  // One-way: Raft's answers are messages of their own, and it resends what is lost.
  peer->notify(MessageType::kRaft, topology()->version, std::move(bytes),
               std::max(electionTimeout(), std::chrono::milliseconds(100)));
}

void NodeImpl::leadershipNews(bool leader, std::uint64_t term) {
  if (heartbeatsStopped_) return;
  if (!leader) {
    coordinator_.reset();
    return;
  }
  if (!control_ || !control_->isLeader() || control_->term() != term) return;  // stale news
  if (const MemberId was = restored_.load(); was != 0) {
    log_.info({.member = was, .term = term}, selfAddress_, " (restored member ", was,
              "'s Raft server, not a member) leads the control plane in term ", term,
              ": it removes the members whose processes restarted, its own last, then hands "
              "leadership to a member");
  }
  coordinator_ = std::make_unique<Coordinator>(coordinatorRole_, log_);
  coordinator_->start();
  startJudging();
  // Its own lease at once: the old leader's grant may be about to run out.
  if (memberId() != 0 && topology()->hasMember(memberId())) renewLease();
}

void NodeImpl::leaderNews(MemberId leader) {
  if (heartbeatsStopped_ || leader == memberId()) return;
  // A new leader: ask it for the lease now rather than at the next tick, before the grant of the
  // old one runs out.
  if (memberId() != 0 && topology()->hasMember(memberId())) renewLease();
}

}  // namespace ingrid
