// Admission: the one rule table that decides, for every request frame on either of a member's
// ports, whether the connection it came on may send it. NodeImpl::onRequest (the member port)
// and NodeImpl::onShardRequest (each worker's shard port) ask admit() first and act on its
// verdict; no other code decides who may send what.
//
// The rules, in order:
//   1. A connection accepted past maxConnections that is not a member's takes only a member's
//      (or a joining node's) Hello, Auth and (member port) Join: anything else closes it.
//   2. With a client secret, a connection that is not a member's and has not proved the secret
//      takes only Hello, Auth and (member port) Join: anything else closes it.
//   3. Each type is taken on the ports the table names, from the senders it names: anyone, a
//      client or member, or a member only (its connection said Hello as that member and, with a
//      cluster secret or TLS, proved it).
//   4. A message that names its sender (Raft, Lease, Leave, and TopologyCommit, whose topology
//      names the leader that committed it) must name the member its connection
//      proved: nobody speaks for another.
//   5. A member's updates and snapshots (Replicate, Snapshot) come on the one port that is their
//      path to this member (shard ports when both run them, else the member port), so a
//      partition's replication is one ordered stream.
// Rules 3 to 5 answer an error on the connection, which stays open.
//
// Pure: no state, no I/O; callable from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/transport/frame.h"

namespace ingrid {

enum class Port : std::uint8_t { kMember, kShard };

// What a connection has proved so far (Connection::peerId, clientAuthenticated, overLimit).
struct SenderFacts {
  std::uint64_t member = 0;  // the member its Hello (and Auth) proved; 0: not a member's link
  bool clientAuthenticated = false;
  bool overLimit = false;
  // For a member's Replicate or Snapshot: the port its replication to this member takes
  // (replicatesOnShardPorts), when the topology knows both; unset otherwise.
  std::optional<Port> replicaPort;
};

struct AdmissionPolicy {
  bool clientSecret = false;  // clients must prove NodeOptions::clientSecret first
  // For the refusals' wording only:
  bool clusterSecret = false;      // members prove the cluster secret
  std::size_t maxConnections = 0;  // NodeOptions::maxConnections
};

enum class Verdict : std::uint8_t {
  kAdmit,
  kOverLimit,        // close: past maxConnections, and not a member's link
  kUnauthenticated,  // close: a client that has not proved the client secret
  kWrongPort,        // error: this type is not taken on this port
  kMembersOnly,      // error: a member's message on a connection that is not a member's link
  kForgedSender,     // error: the body names another sender than the connection's member
  kWrongPath,        // error: replication on the port that is not its path to this member
};

// How many refusing verdicts there are (kOverLimit .. kWrongPath), and each one's name for the
// metrics ("over_limit", ...).
inline constexpr std::size_t kRefusalVerdicts = 6;
std::string_view verdictName(Verdict v) noexcept;

struct Admission {
  Verdict verdict = Verdict::kAdmit;
  std::uint64_t claimed = 0;  // kForgedSender: the sender the body named
  explicit operator bool() const noexcept { return verdict == Verdict::kAdmit; }
};

// The verdict for a request of `type` with `body` from `sender` on `port`.
Admission admit(const SenderFacts& sender, MessageType type, std::string_view body, Port port,
                const AdmissionPolicy& policy) noexcept;

// Whether the verdict closes the connection (kOverLimit, kUnauthenticated) rather than answering
// an error on it.
bool closesConnection(Verdict v) noexcept;

// Why, in words a person can act on: `type` from `remote` on `port`, refused by `self` ("member
// 3 (127.0.0.1:7400)").
std::string describeRefusal(const Admission& a, MessageType type, Port port,
                            const SenderFacts& sender, const std::string& remote,
                            const std::string& self, const AdmissionPolicy& policy);

}  // namespace ingrid
