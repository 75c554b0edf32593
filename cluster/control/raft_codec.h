// The Raft message codec: libraft's `raft_message` as the bytes of a `Raft` frame
// (docs/wire-format.md, message 13), and back. Pure functions of their arguments; any thread.
//
// Decoding checks every length and count against the bytes that remain before allocating, and
// refuses what libraft would assert on rather than check (ids, terms and snapshot indexes of 0,
// NUL in an address); what it allocates is raft_malloc'ed and owned by the DecodedRaftMessage
// until raft takes it over (release()).
//
// Encoding of one message (all integers little-endian):
//   u8 type (RAFT_IO_APPEND_ENTRIES .. RAFT_IO_TIMEOUT_NOW), u64 sender id, string sender address,
//   then by type:
//   RequestVote:        u64 term, u64 candidate id, u64 last log index, u64 last log term,
//                       u8 disrupt leader, u8 pre-vote
//   RequestVoteResult:  u64 term, u8 vote granted, u8 pre-vote (raft_tribool)
//   AppendEntries:      u64 term, u64 prev log index, u64 prev log term, u64 leader commit,
//                       u32 n, n x {u64 term, u16 type, bytes data}
//   AppendEntriesResult: u64 term, u64 rejected, u64 last log index
//   InstallSnapshot:    u64 term, u64 last index, u64 last term, u64 conf index,
//                       u32 n, n x {u64 id, u8 role, string address}, bytes data
//   TimeoutNow:         u64 term, u64 last log index, u64 last log term
//   where string = u16 length + bytes and bytes = u32 length + bytes. Nothing may follow.
#pragma once

#include <optional>
#include <string>
#include <string_view>

extern "C" {
#include <raft.h>  // a C header without its own extern "C"
}

#include <ingrid/result.h>

namespace ingrid {

// Encodes `m` as sent by server `from` at `fromAddress`. Throws std::length_error if an address
// or a buffer is too long for its length field.
std::string encodeRaftMessage(const raft_message& m, raft_id from, const char* fromAddress);

// The sender id that bytes made by encodeRaftMessage name; nullopt if they are too short to name
// one. Reads only the header: the rest is checked by decodeRaftMessage.
std::optional<raft_id> raftMessageSender(std::string_view bytes);

// A decoded message, and what decoding allocated for it (entries, a snapshot's configuration and
// data), freed with it unless release() handed it over to raft. `message.server_address` points
// into `address`: neither copied nor moved.
struct DecodedRaftMessage {
  DecodedRaftMessage() = default;
  DecodedRaftMessage(const DecodedRaftMessage&) = delete;
  DecodedRaftMessage& operator=(const DecodedRaftMessage&) = delete;
  ~DecodedRaftMessage();
  void release() noexcept;  // raft owns it all now

  raft_message message{};
  std::string address;
  raft_entry* entries = nullptr;
  void* batch = nullptr;
  bool confMade = false;
  void* data = nullptr;
};

// Decodes `bytes` (made by encodeRaftMessage) into `out`, which must be fresh: true. Bytes that
// do not decode give an Error (malformed_message) naming what was wrong.
Result<bool> decodeRaftMessage(std::string_view bytes, DecodedRaftMessage& out);

}  // namespace ingrid
