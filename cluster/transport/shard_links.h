// ShardLinks: the links a caller keeps to members' shard ports (MemberInfo::shardPorts), one per
// (member, shard) it uses, and the client-side handshake they (and any client link) speak.
//
// A call on partition p goes to the shard port p % (the member's shard count): the member's thread
// that owns p reads it, runs it and answers. forCall() answers nullptr when the member lists no
// shard ports, or while the link is passed over after a failed dial (a shard port cut by a
// firewall, a member restarting): the caller then uses the member port. A dial to a shard port
// fails after kDialTimeout (a port that drops packets would otherwise hold the calls queued behind
// it for the whole connectTimeout), and the requests queued behind it fail "not sent", so they go
// again, to the member port. The link is passed over for kRetryAfter, doubled after each failure
// in a row up to kRetryAfterMax, then tried again by the next call. Used by the thin client and
// by members forwarding their embedded calls; and by each partition worker of a member, on its
// shard port's transport, for its partitions' replication to their backups (forStream: never
// passed over, so that a partition's updates to a backup take one ordered path).
//
// Thread safety: one thread, the one that runs its transport's io_context.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include <ingrid/topology.h>

#include "cluster/transport/peer.h"
#include "cluster/transport/timer.h"
#include "cluster/transport/transport.h"

namespace ingrid {

// A client's Hello: with a client secret (NodeOptions::clientSecret), it carries the nonce that
// the member's Auth check covers.
std::string clientHelloBody(const std::string& secret);
// The Auth that proves the client secret, after the member's Hello reply; empty without a secret.
std::string clientAuthBody(const std::string& secret, const std::string& sent, const Frame& reply);
// The options of a client's link to a member (its member port or a shard port): it says Hello as
// a client (proving `secret` if set), fails its queue at once when a dial fails (so the call is
// routed again), and dials only when a request wants it (members close idle client links).
PeerOptions clientLinkOptions(const std::string& secret);

class ShardLinks {
 public:
  static constexpr std::chrono::seconds kRetryAfter{1};
  static constexpr std::chrono::seconds kRetryAfterMax{32};
  static constexpr std::chrono::milliseconds kDialTimeout{500};

  // `linkOptions(id)`: the options of a link to member `id` (clientLinkOptions for a client; a
  // member's own Hello for a member). `transport` must outlive this.
  ShardLinks(Transport& transport, std::function<PeerOptions(MemberId)> linkOptions)
      : transport_(transport), linkOptions_(std::move(linkOptions)) {}
  ShardLinks(const ShardLinks&) = delete;
  ShardLinks& operator=(const ShardLinks&) = delete;

  // The link for a call on partition p to `member`, made if needed; nullptr: use the member port.
  std::shared_ptr<Peer> forCall(const MemberInfo& member, PartitionId p);
  // The link for partition p's replication stream to `member`, made (or made anew, if closed) as
  // needed and never passed over: a failed dial fails what it queues, and the caller tries again
  // on it. nullptr only when the member lists no shard ports or this transport has stopped.
  std::shared_ptr<Peer> forStream(const MemberInfo& member, PartitionId p);
  // Drops the links to members that `t` does not list: what they still queue fails as not sent
  // (routed again), and each is closed `linger` later (answers to requests already sent may
  // still come); but a link that has owed an answer and heard nothing since `silentSince` or
  // before (Peer::unansweredSince) is abandoned at once (Peer::abandon, naming `why`). Default:
  // none is.
  void retain(const Topology& t, std::chrono::milliseconds linger,
              std::chrono::steady_clock::time_point silentSince =
                  std::chrono::steady_clock::time_point::min(),
              const std::string& why = {});
  // Closes every link (their queued and pending requests fail), those still lingering too.
  void closeAll();
  // Whether some link has owed an answer, and heard nothing, since `when` or before
  // (Peer::unansweredSince).
  bool unansweredSince(std::chrono::steady_clock::time_point when) const;

 private:
  Transport& transport_;
  std::function<PeerOptions(MemberId)> linkOptions_;
  struct Link {
    std::uint16_t port = 0;  // the shard port it dials (MemberInfo::shardPorts)
    std::shared_ptr<Peer> peer;
    // The latest failed dial seen, and how many failed in a row (the pass-over window doubles).
    std::optional<std::chrono::steady_clock::time_point> failureSeen;
    unsigned failures = 0;
  };
  // The link to `member`'s shard port for p, made if needed (null if it lists none).
  Link* linkFor(const MemberInfo& member, PartitionId p);
  // A new Peer for `link` (closed: a dial found its transport stopped); false if the member's
  // address does not parse.
  bool redial(const MemberInfo& member, Link& link);

  absl::flat_hash_map<std::pair<MemberId, std::uint32_t>, Link> links_;  // by (member, shard)
  // The timers that close the links retain() dropped (closeAll fires them at once).
  std::vector<std::shared_ptr<Timer>> lingering_;
};

}  // namespace ingrid
