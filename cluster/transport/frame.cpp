#include "cluster/transport/frame.h"

#include <cstdio>

namespace ingrid {
namespace {

template <class T>
void putLe(unsigned char* out, T value) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[i] = static_cast<unsigned char>(value >> (8 * i));
  }
}

template <class T>
T getLe(const unsigned char* in) noexcept {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value = static_cast<T>(value | (static_cast<T>(in[i]) << (8 * i)));
  }
  return value;
}

std::string hex(std::uint32_t value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*X", digits, static_cast<unsigned>(value));
  return buf;
}

}  // namespace

ErrorBody errorBodyFor(const Error& error) {
  ErrorBody body;
  if (error.code().category() == errorCategory() && error.code().value() > 0 &&
      error.code().value() <= 0xFFFF) {
    body.code = static_cast<std::uint16_t>(error.code().value());
    body.message = error.detail();
  } else {  // not one of ours: keep the foreign code's text for the person reading it
    body.code = static_cast<std::uint16_t>(Errc::unavailable);
    body.message = error.message();
  }
  if (body.message.size() > kMaxErrorMessage) body.message.resize(kMaxErrorMessage);
  return body;
}

Error errorFromBody(ErrorBody body, const std::string& remote) {
  if (body.code == 0) {
    return Error(Errc::protocol_error,
                 "error reply from " + remote + " carries error code 0: " + body.message);
  }
  return Error(std::error_code(body.code, errorCategory()), std::move(body.message));
}

HeaderBytes encodeHeader(const FrameHeader& header) noexcept {
  HeaderBytes out{};
  putLe(&out[0], header.magic);
  putLe(&out[4], header.version);
  putLe(&out[6], static_cast<std::uint16_t>(header.type));
  putLe(&out[8], header.flags);
  putLe(&out[10], header.reserved);
  putLe(&out[12], header.bodyLength);
  putLe(&out[16], header.requestId);
  putLe(&out[24], header.topologyVersion);
  return out;
}

std::optional<Error> decodeHeader(const HeaderBytes& bytes, std::uint32_t maxBodyBytes,
                                  FrameHeader& out) noexcept {
  // Checked in this order so that a peer of another protocol version, whose header may differ
  // after the version field, is told about the version and nothing else.
  try {
    const auto magic = getLe<std::uint32_t>(&bytes[0]);
    if (magic != kFrameMagic) {
      return Error(Errc::protocol_error, "bad frame magic " + hex(magic, 8) + " (expected " +
                                             hex(kFrameMagic, 8) + ", \"IGRD\")");
    }
    const auto version = getLe<std::uint16_t>(&bytes[4]);
    if (version != kProtocolVersion) {
      return Error(Errc::protocol_error, "protocol version " + std::to_string(version) +
                                             " not supported (this node speaks " +
                                             std::to_string(kProtocolVersion) + ")");
    }
    const auto type = getLe<std::uint16_t>(&bytes[6]);
    if (type < 1 || type > kMaxMessageType) {
      return Error(Errc::protocol_error, "unknown message type " + std::to_string(type));
    }
    const auto flags = getLe<std::uint16_t>(&bytes[8]);
    if ((flags & ~kKnownFlags) != 0) {
      return Error(Errc::protocol_error, "unknown frame flags " + hex(flags, 4) +
                                             " (known: " + hex(kKnownFlags, 4) + ")");
    }
    if ((flags & kFlagError) != 0 && (flags & kFlagResponse) == 0) {
      return Error(Errc::protocol_error, "frame flags " + hex(flags, 4) +
                                             " set error (0x0002) without response (0x0001)");
    }
    if ((flags & kFlagOneWay) != 0 &&
        ((flags & kFlagResponse) != 0 || type != static_cast<std::uint16_t>(MessageType::kRaft))) {
      return Error(Errc::protocol_error, "frame flags " + hex(flags, 4) +
                                             " set one-way (0x0004) on a reply or on a " +
                                             messageTypeName(static_cast<MessageType>(type)) +
                                             " frame (only a Raft request is one-way)");
    }
    const auto reserved = getLe<std::uint16_t>(&bytes[10]);
    if (reserved != 0) {
      return Error(Errc::protocol_error,
                   "reserved header field is " + std::to_string(reserved) + ", must be 0");
    }
    const auto bodyLength = getLe<std::uint32_t>(&bytes[12]);
    if (bodyLength > maxBodyBytes) {
      return Error(Errc::malformed_message, "frame body of " + std::to_string(bodyLength) +
                                                " bytes exceeds the limit of " +
                                                std::to_string(maxBodyBytes));
    }
    out.magic = magic;
    out.version = version;
    out.type = static_cast<MessageType>(type);
    out.flags = flags;
    out.reserved = reserved;
    out.bodyLength = bodyLength;
    out.requestId = getLe<std::uint64_t>(&bytes[16]);
    out.topologyVersion = getLe<std::uint64_t>(&bytes[24]);
    return std::nullopt;
  } catch (...) {  // only std::bad_alloc from building a message
    return Error(Errc::malformed_message, "");
  }
}

const char* messageTypeName(MessageType type) noexcept {
  switch (type) {
    case MessageType::kHello:
      return "Hello";
    case MessageType::kAuth:
      return "Auth";
    case MessageType::kJoin:
      return "Join";
    case MessageType::kTopologyPrepare:
      return "TopologyPrepare";
    case MessageType::kTopologyCommit:
      return "TopologyCommit";
    case MessageType::kGetTopology:
      return "GetTopology";
    case MessageType::kInvoke:
      return "Invoke";
    case MessageType::kReplicate:
      return "Replicate";
    case MessageType::kSnapshot:
      return "Snapshot";
    case MessageType::kSynced:
      return "Synced";
    case MessageType::kLeave:
      return "Leave";
    case MessageType::kHeartbeat:
      return "Heartbeat";
    case MessageType::kRedirect:
      return "Redirect";
    case MessageType::kRaft:
      return "Raft";
    case MessageType::kLease:
      return "Lease";
    case MessageType::kStatus:
      return "Status";
    case MessageType::kRecover:
      return "Recover";
  }
  return "unknown";
}

}  // namespace ingrid
