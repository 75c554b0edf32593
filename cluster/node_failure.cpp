// Failure detection's timers and messages: heartbeats between members, lease renewals, and the
// coordinator's verdict on a silent member. The rules are FailureDetector's (failure_detector.h)
// and PrimaryLease's (primary_lease.h); this file drives them with the node's time and network.
// Only the control plane's leader judges (its coordinator); a silent leader is replaced by a Raft
// election, and the new leader judges the old one.
#include <algorithm>
#include <chrono>
#include <utility>

#include "cluster/node_impl.h"
#include "cluster/watch_ring.h"

namespace ingrid {

void NodeImpl::startHeartbeats() {
  heartbeatTick();
  leaseTick();
  judgeTick();
}

void NodeImpl::judgeTick() {
  if (heartbeatsStopped_) return;
  // Only the leader judges: a member silent for failureTimeout is reported failed within a
  // twentieth of it (not a whole heartbeat interval) after. A member that does not lead stops
  // ticking (an idle member's most frequent wake-up otherwise); startJudging starts it again.
  if (!coordinator_ || memberId() == 0) {
    judging_ = false;
    return;
  }
  const auto now = steadyNow();
  discountStall(now);
  for (MemberId id : detector_.failed(now)) {
    coordinator_->memberFailed(
        id, "has sent no lease request or heartbeat answer for the failure timeout");
  }
  armJudgeTick();
}

void NodeImpl::armJudgeTick() {
  judging_ = true;
  judgeTimer_.expires_after(untilGridTick(detector_.timing().judgeInterval()));
  judgeTimer_.async_wait([this](std::error_code ec) {
    if (!ec) judgeTick();  // (a tick due when stop() cancelled it ends on the flag)
  });
}

void NodeImpl::leaseTick() {
  if (heartbeatsStopped_) return;
  const MemberId self = memberId();
  if (self != 0 && topology()->hasMember(self)) renewLease();
  leaseTimer_.expires_after(untilGridTick(renewInterval()));
  leaseTimer_.async_wait([this](std::error_code ec) {
    if (!ec) leaseTick();  // (a tick due when stop() cancelled it ends on the flag)
  });
}

void NodeImpl::heartbeatTick() {
  if (heartbeatsStopped_) return;
  const TopologyPtr t = topology();
  const MemberId self = memberId();
  const auto now = steadyNow();
  discountStall(now);
  // The silence of a member is measured from its last heartbeat answer (or, on the leader, its
  // last lease request; of the leader, its last lease grant too), or from when this node first
  // saw it listed (commitTopology).
  // Only the members after this one on the ring (watch_ring.h), each watched by a few, and the
  // members this one's requests recently went unanswered by (memberUnanswered: a primary's
  // backup, a forwarded call's primary), so that a partial partition between members that do not
  // watch each other is found once it holds a request up. The leader hears every member through
  // its lease requests (handleLease).
  const MemberId leader = knownLeader(*t);
  const std::vector<MemberId> watched =
      detector_.beginRound(*t, watchedBy(*t, self), self, leader, now);
  {
    std::lock_guard lock(suspectMu_);
    std::erase_if(suspectPostedAt_, [&](const auto& kv) { return !t->hasMember(kv.first); });
  }
  const std::string beat = encode(HeartbeatBody{self});
  for (const MemberId id : watched) {
    const MemberInfo& m = *t->member(id);
    // Silent for a failure timeout: this member may have been removed meanwhile (the others no
    // longer dial it, and may not answer it); a probe as a client finds out.
    if (transport_ && detector_.probeDue(m.id, now)) probeTopology(m);
    // The leader's lease grants (renewLease) answer for it: a leader heard within a heartbeat
    // interval (and half a renewal's, as a grant answers a tick of the same grid a little after
    // it) gets no heartbeat, so that it does not answer one per member per interval.
    if (m.id == leader &&
        detector_.answeredWithin(m.id, options_.heartbeatInterval + renewInterval() / 2, now)) {
      continue;
    }
    std::shared_ptr<Peer> peer = peerFor(m.id, m.address);
    if (!peer) continue;
    peer->request(MessageType::kHeartbeat, t->version, beat, options_.failureTimeout,
                  [this, id = m.id, address = m.address](Result<Frame> r) {
                    if (!r) return;
                    heard(id);
                    if (r->header.topologyVersion > topology()->version) catchUp(id, address);
                  });
  }
  heartbeatTimer_.expires_after(untilGridTick(options_.heartbeatInterval));
  heartbeatTimer_.async_wait([this](std::error_code ec) {
    // A tick already due when stop() cancelled the timer still runs without an error: the flag
    // (checked first thing in heartbeatTick) ends the loop.
    if (!ec) heartbeatTick();
  });
}

void NodeImpl::memberUnanswered(MemberId id) {
  const auto now = steadyNow();
  {
    // From workers' failed attempts, up to one per partition every 50 ms during a cut: one post
    // per member per heartbeat interval is enough.
    std::lock_guard lock(suspectMu_);
    auto [at, fresh] = suspectPostedAt_.try_emplace(id, now);
    if (!fresh && now - at->second < options_.heartbeatInterval) return;
    at->second = now;
  }
  asio::post(netIo_, [this, id] {
    if (heartbeatsStopped_ || id == memberId() || !topology()->hasMember(id)) return;
    detector_.suspect(id, steadyNow());
  });
}

MemberId NodeImpl::knownLeader(const Topology& t) const {
  // A voter hears of a new leader from Raft first. A member that does not vote hears nothing from
  // Raft (a spare), or what it heard while it voted: the leader of the last topology, which a new
  // leader commits at once, is news to it; Raft's leader only if of that term or a later one.
  MemberId leader = 0;
  if (control_) {
    const ControlStatus c = control_->status();
    if (c.term >= t.term) leader = c.leader;
  }
  if (leader == 0 || leader == memberId()) leader = t.leader;
  return leader;
}

void NodeImpl::startJudging() {
  // Brought up to date at the follower's cadence first, so that the first judge tick does not
  // take the gap since the last heartbeat or renewal for a stall.
  discountStall(steadyNow());
  // This member has just become the leader. It has truly heard only the members it watched (the
  // old leader among them) and has had answers from since it began watching them; every other
  // member is given a failure timeout from now to ask it for a lease, and until one does it is
  // not counted as a member it hears (the partial-partition judge leaves it to that timeout).
  detector_.startJudging(steadyNow());
  if (!judging_ && !heartbeatsStopped_) armJudgeTick();
}

void NodeImpl::renewLease() {
  const FailureDetector::SteadyTime sent = steadyNow();
  // Extends the lease to `leaseDuration` after the request was sent: the grant proves the leader
  // led after that instant. A refusal (or no answer) changes nothing: the lease runs out.
  // The lease is the shorter of this member's duration and the leader's (whose wait before it
  // promotes anyone is measured by its own).
  auto extend = [this, sent](std::chrono::milliseconds granted) {
    lease_.extend(sent, std::min(leaseDuration(), granted), steadyNow());
  };
  const TopologyPtr t = topology();
  if (coordinator_) {  // this member leads: grant itself through the same barrier
    coordinator_->requestLease(memberId(), incarnation_.load(), t->version,
                               [this, extend](Result<bool> r) {
                                 if (r.ok()) extend(leaseDuration());
                               });
    return;
  }
  const MemberId leader = knownLeader(*t);
  const MemberInfo* info = t->member(leader);
  std::shared_ptr<Peer> peer = info ? peerFor(leader, info->address) : nullptr;
  if (!peer) return;
  LeaseBody ask{memberId(), incarnation_.load(), t->version, {}};
  // A member that has never answered (one admitted whose join's answer was lost, which does not
  // know it is a member yet) is reported only after the failure timeout: before, the leader,
  // hearing it first, would judge it cut from this member and remove it as it starts.
  const auto now = steadyNow();
  discountStall(now);
  // Whom this member cannot reach: members it watches (its ring successors, and those its
  // requests recently went unanswered by), silent; one that has never answered only after the
  // failure timeout.
  ask.unreachable = detector_.unreachable(now);
  // Waits up to a lease for the grant (a slow barrier on a loaded leader still extends the lease
  // from this request's sending); the next ticks ask again meanwhile.
  peer->request(MessageType::kLease, t->version, encode(ask), leaseDuration(),
                [this, extend, leader, address = info->address](Result<Frame> r) {
                  if (!r) return;
                  heard(leader);  // in place of a heartbeat's answer (heartbeatTick)
                  // The leader has committed a topology this member has not installed (its
                  // TopologyCommit was lost): fetch it.
                  if (r->header.topologyVersion > topology()->version) catchUp(leader, address);
                  try {
                    extend(std::chrono::milliseconds(decode<LeaseGrant>(r->body).leaseMs));
                  } catch (const std::exception& e) {
                    log_.error({.member = knownMember(memberId()), .peer = leader},
                               "a lease grant does not decode: ", e.what());
                  }
                });
}

MemberStatusBody NodeImpl::ownStatus() const {
  MemberStatusBody s;
  const TopologyPtr t = topology();
  s.memberId = memberId();
  s.topologyVersion = t->version;
  const auto left = lease_.leftAt(steadyNow());
  s.leaseLeftMs = static_cast<std::int64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(left).count());
  if (control_) {
    const ControlStatus c = control_->status();
    // A member that does not vote hears of terms from the topologies alone (Raft sends it
    // nothing): a recovery's plan must be above every term in use.
    s.term = std::max(c.term, t->term);
    // The leader a voter's Raft server follows (0 while there is none). A member that does not
    // vote hears nothing from Raft: the leader of its latest topology, while a grant of that
    // leader's runs (its proof the leader lives); 0 once it has run out.
    const bool votes = std::find(c.voters.begin(), c.voters.end(), c.self) != c.voters.end();
    s.leader = votes || c.isLeader ? c.leader : left.count() > 0 ? knownLeader(*t) : 0;
    s.isLeader = c.isLeader;
    s.voters = c.voters;
    s.standbys = c.standbys;  // every member that does not vote: standbys and spares
    s.standbys.insert(s.standbys.end(), c.spares.begin(), c.spares.end());
    std::sort(s.standbys.begin(), s.standbys.end());
  }
  if (coordinator_) {
    s.suspects = coordinator_->suspects();
    s.wantedVoters = votersOf(committed_->members, options_.voters);  // as the control plane's
  }
  s.leaseLapses = lease_.lapses();
  for (PartitionId p = 0; p < options_.partitions; ++p) {
    if (t->table.primary(p) == s.memberId && data_->fenced(p)) s.fenced.push_back(p);
    if (t->table.primary(p) == s.memberId && data_->backupBehind(p)) s.behind.push_back(p);
    if (s.memberId != 0 && t->table.isOwner(p, s.memberId) && !data_->complete(p)) {
      s.incomplete.push_back(p);
    }
  }
  s.rejoining = rejoining_.load() || restored_.load() != 0;  // not a member under this id
  return s;
}

void NodeImpl::handleLease(const std::shared_ptr<Connection>& conn, Frame frame) {
  LeaseBody ask = decode<LeaseBody>(frame.body);
  if (!coordinator_) {  // admitted: from the member it names
    conn->replyError(frame.header,
                     Error(Errc::unavailable, "member " + std::to_string(memberId()) +
                                                  " does not lead the control plane"));
    return;
  }
  // The leader hears every member through its lease requests (the heartbeats go around the ring):
  // every member of the committed topology, which a restored Raft server that leads (it installs
  // none) judges too.
  if (committed_->hasMember(ask.memberId)) heard(ask.memberId);
  coordinator_->reportUnreachable(ask.memberId, ask.unreachable);
  coordinator_->requestLease(
      ask.memberId, ask.incarnation, ask.topologyVersion,
      [this, conn, header = frame.header](Result<bool> r) {
        if (r) {
          const auto ms = static_cast<std::uint32_t>(leaseDuration().count());
          conn->reply(header, MessageType::kLease, topology()->version, encode(LeaseGrant{ms}));
        } else {
          conn->replyError(header, r.error());
        }
      });
}

void NodeImpl::probeTopology(const MemberInfo& m) {
  // As a client (proving the client secret if there is one), not as this member: the member
  // asked does not take the connection for its link to this one, which it may be redialing.
  auto probe = Peer::create(*transport_, m.address, clientLinkOptions(options_.clientSecret));
  probe->request(
      MessageType::kGetTopology, topology()->version, {}, options_.failureTimeout,
      [this, probe](Result<Frame> r) {
        probe->close();
        if (!r) return;
        try {
          commitTopology(std::make_shared<Topology>(decode<TopologyBody>(r->body).topology));
        } catch (const std::exception&) {
          // Undecodable: the next probe, a failure timeout on, asks again.
        }
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
          // A version committed by the control plane that this member's log has not brought
          // (it was removed from the configuration, or is catching up): install it.
          commitTopology(std::make_shared<Topology>(decode<TopologyBody>(r->body).topology));
        } catch (const std::exception&) {
          // An undecodable topology is ignored; the next heartbeat tries again.
        }
      });
}

}  // namespace ingrid
