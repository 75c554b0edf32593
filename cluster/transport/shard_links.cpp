#include "cluster/transport/shard_links.h"

#include <algorithm>

#include "cluster/transport/timer.h"

#include "cluster/transport/member_auth.h"
#include "cluster/transport/messages.h"

namespace ingrid {

std::string clientHelloBody(const std::string& secret) {
  return encode(HelloBody{
      HelloBody::kClient, 0, {}, secret.empty() ? std::string() : member_auth::freshNonce(), {}});
}

std::string clientAuthBody(const std::string& secret, const std::string& sent, const Frame& reply) {
  if (secret.empty()) return {};
  const HelloBody theirs = decode<HelloBody>(reply.body);
  return encode(AuthBody{member_auth::clientProof(secret, decode<HelloBody>(sent).nonce,
                                                  theirs.nonce, theirs.memberId)});
}

PeerOptions clientLinkOptions(const std::string& secret) {
  PeerOptions o;
  o.failQueuedOnDialError = true;  // a member that refuses connections is gone: re-route
  o.dialOnDemand = true;           // a member closes idle client links: redial when needed
  if (!secret.empty()) {
    o.helloBody = [secret] { return clientHelloBody(secret); };
    o.authBody = [secret](const std::string& sent, const Frame& reply) {
      return clientAuthBody(secret, sent, reply);
    };
  }
  return o;
}

ShardLinks::Link* ShardLinks::linkFor(const MemberInfo& member, PartitionId p) {
  if (member.shardPorts.empty()) return nullptr;
  const auto shard = static_cast<std::uint32_t>(p % member.shardPorts.size());
  const std::uint16_t port = member.shardPorts[shard];
  auto [it, made] = links_.try_emplace({member.id, shard});
  Link& link = it->second;
  if (!made && link.port != port) {
    link.peer->close();  // the member now lists another port there (ids are never reused)
    made = true;
  }
  if (made) {
    // Only here is the address built: a call on an existing link allocates nothing.
    const auto memberPort = parseAddress(member.address);
    if (!memberPort) {
      links_.erase(it);
      return nullptr;
    }
    PeerOptions o = linkOptions_(member.id);
    o.dialTimeout = kDialTimeout;
    link = Link{};
    link.port = port;
    link.peer =
        Peer::create(transport_, memberPort->first + ":" + std::to_string(port), std::move(o));
  }
  return &link;
}

std::shared_ptr<Peer> ShardLinks::forCall(const MemberInfo& member, PartitionId p) {
  if (transport_.stopped()) return nullptr;  // it dials no more: the member port serves
  Link* found = linkFor(member, p);
  if (!found) return nullptr;
  Link& link = *found;
  // A shard port whose last dial failed: the member port serves for a while, then it is tried
  // again (the call that finds it so dials it).
  if (const auto failed = link.peer->lastDialFailure()) {
    if (failed != link.failureSeen) {
      link.failureSeen = failed;
      ++link.failures;
    }
    const auto passOver = std::min<std::chrono::steady_clock::duration>(
        kRetryAfter * (1u << std::min(std::max(link.failures, 1u) - 1, 5u)), kRetryAfterMax);
    if (steadyNow() - *failed < passOver) return nullptr;
  } else if (link.peer->connected()) {
    link.failures = 0;
  }
  // Closed: a new link dials again, and its failures count on from the old one's.
  if (link.peer->closed() && !redial(member, link)) return nullptr;
  return link.peer;
}

std::shared_ptr<Peer> ShardLinks::forStream(const MemberInfo& member, PartitionId p) {
  if (transport_.stopped()) return nullptr;
  Link* link = linkFor(member, p);
  if (!link || (link->peer->closed() && !redial(member, *link))) return nullptr;
  return link->peer;
}

bool ShardLinks::redial(const MemberInfo& member, Link& link) {
  const auto memberPort = parseAddress(member.address);
  if (!memberPort) return false;
  PeerOptions o = linkOptions_(member.id);
  o.dialTimeout = kDialTimeout;
  link.peer =
      Peer::create(transport_, memberPort->first + ":" + std::to_string(link.port), std::move(o));
  return true;
}

void ShardLinks::retain(const Topology& t, std::chrono::milliseconds linger,
                        std::chrono::steady_clock::time_point silentSince, const std::string& why) {
  const auto now = steadyNow();
  std::erase_if(lingering_, [&](const auto& timer) { return timer->expiry() <= now; });
  absl::erase_if(links_, [&](const auto& link) {
    if (t.hasMember(link.first.first)) return false;
    if (link.second.peer->unansweredSince() <= silentSince) {
      link.second.peer->abandon(why);
      return true;
    }
    link.second.peer->abandonQueued("member " + std::to_string(link.first.first) +
                                    " left the topology");  // not sent: routed again
    auto timer = std::make_shared<Timer>(transport_.io(), linger);
    timer->async_wait([timer, peer = link.second.peer](std::error_code) { peer->close(); });
    lingering_.push_back(std::move(timer));
    return true;
  });
}

void ShardLinks::closeAll() {
  for (auto& [shard, link] : links_) link.peer->close();
  links_.clear();
  for (auto& timer : lingering_) timer->cancel();  // closes its link now
  lingering_.clear();
}

bool ShardLinks::unansweredSince(std::chrono::steady_clock::time_point when) const {
  return std::any_of(links_.begin(), links_.end(),
                     [&](const auto& link) { return link.second.peer->unansweredSince() <= when; });
}

}  // namespace ingrid
