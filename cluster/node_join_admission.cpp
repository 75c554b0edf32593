// NodeImpl admitting a joining node (kJoin): checks its proof of the cluster secret and that it
// runs the same processors and timing, redirects it to the coordinator, or hands it to the
// coordinator's queue. Network thread.
#include "cluster/node_impl.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster/pending_auth.h"
#include "cluster/transport/member_auth.h"

namespace ingrid {
namespace {

std::string describeNames(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

void NodeImpl::handleJoin(const std::shared_ptr<Connection>& conn, Frame frame) {
  // Past the connection limit a refused joiner's connection is closed with the reason: the
  // members' reserve is not held by strangers.
  auto refuseJoin = [conn, header = frame.header](Error why) {
    if (conn->overLimit && conn->peerId == 0) {
      conn->refuse(std::move(why));
    } else {
      conn->replyError(header, std::move(why));
    }
  };
  const JoinRequest req = decode<JoinRequest>(frame.body);
  if (auto why = memberCertificateRefusal(*conn)) {
    refuseJoin(Error(Errc::join_refused, "the node at " + req.address + " cannot join: " + *why));
    return;
  }
  if (!parseAddress(req.address)) {
    refuseJoin(Error(Errc::join_refused,
                     "the joining node's address '" + req.address + "' is not host:port"));
    return;
  }
  if (!options_.clusterSecret.empty()) {
    // Proven over this connection's nonces (handleHello): a Join recorded elsewhere, or sent
    // without that Hello, proves nothing.
    std::optional<PendingAuth> pending;
    if (!conn->handshake.empty()) pending = decode<PendingAuth>(std::exchange(conn->handshake, {}));
    if (!pending || !pending->joiner ||
        !member_auth::sameProof(
            req.proof, member_auth::joinProof(options_.clusterSecret, req.address, req.incarnation,
                                              pending->dialerNonce, pending->acceptorNonce))) {
      refuseJoin(Error(Errc::join_refused,
                       "the node at " + req.address +
                           " did not prove that it knows the cluster secret "
                           "(NodeOptions::clusterSecret) over the nonces of a Hello on "
                           "this connection"));
      return;
    }
  }
  if (!coordinator_) {  // not the coordinator: tell the joiner who is
    conn->reply(frame.header, MessageType::kRedirect, topology()->version,
                encode(TopologyBody{*topology()}));
    return;
  }
  if (req.partitions != options_.partitions) {
    refuseJoin(Error(Errc::join_refused, "the cluster has " + std::to_string(options_.partitions) +
                                             " partitions, the joining node " + req.address +
                                             " has " + std::to_string(req.partitions)));
    return;
  }
  const auto timing = [](std::uint64_t lease, std::uint64_t failure, std::uint64_t dedup) {
    return "leaseDuration " + std::to_string(lease) + " ms, failureTimeout " +
           std::to_string(failure) + " ms, dedupWindow " + std::to_string(dedup) + " ms";
  };
  const std::string ourTiming = timing(leaseDuration().count(), options_.failureTimeout.count(),
                                       options_.dedupWindow.count());
  if (const std::string theirs =
          timing(req.leaseDurationMs, req.failureTimeoutMs, req.dedupWindowMs);
      theirs != ourTiming) {
    // A lease longer than the leader's could outlive the wait a new leader makes before it
    // promotes; a shorter dedup window would break the exactly-once contract.
    refuseJoin(Error(Errc::join_refused, "timing differs: the cluster has " + ourTiming +
                                             ", the joining node " + req.address + " has " +
                                             theirs + "; every member needs the same"));
    return;
  }
  const std::vector<std::string> ours = registry_.names();
  if (req.processors != ours) {
    std::vector<std::string> missing, extra;
    std::set_difference(ours.begin(), ours.end(), req.processors.begin(), req.processors.end(),
                        std::back_inserter(missing));
    std::set_difference(req.processors.begin(), req.processors.end(), ours.begin(), ours.end(),
                        std::back_inserter(extra));
    refuseJoin(Error(Errc::join_refused, "registered processors differ: the joining node " +
                                             req.address + " lacks [" + describeNames(missing) +
                                             "] and has extra [" + describeNames(extra) + "]"));
    return;
  }
  coordinator_->requestJoin(
      req.address, req.incarnation, req.shardPorts, req.zone,
      [this, conn, header = frame.header, refuseJoin, address = req.address](Result<MemberId> id) {
        if (!id) {
          refuseJoin(id.error());
          return;
        }
        log_.info({.member = knownMember(memberId()), .peer = *id}, "member ", memberId(),
                  " (leader): admits ", address, " as member ", *id);
        conn->reply(header, MessageType::kJoin, topology()->version,
                    encode(JoinReply{*id, selfAddress_}));
      });
}

}  // namespace ingrid
