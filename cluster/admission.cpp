#include "cluster/admission.h"

#include <optional>

#include "cluster/control/raft_codec.h"
#include "cluster/transport/messages.h"

namespace ingrid {
namespace {

// Who may send a type, and on which ports.
enum class From : std::uint8_t {
  kNobody,  // not a request (Redirect)
  kAnyone,  // before any proof: Hello, Auth, Join (which carries its own)
  kCaller,  // a client (past the client secret, if set) or a member
  kMember,  // a member's link only
};

struct Rule {
  From from = From::kNobody;
  bool memberPort = false;
  bool shardPort = false;
};

Rule ruleFor(MessageType type) noexcept {
  switch (type) {
    case MessageType::kHello:
    case MessageType::kAuth:
      return {From::kAnyone, true, true};
    case MessageType::kJoin:
      return {From::kAnyone, true, false};
    case MessageType::kInvoke:
      return {From::kCaller, true, true};
    case MessageType::kGetTopology:
    case MessageType::kHeartbeat:
    case MessageType::kStatus:
      return {From::kCaller, true, false};
    // An operator's (ingrid-cli recover): its body carries its own proof of the cluster secret.
    case MessageType::kRecover:
      return {From::kCaller, true, false};
    // Updates and snapshots: on the member link, or on the backup's shard port whose worker owns
    // the partition.
    case MessageType::kReplicate:
    case MessageType::kSnapshot:
      return {From::kMember, true, true};
    case MessageType::kTopologyPrepare:
    case MessageType::kSynced:
    case MessageType::kLeave:
    case MessageType::kRaft:
    case MessageType::kLease:
    case MessageType::kTopologyCommit:
      return {From::kMember, true, false};
    case MessageType::kRedirect:
      return {};
  }
  return {};
}

// The sender a message's body names, for the types that name one; nullopt for the others, and
// 0 for a body that does not say (it fails to decode later, with its own error).
std::optional<std::uint64_t> namedSender(MessageType type, std::string_view body) noexcept {
  try {
    switch (type) {
      case MessageType::kRaft:
        return raftMessageSender(body).value_or(0);
      case MessageType::kLease:
        return decode<LeaseBody>(body).memberId;
      case MessageType::kLeave:
        return decode<LeaveBody>(body).memberId;
      case MessageType::kTopologyCommit:  // sent by the leader that committed it
        return decode<TopologyBody>(body).topology.leader;
      default:
        return std::nullopt;
    }
  } catch (const std::exception&) {
    return 0;
  }
}

bool saysMember(std::string_view body) noexcept {
  try {
    const HelloBody hello = decode<HelloBody>(body);
    return hello.role == HelloBody::kPeer;  // a member's, or a joining node's
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

Admission admit(const SenderFacts& sender, MessageType type, std::string_view body, Port port,
                const AdmissionPolicy& policy) noexcept {
  const Rule rule = ruleFor(type);
  const bool member = sender.member != 0;
  if (!member && rule.from != From::kAnyone) {
    if (sender.overLimit) return {Verdict::kOverLimit};
    if (policy.clientSecret && !sender.clientAuthenticated) return {Verdict::kUnauthenticated};
  }
  // Past the limit, a Hello must be a member's or a joining node's (the members' reserve).
  if (!member && sender.overLimit && type == MessageType::kHello && !saysMember(body)) {
    return {Verdict::kOverLimit};
  }
  if (rule.from == From::kNobody || !(port == Port::kMember ? rule.memberPort : rule.shardPort)) {
    // Past the limit a stranger keeps its connection only for what the reserve is for.
    return {!member && sender.overLimit ? Verdict::kOverLimit : Verdict::kWrongPort};
  }
  if (rule.from == From::kMember && !member) return {Verdict::kMembersOnly};
  if (rule.from == From::kMember) {
    if (const auto named = namedSender(type, body); named && *named != sender.member) {
      return {Verdict::kForgedSender, *named};
    }
    if ((type == MessageType::kReplicate || type == MessageType::kSnapshot) && sender.replicaPort &&
        *sender.replicaPort != port) {
      return {Verdict::kWrongPath};
    }
  }
  return {};
}

std::string_view verdictName(Verdict v) noexcept {
  switch (v) {
    case Verdict::kAdmit:
      return "admit";
    case Verdict::kOverLimit:
      return "over_limit";
    case Verdict::kUnauthenticated:
      return "unauthenticated";
    case Verdict::kWrongPort:
      return "wrong_port";
    case Verdict::kMembersOnly:
      return "members_only";
    case Verdict::kForgedSender:
      return "forged_sender";
    case Verdict::kWrongPath:
      return "wrong_path";
  }
  return "unknown";
}

bool closesConnection(Verdict v) noexcept {
  return v == Verdict::kOverLimit || v == Verdict::kUnauthenticated;
}

std::string describeRefusal(const Admission& a, MessageType type, Port port,
                            const SenderFacts& sender, const std::string& remote,
                            const std::string& self, const AdmissionPolicy& policy) {
  const std::string what = messageTypeName(type);
  switch (a.verdict) {
    case Verdict::kAdmit:
      return {};
    case Verdict::kOverLimit:
      return self + " refuses the connection from " + remote + ": " +
             std::to_string(policy.maxConnections) +
             " connections are open, the limit (maxConnections); past it only members' links are "
             "taken";
    case Verdict::kUnauthenticated:
      return self + " refuses the connection from " + remote +
             ": clients must prove the client secret (ClientOptions::clientSecret) before " + what +
             ", and this one did not";
    case Verdict::kWrongPort:
      return what + " is not taken on " +
             (port == Port::kShard ? "a shard port of " : "the member port of ") + self +
             " (from " + remote + ")";
    case Verdict::kMembersOnly:
      return what + " is taken only on a member's link: the connection from " + remote +
             " has not said Hello as a member" +
             (policy.clusterSecret ? " and proved that it knows the cluster secret" : "");
    case Verdict::kForgedSender:
      return self + " refuses " + what + " from " + remote + ": its body names member " +
             std::to_string(a.claimed) + " as the sender, but the connection proved member " +
             std::to_string(sender.member) + " (nobody speaks for another member)";
    case Verdict::kWrongPath:
      return self + " refuses " + what + " from member " + std::to_string(sender.member) +
             " on its " + (port == Port::kShard ? "shard port" : "member port") +
             ": that member's replication to it travels on its " +
             (port == Port::kShard ? "member port" : "shard ports") +
             " (one ordered path per partition)";
  }
  return {};
}

}  // namespace ingrid
