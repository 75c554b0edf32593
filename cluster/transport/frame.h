// Wire frames: the fixed header every message between nodes (and clients) starts with.
//
// docs/wire-format.md is the specification; this is its code. A frame is a 32-byte little-endian
// header followed by `bodyLength` bytes of body (the Cereal portable-binary encoding of the
// message named by `type`). Nothing trusts a length before checking it against the maximum
// (invariant 11).
// Thread safety: pure functions and value types.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include <ingrid/error.h>

namespace ingrid {

inline constexpr std::uint32_t kFrameMagic = 0x44524749;  // bytes "IGRD" on the wire
// 2: Topology carries term and leader; kRaft, kLease and kStatus; kTopologyCommit retired.
// 3: Topology carries primary epochs; Replicate and Snapshot carry epochs; Lease carries the
//    member's topology version and is answered with the lease length.
// 4: Replicate carries a batch of updates (group commit), answered by a ReplicateAck.
// 5: Invoke carries a request id and the time left of its deadline; Replicate and Snapshot carry
//    dedup records (exactly-once retries).
// 6: shard ports take a member's Replicate and Snapshot.
// 7: Join carries the joiner's lease duration, failure timeout and dedup window (compared), and
//    with a cluster secret is proven over the nonces of a Hello on the same connection; Invoke
//    carries its wall-clock deadline; Topology publishes the dedup window.
// 8: MemberInfo and Join carry the zone; Status carries behind and leaseLapses.
// 9: kRecover (ingrid-cli recover: survivors of a lost quorum form a new control plane).
// 10: GetTopology with a body (WatchTopologyBody) is a watch, answered once a newer topology is
//     installed.
// 11: Raft frames are one-way (no empty reply).
// 12: kTopologyCommit again, with a new meaning: the control plane's leader sends each topology it
//     committed to the members, most of which no longer receive the Raft log (spares).
// 13: Status carries the leader's suspects (members it may be about to remove) and the voters it
//     wants.
inline constexpr std::uint16_t kProtocolVersion = 13;
inline constexpr std::size_t kFrameHeaderBytes = 32;
// Default largest body a node accepts or sends. Default: 16 MiB.
inline constexpr std::uint32_t kDefaultMaxBodyBytes = 16u << 20;

enum class MessageType : std::uint16_t {
  kHello = 1,            // first frame of a connection: who is calling
  kJoin = 2,             // a node asks the coordinator to admit it
  kTopologyPrepare = 3,  // leader -> members: fence partitions you are about to lose
  kTopologyCommit = 4,   // leader -> members: a topology the control plane committed
  kGetTopology = 5,      // anyone -> member: send me your current topology
  kInvoke = 6,           // run an entry processor on a key's primary
  kReplicate = 7,        // primary -> backup: the resulting entry state, in sequence order
  kSnapshot = 8,         // primary -> new owner: a partition's entries (migration)
  kSynced = 9,           // primary -> coordinator: a new owner of a partition has everything
  kLeave = 10,           // member -> coordinator: take me out gracefully
  kHeartbeat = 11,       // liveness
  kRedirect = 12,        // reply only: not the owner; body is the replier's topology
  kRaft = 13,            // member -> member: one control-plane (Raft) message
  kLease = 14,           // member -> leader: renew my primary lease
  kStatus = 15,          // anyone -> member: your view (control plane, lease, fenced partitions)
  kAuth = 16,            // dialing member -> member: its proof of the cluster secret
  kRecover = 17,         // operator (ingrid-cli recover) -> survivor: form a new control plane
};
inline constexpr std::uint16_t kMaxMessageType = 17;

// Bit flags of FrameHeader::flags.
inline constexpr std::uint16_t kFlagResponse = 1u << 0;  // a reply to requestId
inline constexpr std::uint16_t kFlagError = 1u << 1;     // (with response) body is an ErrorBody
inline constexpr std::uint16_t kFlagOneWay = 1u << 2;    // a Raft request that gets no reply
inline constexpr std::uint16_t kKnownFlags = kFlagResponse | kFlagError | kFlagOneWay;

struct FrameHeader {
  std::uint32_t magic = kFrameMagic;
  std::uint16_t version = kProtocolVersion;
  MessageType type = MessageType::kHello;
  std::uint16_t flags = 0;
  std::uint16_t reserved = 0;  // must be 0
  std::uint32_t bodyLength = 0;
  std::uint64_t requestId = 0;
  // The sender's topology version (0 if it has none yet).
  std::uint64_t topologyVersion = 0;

  bool isResponse() const noexcept { return (flags & kFlagResponse) != 0; }
  bool isError() const noexcept { return (flags & kFlagError) != 0; }
  bool isOneWay() const noexcept { return (flags & kFlagOneWay) != 0; }
};

using HeaderBytes = std::array<unsigned char, kFrameHeaderBytes>;

HeaderBytes encodeHeader(const FrameHeader& header) noexcept;

// Decodes and validates a header: magic, protocol version, known type, known flags, reserved
// zero, bodyLength <= maxBodyBytes. On failure returns an Error (Errc::protocol_error or
// Errc::malformed_message) whose detail says which field was wrong and what it held.
std::optional<Error> decodeHeader(const HeaderBytes& bytes, std::uint32_t maxBodyBytes,
                                  FrameHeader& out) noexcept;

// Body of an error reply (kFlagError): an ingrid::Errc value and a message for a person.
struct ErrorBody {
  std::uint16_t code = 0;
  std::string message;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(code, message);
  }
};

// Longest message carried in an error reply; longer ones are cut (they are for a person).
inline constexpr std::size_t kMaxErrorMessage = 4096;

// The wire form of `error`: one of our Errc codes with its detail (cut to kMaxErrorMessage), or
// Errc::unavailable with the text of a foreign code.
ErrorBody errorBodyFor(const Error& error);
// The Error an ErrorBody from `remote` carries; code 0 (no error) is itself a protocol error.
Error errorFromBody(ErrorBody body, const std::string& remote);

const char* messageTypeName(MessageType type) noexcept;

}  // namespace ingrid
