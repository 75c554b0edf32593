// Bodies of the messages between nodes, in the order of MessageType. Each is encoded with the
// Cereal portable-binary codec (include/ingrid/processors/codec.h); docs/wire-format.md lists their
// fields. Every container length read from the wire is checked before anything is allocated.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include <ingrid/clock.h>
#include <ingrid/processors/codec.h>
#include <ingrid/string_pool.h>
#include <ingrid/topology.h>

#include "cluster/transport/frame.h"

namespace ingrid {

// kHello: who opened the connection.
struct HelloBody {
  enum Role : std::uint8_t { kPeer = 1, kClient = 2 };
  std::uint8_t role = kPeer;
  MemberId memberId = 0;  // 0 for clients
  std::string address;    // the caller's listen address (peers)
  // Member (and client) authentication (cluster/transport/member_auth.h), with a secret; else
  // empty.
  std::string nonce;  // the sender's fresh nonce
  std::string proof;  // a reply's: HMAC proving the replier knows the secret
  template <class A>
  void serialize(A& ar) {
    ar(role, memberId, address, nonce, proof);
  }
};

// kAuth request: the dialing member's proof of the cluster secret, sent right after it checked
// the acceptor's Hello. Reply: empty; or an error frame with request id 0, and the connection
// closes.
struct AuthBody {
  std::string proof;
  template <class A>
  void serialize(A& ar) {
    ar(proof);
  }
};

// kJoin request: a node asks to be admitted. Reply: JoinReply, or an error (join_refused).
struct JoinRequest {
  std::string address;
  std::uint32_t partitions = 0;
  std::uint32_t backups = 0;
  std::vector<std::string> processors;  // sorted names
  // Random per node start: a join from a member's address with another incarnation is that
  // member restarted (its data is gone), not a retried join.
  std::uint64_t incarnation = 0;
  // member_auth::joinProof when the cluster has a secret; else empty.
  std::string proof;
  // The joiner's shard ports (MemberInfo::shardPorts), listed in its topology entry; may be empty.
  std::vector<std::uint16_t> shardPorts = {};
  // The joiner's timing, in ms, which every member must share: the lease arithmetic (a leader
  // waits its own lease duration out) and the exactly-once window assume it.
  std::uint32_t leaseDurationMs = 0;
  std::uint32_t failureTimeoutMs = 0;
  std::uint32_t dedupWindowMs = 0;
  // The joiner's zone (MemberInfo::zone), listed in its topology entry; may be empty.
  std::string zone = {};
  static constexpr std::size_t kMaxProcessors = 4096;
  template <class A>
  void save(A& ar) const {
    ar(address, partitions, backups, processors, incarnation, proof, shardPorts, leaseDurationMs,
       failureTimeoutMs, dedupWindowMs, zone);
  }
  template <class A>
  void load(A& ar) {
    ar(address, partitions, backups);
    processors.resize(loadBoundedSize(ar, kMaxProcessors, "JoinRequest.processors"));
    for (auto& p : processors) ar(p);
    ar(incarnation, proof);
    shardPorts.resize(loadBoundedSize(ar, MemberInfo::kMaxShardPorts, "JoinRequest.shardPorts"));
    for (auto& port : shardPorts) ar(port);
    ar(leaseDurationMs, failureTimeoutMs, dedupWindowMs, zone);
    if (zone.size() > MemberInfo::kMaxZoneBytes) {
      throw std::length_error("JoinRequest.zone is " + std::to_string(zone.size()) +
                              " bytes, more than " + std::to_string(MemberInfo::kMaxZoneBytes));
    }
  }
};

struct JoinReply {
  MemberId memberId = 0;
  std::string coordinatorAddress;
  template <class A>
  void serialize(A& ar) {
    ar(memberId, coordinatorAddress);
  }
};

// kTopologyPrepare / kTopologyCommit / kGetTopology reply / kRedirect: a whole topology.
struct TopologyBody {
  Topology topology;
  template <class A>
  void serialize(A& ar) {
    ar(topology);
  }
};

// kGetTopology with a body: a watch (a long poll). The member answers with its topology once it
// has one newer than `after`, or after `waitMs` (at most 60 s), whichever is first. An empty body
// asks for the topology now.
struct WatchTopologyBody {
  std::uint64_t after = 0;
  std::uint32_t waitMs = 0;
  template <class A>
  void serialize(A& ar) {
    ar(after, waitMs);
  }
};

// kInvoke: run `processor` with encoded `args` on `key`. Reply: InvokeReply, kRedirect, or an
// error (unknown_processor, invalid_argument, processor_failed, unavailable, timeout...).
// `client`, `seq` and `doneBelow` identify the request for exactly-once retries (RequestId,
// grid/dedup_table.h; client 0: no id). `timeoutMs` is what is left of the caller's deadline when
// it was sent (0: none given): the primary does not start it later than that after receipt, and
// replicates within it. `deadlineUnixMs` is the same deadline on the sender's wall clock (ms since
// the Unix epoch; 0: none): a copy that arrives after it (by the primary's wall clock, allowing
// kDeadlineClockSkew) was delayed in transit and is refused, never run.
struct InvokeRequest {
  std::string key;
  std::string processor;
  std::string args;
  std::uint64_t client = 0;
  std::uint64_t seq = 0;
  std::uint64_t doneBelow = 0;
  std::uint32_t timeoutMs = 0;
  std::uint64_t deadlineUnixMs = 0;
  template <class A>
  void serialize(A& ar) {
    ar(key, processor, args, client, seq, doneBelow, timeoutMs, deadlineUnixMs);
  }
};

// A byte string from a view, encoded as a std::string is (its length, then its bytes): what the
// message views below write instead of copying into a string first.
template <class A>
void saveBytes(A& ar, std::string_view s) {
  ar(cereal::make_size_tag(static_cast<cereal::size_type>(s.size())));
  ar(cereal::binary_data(s.data(), s.size()));
}

// An InvokeRequest over strings held elsewhere: encodes exactly as InvokeRequest, with no copy.
struct InvokeRequestView {
  // What its encoding (with the byte-order flag) takes besides the three strings' bytes: the
  // flag 1, three lengths 24, client, seq, doneBelow 24, timeoutMs 4, deadlineUnixMs 8.
  static constexpr std::size_t kFixedBytes = 61;
  std::size_t encodedSize() const noexcept {
    return kFixedBytes + key.size() + processor.size() + args.size();
  }
  std::string_view key;
  std::string_view processor;
  std::string_view args;
  std::uint64_t client = 0;
  std::uint64_t seq = 0;
  std::uint64_t doneBelow = 0;
  std::uint32_t timeoutMs = 0;
  std::uint64_t deadlineUnixMs = 0;
  template <class A>
  void save(A& ar) const {
    for (const std::string_view s : {key, processor, args}) saveBytes(ar, s);
    ar(client, seq, doneBelow, timeoutMs, deadlineUnixMs);
  }
};

// Where an InvokeRequest's fields lie in its encoded body, found without copying them (the
// primary reads them in place), and its numbers. Throws std::invalid_argument on a malformed body.
struct InvokeRequestSpans {
  struct Span {
    std::uint32_t offset = 0, size = 0;
    std::string_view in(std::string_view body) const { return body.substr(offset, size); }
  };
  Span key, processor, args;
  std::uint64_t client = 0;
  std::uint64_t seq = 0;
  std::uint64_t doneBelow = 0;
  std::uint32_t timeoutMs = 0;
  std::uint64_t deadlineUnixMs = 0;
  static InvokeRequestSpans of(std::string_view body);
};

struct InvokeReply {
  // What its encoding (with the byte-order flag) takes besides the result's bytes: the flag 1,
  // the length 8.
  static constexpr std::size_t kFixedBytes = 9;
  std::string result;
  template <class A>
  void serialize(A& ar) {
    ar(result);
  }
};

// An InvokeReply read in place (the client's side): `result` points into the body it was read
// from, which must outlive it. The same bytes and bounds as InvokeReply's load.
struct InvokeReplyIn {
  std::string_view result;
  void load(codec_detail::PortableReader& ar);
};

// One update of a kReplicate batch: the entry state a processor left on the primary, the
// `seq`-th update of the partition, made by the primary of `epoch` (Topology::epoch). `prevEpoch`
// is the epoch of update seq-1 on the primary. A backup applies it only as the next update after
// one of `prevEpoch`, so two replicas holding an update of the same (epoch, seq) hold the same
// updates up to it; one that holds another update at seq (a deposed primary's) takes a snapshot.
//
// kBarrier changes no entry (its key is empty): a promoted primary sends it before answering a
// request it learnt from a former primary, so that every backup is known to hold that request's
// update (every update before it) before the answer goes out.
struct ReplicateBody {
  enum Kind : std::uint8_t { kPut = 1, kRemove = 2, kBarrier = 3 };
  std::uint32_t partition = 0;
  std::uint64_t seq = 0;
  std::uint64_t epoch = 0;
  std::uint64_t prevEpoch = 0;
  std::uint8_t kind = kPut;
  std::string key;
  std::string value;
  Nanos expiresAt = 0;
  // The request that made the update and its answer, for the backup's dedup table (client 0: none).
  std::uint64_t client = 0;
  std::uint64_t requestSeq = 0;
  std::uint64_t doneBelow = 0;
  std::string result;
  template <class A>
  void serialize(A& ar) {
    ar(partition, seq, epoch, prevEpoch, kind, key, value, expiresAt, client, requestSeq, doneBelow,
       result);
  }
};

// kReplicate: the updates a primary made for one backup during one pass of its thread, in the
// order it made them (group commit: one frame and one acknowledgement for all of them; updates of
// one partition keep their sequence order). The backup judges each update on its own. Reply:
// ReplicateAck.
struct ReplicateBatch {
  static constexpr std::size_t kMaxUpdates = 4096;
  std::vector<ReplicateBody> updates;

  template <class A>
  void save(A& ar) const {
    ar(updates);
  }
  template <class A>
  void load(A& ar) {
    const std::size_t n = loadBoundedSize(ar, kMaxUpdates, "ReplicateBatch.updates");
    updates.clear();
    updates.reserve(std::min(n, remainingInput()));
    for (std::size_t i = 0; i < n; ++i) ar(updates.emplace_back());
  }
};

// A ReplicateBody made of views (the primary's side: the key, the stored value and the answer
// are encoded where they lie, with no copy first). Encodes exactly as ReplicateBody.
struct ReplicateUpdateView {
  // What its encoding (encode(), with the byte-order flag) takes besides the three strings' bytes:
  // the flag 1, partition 4, seq, epoch, prevEpoch 24, kind 1, three lengths 24, expiresAt,
  // client, requestSeq, doneBelow 32.
  static constexpr std::size_t kFixedBytes = 86;
  std::uint32_t partition = 0;
  std::uint64_t seq = 0;
  std::uint64_t epoch = 0;
  std::uint64_t prevEpoch = 0;
  std::uint8_t kind = ReplicateBody::kPut;
  std::string_view key;
  std::string_view value;
  Nanos expiresAt = 0;
  std::uint64_t client = 0;
  std::uint64_t requestSeq = 0;
  std::uint64_t doneBelow = 0;
  std::string_view result;
  template <class A>
  void save(A& ar) const {
    ar(partition, seq, epoch, prevEpoch, kind);
    saveBytes(ar, key);
    saveBytes(ar, value);
    ar(expiresAt, client, requestSeq, doneBelow);
    saveBytes(ar, result);
  }
  // Read in place (the backup's side): the strings point into `bytes`, which must outlive them.
  // Bounds as ReplicateBody's load: a length past what remains throws.
  void load(codec_detail::PortableReader& ar) {
    ar(partition, seq, epoch, prevEpoch, kind);
    key = loadBytes(ar);
    value = loadBytes(ar);
    ar(expiresAt, client, requestSeq, doneBelow);
    result = loadBytes(ar);
  }
  static std::string_view loadBytes(codec_detail::PortableReader& ar) {
    cereal::size_type size = 0;
    ar(cereal::make_size_tag(size));
    return ar.take(size);
  }
};

// A ReplicateBatch read in place (ReplicateUpdateView::load): the backup decodes a batch without
// copying its keys, values and answers. The body it was read from must outlive it.
struct ReplicateBatchIn {
  std::vector<ReplicateUpdateView> updates;
  void load(codec_detail::PortableReader& ar) {
    const std::size_t n =
        loadBoundedSize(ar, ReplicateBatch::kMaxUpdates, "ReplicateBatch.updates");
    updates.clear();
    updates.reserve(std::min(n, ar.remaining()));
    for (std::size_t i = 0; i < n; ++i) updates.emplace_back().load(ar);
  }
};

// A kReplicate body joined from updates encoded one by one (encode(ReplicateUpdateView), each
// with its own byte-order flag, which is dropped): the same bytes as encode(ReplicateBatch) of
// those updates. `encodedOf(*it)` gives each update's encoding. Written into a string from this
// thread's StringPool, taken at the batch's size.
template <class It, class EncodedOf>
std::string joinReplicateBatch(It begin, It end, EncodedOf encodedOf) {
  std::size_t bytes = 1 + 8;
  std::size_t count = 0;
  for (It it = begin; it != end; ++it, ++count) bytes += encodedOf(*it).size() - 1;
  std::string body = StringPool::take(bytes);
  encodeInto(body, cereal::make_size_tag(static_cast<cereal::size_type>(count)));
  for (It it = begin; it != end; ++it) body.append(encodedOf(*it).substr(1));
  return body;
}

// An update of a batch that the backup did not apply: its index in the batch and why.
struct UpdateRefusal {
  std::uint32_t index = 0;
  ErrorBody error;
  template <class A>
  void serialize(A& ar) {
    ar(index, error);
  }
};

// Reply to kReplicate: every update of the batch was applied (or was already held) except the
// ones listed. An empty list acknowledges the whole batch.
struct ReplicateAck {
  std::vector<UpdateRefusal> refused;
  template <class A>
  void save(A& ar) const {
    ar(refused);
  }
  template <class A>
  void load(A& ar) {
    const std::size_t n = loadBoundedSize(ar, ReplicateBatch::kMaxUpdates, "ReplicateAck.refused");
    refused.clear();
    refused.reserve(std::min(n, remainingInput()));
    for (std::size_t i = 0; i < n; ++i) ar(refused.emplace_back());
  }
};

struct SnapshotEntry {
  std::string key;
  std::string value;
  Nanos expiresAt = 0;
  template <class A>
  void serialize(A& ar) {
    ar(key, value, expiresAt);
  }
};

// One dedup record of a snapshot (grid/dedup_table.h): request `seq` of `client` answered `result`.
struct SnapshotCompletion {
  std::uint64_t client = 0;
  std::uint64_t doneBelow = 0;
  std::uint64_t seq = 0;
  std::string result;
  template <class A>
  void serialize(A& ar) {
    ar(client, doneBelow, seq, result);
  }
};

// kSnapshot: one chunk of a partition's entries as of update `seq` (made in `lastEpoch`), sent by
// the primary of `epoch`. The chunks of one snapshot share `id` and arrive in `index` order (one
// missing refuses the rest); the receiver stages them and
// replaces its replica with the whole only when the last one arrives, so a replica is never left
// holding part of a snapshot.
struct SnapshotBody {
  static constexpr std::size_t kMaxEntries = 1 << 20;
  std::uint32_t partition = 0;
  std::uint64_t id = 0;
  std::uint64_t seq = 0;
  std::uint64_t epoch = 0;
  std::uint64_t lastEpoch = 0;
  std::uint32_t index = 0;  // of this chunk in its snapshot: 0, 1, ...
  bool first = true;
  bool last = true;
  std::vector<SnapshotEntry> entries;
  std::vector<SnapshotCompletion> completions;  // the partition's dedup records
  template <class A>
  void save(A& ar) const {
    ar(partition, id, seq, epoch, lastEpoch, index, first, last, entries, completions);
  }
  template <class A>
  void load(A& ar) {
    ar(partition, id, seq, epoch, lastEpoch, index, first, last);
    entries.resize(loadBoundedSize(ar, kMaxEntries, "SnapshotBody.entries"));
    for (auto& e : entries) ar(e);
    // Each record is at least 32 bytes on the wire: reserve no more than the rest could hold.
    const std::size_t n = loadBoundedSize(ar, kMaxEntries, "SnapshotBody.completions");
    completions.clear();
    completions.reserve(std::min(n, remainingInput() / 32));
    for (std::size_t i = 0; i < n; ++i) ar(completions.emplace_back());
  }
};

// kSynced: the primary of `partition` tells the coordinator that `member` now holds a complete
// replica (snapshot acknowledged, every later update replicated to it).
struct SyncedBody {
  std::uint32_t partition = 0;
  MemberId member = 0;
  std::uint64_t topologyVersion = 0;
  template <class A>
  void serialize(A& ar) {
    ar(partition, member, topologyVersion);
  }
};

// kLeave: a member asks the coordinator to move its partitions away and remove it.
struct LeaveBody {
  MemberId memberId = 0;
  template <class A>
  void serialize(A& ar) {
    ar(memberId);
  }
};

// kLease: a member asks the control plane's leader to renew its primary lease, telling the version
// of the topology it has installed. Reply: LeaseGrant, or an error (unavailable: not a live member,
// or its topology is older than one that moved a primary).
// It also reports the members it has not heard from for the failure timeout (`unreachable`), so
// the leader sees a link cut between two members that both still reach it (a partial partition).
struct LeaseBody {
  MemberId memberId = 0;
  std::uint64_t incarnation = 0;
  std::uint64_t topologyVersion = 0;
  std::vector<MemberId> unreachable;
  template <class A>
  void save(A& ar) const {
    ar(memberId, incarnation, topologyVersion, unreachable);
  }
  template <class A>
  void load(A& ar) {
    ar(memberId, incarnation, topologyVersion);
    unreachable.resize(loadBoundedSize(ar, kMaxMembers, "LeaseBody.unreachable"));
    for (auto& m : unreachable) ar(m);
  }
};

// kLease reply: the lease runs for `leaseMs` (the leader's lease duration; the member uses the
// smaller of it and its own) from when the member sent its request.
struct LeaseGrant {
  std::uint32_t leaseMs = 0;
  template <class A>
  void serialize(A& ar) {
    ar(leaseMs);
  }
};

// kStatus reply: one member's own view, for `ingrid-cli status`.
struct MemberStatusBody {
  static constexpr std::size_t kMaxIds = 1 << 20;
  MemberId memberId = 0;
  std::uint64_t topologyVersion = 0;
  std::uint64_t term = 0;  // the control plane's current term here
  MemberId leader = 0;     // the leader as this member knows it; 0 if none
  bool isLeader = false;
  std::vector<MemberId> voters;       // the Raft configuration as this member knows it
  std::vector<MemberId> standbys;     // (and spares)
  std::int64_t leaseLeftMs = 0;       // how long its primary lease still runs; <= 0: none
  std::vector<std::uint32_t> fenced;  // partitions it is primary of that refuse writes (moving)
  bool rejoining = false;             // removed while alive, joining again as a new member
  // Partitions it owns whose replica here is not complete (never synced, or resyncing after a
  // missed update): with every owner so, a partition has no complete replica.
  std::vector<std::uint32_t> incomplete;
  // Partitions it is primary of with a backup that lacks an update made there (an attempt to
  // replicate it failed, and no later one reached every backup): not safe to lose this member.
  std::vector<std::uint32_t> behind;
  // Times its primary lease ran out before a renewal came (it refused writes meanwhile).
  std::uint64_t leaseLapses = 0;
  // On the control plane's leader: the members it may be about to remove (Coordinator::suspects:
  // removing, not heard, or named in a report of a cut link, either end). Empty elsewhere.
  std::vector<MemberId> suspects;
  // On the control plane's leader: the voters it wants for its topology (votersOf, its own
  // NodeOptions::voters); `voters` differs while a promotion or a removal is under way. Empty
  // elsewhere.
  std::vector<MemberId> wantedVoters;
  template <class A>
  void save(A& ar) const {
    ar(memberId, topologyVersion, term, leader, isLeader, voters, standbys, leaseLeftMs, fenced,
       rejoining, incomplete, behind, leaseLapses, suspects, wantedVoters);
  }
  template <class A>
  void load(A& ar) {
    ar(memberId, topologyVersion, term, leader, isLeader);
    voters.resize(loadBoundedSize(ar, kMaxMembers, "MemberStatusBody.voters"));
    for (auto& v : voters) ar(v);
    standbys.resize(loadBoundedSize(ar, kMaxMembers, "MemberStatusBody.standbys"));
    for (auto& v : standbys) ar(v);
    ar(leaseLeftMs);
    fenced.resize(loadBoundedSize(ar, kMaxIds, "MemberStatusBody.fenced"));
    for (auto& f : fenced) ar(f);
    ar(rejoining);
    incomplete.resize(loadBoundedSize(ar, kMaxIds, "MemberStatusBody.incomplete"));
    for (auto& p : incomplete) ar(p);
    behind.resize(loadBoundedSize(ar, kMaxIds, "MemberStatusBody.behind"));
    for (auto& p : behind) ar(p);
    ar(leaseLapses);
    suspects.resize(loadBoundedSize(ar, kMaxMembers, "MemberStatusBody.suspects"));
    for (auto& m : suspects) ar(m);
    wantedVoters.resize(loadBoundedSize(ar, kMaxMembers, "MemberStatusBody.wantedVoters"));
    for (auto& m : wantedVoters) ar(m);
  }
};

// Why the control plane's leader `leader`, voting with `voters`, does not yet have the voters it
// wants (`wanted`, its MemberStatusBody::wantedVoters): one of them does not vote yet (a promotion
// under way), or a member it does not want still votes (a removal under way; the leader itself
// excepted, which keeps its vote while it leads). Losing a voter then could cost the quorum.
// Empty if neither; `wanted` empty (not the leader's report) is never a shortfall.
inline std::string votersShortfall(MemberId leader, const std::vector<MemberId>& voters,
                                   const std::vector<MemberId>& wanted) {
  if (wanted.empty()) return {};
  const auto in = [](const std::vector<MemberId>& v, MemberId m) {
    return std::find(v.begin(), v.end(), m) != v.end();
  };
  for (MemberId m : wanted) {
    if (!in(voters, m)) {
      return "the control plane's leader (member " + std::to_string(leader) +
             ") does not have member " + std::to_string(m) +
             " voting yet: a promotion is under way";
    }
  }
  for (MemberId m : voters) {
    if (m != leader && !in(wanted, m)) {
      return "the control plane's leader (member " + std::to_string(leader) +
             ") still has member " + std::to_string(m) + " voting: a removal is under way";
    }
  }
  return {};
}

// kRecover request (ingrid-cli recover; docs/operations.md, "Recovery after a lost quorum"): the
// member, one of the survivors that `topology` lists (RecoveryPlan), restarts its control plane
// from `topology` alone: Raft term `term`, a snapshot at log index `index` holding it, and every
// member of it voting. Every survivor gets the same topology, term and index. Refused (an error
// naming why) when the topology does not list this member or is not newer than the one
// installed, with a wrong or missing proof, or, unless `force`, while this member leads or knows
// a leader (a quorum is alive). `proof`: member_auth::recoverProof with the cluster secret when
// the cluster has one, else empty. Reply: RecoverReply.
struct RecoverRequest {
  Topology topology;
  std::uint64_t term = 0;
  std::uint64_t index = 0;
  bool force = false;
  std::string proof;
  template <class A>
  void serialize(A& ar) {
    ar(topology, term, index, force, proof);
  }
};

// kRecover reply: the member restarted its control plane; what it held before.
struct RecoverReply {
  MemberId memberId = 0;
  std::uint64_t previousVersion = 0;
  std::uint64_t previousTerm = 0;
  template <class A>
  void serialize(A& ar) {
    ar(memberId, previousVersion, previousTerm);
  }
};

// kHeartbeat: liveness, both directions between members and the coordinator.
struct HeartbeatBody {
  MemberId memberId = 0;
  template <class A>
  void serialize(A& ar) {
    ar(memberId);
  }
};

}  // namespace ingrid
