// NodeImpl's links to other members: a Peer per member (made on demand or adopted when the member
// dials), their Hello and Auth as this member, and keeping them to the installed topology.
// Network thread.
#include "cluster/node_impl.h"

#include <memory>
#include <string>
#include <utility>

#include "cluster/transport/member_auth.h"

namespace ingrid {

std::shared_ptr<Peer> NodeImpl::peerFor(MemberId id, const std::string& address) {
  return linkTo(id, address, /*dialedByThem=*/false);
}

std::shared_ptr<Peer> NodeImpl::linkTo(MemberId id, const std::string& address, bool dialedByThem) {
  const MemberId self = memberId();
  if (id == 0 || id == self || !transport_) return nullptr;
  if (auto it = peers_.find(id); it != peers_.end()) return it->second;
  PeerOptions o = memberLinkOptions(id);
  o.dial = self != 0 && self < id;  // one connection per pair: the smaller id dials
  // A link that waits to be dialed, to a member that is not (or no longer) in our topology,
  // would only queue requests until their deadlines: that member will not dial us. The caller
  // routes again instead (a departed primary's partitions have moved).
  if (!o.dial && !dialedByThem && !topology()->hasMember(id)) return nullptr;
  o.failQueuedOnDialError = true;  // a member that refuses connections is gone: route elsewhere
  auto peer = Peer::create(*transport_, address, std::move(o));
  peers_.emplace(id, peer);
  return peer;
}

PeerOptions NodeImpl::shardLinkOptions(MemberId id) {
  PeerOptions o = memberLinkOptions(id);
  // Not sent: a call is routed again (to the member port meanwhile); an update or a snapshot is
  // tried again on the same link.
  o.failQueuedOnDialError = true;
  o.dialOnDemand = true;
  return o;
}

PeerOptions NodeImpl::memberLinkOptions(MemberId id) {
  PeerOptions o;
  o.peerId = id;
  const std::string& secret = options_.clusterSecret;
  o.helloBody = [this, &secret] {
    HelloBody hello{HelloBody::kPeer, memberId(), selfAddress_, {}, {}};
    if (!secret.empty()) hello.nonce = member_auth::freshNonce();
    return encode(hello);
  };
  // The process at a member's address must be that member: a restarted process there (empty,
  // not yet admitted, or admitted under a new id) must not take the old member's updates. With a
  // cluster secret it must also prove that it knows the secret.
  o.checkHello = [id, &secret](const std::string& sent, const Frame& reply) -> std::string {
    try {
      const HelloBody hello = decode<HelloBody>(reply.body);
      if (hello.memberId != id) {
        return "it answers as member " + std::to_string(hello.memberId) + ", not member " +
               std::to_string(id);
      }
      if (secret.empty()) return {};
      const HelloBody mine = decode<HelloBody>(sent);
      if (hello.proof.empty()) {
        return "it did not prove that it knows the cluster secret (is it started without one?)";
      }
      if (!member_auth::sameProof(
              hello.proof,
              member_auth::acceptorProof(secret, mine.nonce, hello.nonce, mine.memberId, id))) {
        return "its proof does not match the cluster secret";
      }
      return {};
    } catch (const std::exception& e) {
      return std::string("Hello reply does not decode: ") + e.what();
    }
  };
  o.authBody = [id, &secret](const std::string& sent, const Frame& reply) -> std::string {
    if (secret.empty()) return {};
    const HelloBody mine = decode<HelloBody>(sent);
    const HelloBody theirs = decode<HelloBody>(reply.body);
    return encode(
        AuthBody{member_auth::dialerProof(secret, mine.nonce, theirs.nonce, mine.memberId, id)});
  };
  return o;
}

void NodeImpl::syncPeers(const Topology& t) {
  for (const auto& m : t.members) peerFor(m.id, m.address);
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (t.hasMember(it->first)) {
      ++it;
      continue;
    }
    // A member that left may still answer requests already sent to it (redirects, the last
    // replies): close its link only after a request's full deadline. What is still queued (a
    // link waiting for a member that died) goes elsewhere now.
    it->second->abandonQueued("member " + std::to_string(it->first) + " left the topology");
    auto timer = std::make_shared<Timer>(netIo_, options_.requestTimeout);
    timer->async_wait([this, timer, id = it->first, peer = it->second](std::error_code) {
      if (auto d = departed_.find(id); d != departed_.end() && d->second == peer) {
        departed_.erase(d);
      }
      peer->close();
    });
    departed_.insert_or_assign(it->first, it->second);
    it = peers_.erase(it);
  }
  if (shardLinks_) shardLinks_->retain(t, options_.requestTimeout);
}

}  // namespace ingrid
