// NodeImpl's dispatch of incoming requests on the member port: admission first (admission.h,
// for both ports), then the part that serves each message; and the data plane's kSynced reports,
// sent to the coordinator.
#include "cluster/node_impl.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

namespace ingrid {

bool NodeImpl::admitted(const std::shared_ptr<Connection>& conn, const Frame& frame, Port port) {
  SenderFacts sender{conn->peerId, conn->clientAuthenticated, conn->overLimit, std::nullopt};
  if (conn->peerId != 0 && (frame.header.type == MessageType::kReplicate ||
                            frame.header.type == MessageType::kSnapshot)) {
    const TopologyPtr t = topology();
    const MemberInfo* from = t->member(conn->peerId);
    const MemberInfo* self = t->member(memberId());
    if (from && self) {
      sender.replicaPort =
          replicatesOnShardPorts(!from->shardPorts.empty(), *self) ? Port::kShard : Port::kMember;
    }
  }
  const AdmissionPolicy policy{!options_.clientSecret.empty(), !options_.clusterSecret.empty(),
                               options_.maxConnections};
  const Admission a = admit(sender, frame.header.type, frame.body, port, policy);
  if (a) return true;
  refusals_[static_cast<std::size_t>(a.verdict) - 1].fetch_add(1, std::memory_order_relaxed);
  const std::string why =
      describeRefusal(a, frame.header.type, port, sender, conn->remote(),
                      "member " + std::to_string(memberId()) + " (" + selfAddress_ + ")", policy);
  switch (a.verdict) {
    case Verdict::kOverLimit:
      conn->refuse(Error(Errc::overloaded, why));
      break;
    case Verdict::kUnauthenticated:
      conn->refuse(Error(Errc::unauthenticated, why));
      break;
    case Verdict::kWrongPort:
      conn->replyError(
          frame.header,
          Error(Errc::protocol_error, port == Port::kShard
                                          ? why + "; send it to the member's port " + selfAddress_
                                          : why));
      break;
    case Verdict::kWrongPath:
      conn->replyError(frame.header, Error(Errc::protocol_error, why));
      break;
    case Verdict::kMembersOnly:
    case Verdict::kForgedSender:
      if (a.verdict == Verdict::kForgedSender) {
        log_.warn({.member = knownMember(memberId()), .peer = knownMember(sender.member)}, why);
      }
      conn->replyError(frame.header, Error(Errc::unauthenticated, why));
      break;
    case Verdict::kAdmit:
      break;
  }
  return false;
}

void NodeImpl::onRequest(const std::shared_ptr<Connection>& conn, Frame frame) {
  const FrameHeader header = frame.header;
  if (!admitted(conn, frame, Port::kMember)) return;
  try {
    switch (header.type) {
      case MessageType::kHello:
        return handleHello(conn, std::move(frame));
      case MessageType::kAuth:
        return handleAuth(conn, std::move(frame));
      case MessageType::kJoin:
        return handleJoin(conn, std::move(frame));
      case MessageType::kInvoke:
        return data_->handleInvoke(conn, std::move(frame));
      case MessageType::kReplicate:
        return data_->handleReplicate(conn, std::move(frame));
      case MessageType::kSnapshot:
        return data_->handleSnapshot(conn, std::move(frame));
      case MessageType::kGetTopology:
        if (frame.body.empty()) {
          conn->reply(header, header.type, topology()->version, encode(TopologyBody{*topology()}));
        } else {  // a watch: answered when a newer topology is installed, or its wait ran out
          const WatchTopologyBody watch = decode<WatchTopologyBody>(frame.body);
          // Answered before the connection's idle timeout would close it.
          auto wait = std::chrono::milliseconds(watch.waitMs);
          if (options_.idleTimeout.count() > 0) wait = std::min(wait, options_.idleTimeout / 2);
          watchers_.hold(conn, header, watch.after, wait, topology());
        }
        return;
      case MessageType::kHeartbeat:  // the reply's header carries this member's topology version
        conn->reply(header, header.type, topology()->version, {});
        return;
      case MessageType::kTopologyPrepare:
        return handlePrepare(conn, std::move(frame));
      case MessageType::kRaft:  // admitted: from the member it names
        if (control_) control_->deliver(std::move(frame.body));
        // A one-way frame gets no reply; one sent while its link was coming up gets an empty one.
        if (!header.isOneWay()) conn->reply(header, MessageType::kRaft, topology()->version, {});
        return;
      case MessageType::kLease:
        return handleLease(conn, std::move(frame));
      case MessageType::kStatus:
        conn->reply(header, header.type, topology()->version, encode(ownStatus()));
        return;
      case MessageType::kRecover:
        return handleRecover(conn, std::move(frame));
      case MessageType::kTopologyCommit:  // admitted: from the leader that committed it
        return handleTopologyCommit(conn, std::move(frame));
      case MessageType::kSynced: {
        const SyncedBody s = decode<SyncedBody>(frame.body);
        if (!coordinator_) {  // the reporter retries at the coordinator its topology names
          conn->replyError(header, Error(Errc::unavailable, "member " + std::to_string(memberId()) +
                                                                " is not the coordinator"));
          return;
        }
        coordinator_->onSynced(s.partition, s.member, s.topologyVersion);
        conn->reply(header, MessageType::kSynced, topology()->version, {});
        return;
      }
      case MessageType::kLeave: {
        const LeaveBody l = decode<LeaveBody>(frame.body);
        if (!coordinator_) {
          conn->reply(header, MessageType::kRedirect, topology()->version,
                      encode(TopologyBody{*topology()}));
          return;
        }
        coordinator_->requestLeave(l.memberId);  // admitted: the leaving member's own link
        conn->reply(header, MessageType::kLeave, topology()->version, {});
        return;
      }
      case MessageType::kRedirect:
        break;
    }
    conn->replyError(header, Error(Errc::protocol_error, std::string(messageTypeName(header.type)) +
                                                             " is not a request this member takes"
                                                             " on this connection"));
  } catch (const std::exception& e) {
    conn->replyError(header,
                     Error(Errc::malformed_message, std::string(messageTypeName(header.type)) +
                                                        " body does not decode: " + e.what()));
  }
}

void NodeImpl::onClosed(const std::shared_ptr<Connection>&, const Error&) {}

void NodeImpl::reportSynced(PartitionId p, MemberId member, std::uint64_t version) {
  const TopologyPtr topo = topology();
  const MemberId coordinatorId = topo->coordinator();
  if (coordinatorId == memberId()) {
    if (coordinator_) coordinator_->onSynced(p, member, version);
    return;
  }
  const MemberInfo* info = topo->member(coordinatorId);
  std::shared_ptr<Peer> peer = info ? peerFor(coordinatorId, info->address) : nullptr;
  if (!peer) return;
  peer->request(MessageType::kSynced, topo->version, encode(SyncedBody{p, member, version}),
                options_.requestTimeout, [this, p, member, version](Result<Frame> r) {
                  if (r) return;
                  // Lost on the way (or the coordinator changed): report again while the
                  // replica is still awaited and this node still its primary.
                  auto timer = std::make_shared<Timer>(netIo_, std::chrono::milliseconds(100));
                  timer->async_wait([this, timer, p, member, version](std::error_code ec) {
                    const TopologyPtr t = topology();
                    if (ec || state_.load() == kStopped || t->table.primary(p) != memberId() ||
                        t->syncingReplica(p, member) == nullptr) {
                      return;
                    }
                    reportSynced(p, member, version);
                  });
                });
}

}  // namespace ingrid
