// Member authentication: members prove to each other that they know the cluster secret
// (NodeOptions::clusterSecret) with HMAC-SHA256 over fresh nonces, so that only members can
// send control-plane and replication messages (docs/wire-format.md, "Member authentication").
//
//   dialer   -> Hello {role peer, memberId, address, nonce D}
//   acceptor <- Hello {role peer, memberId, address, nonce A, proof HMAC(s, "accept" D A ids)}
//   dialer   -> Auth  {proof HMAC(s, "dial" A D ids)}        (after checking the acceptor's)
//
// Each side's proof covers the other side's fresh nonce, so a recorded exchange proves nothing
// later. A thin client proves the client secret the same way (Hello with role client and a
// nonce, the member's nonce in its reply, then Auth with clientProof). A joining node says Hello
// (role peer, member id 0, nonce J), and its Join on that connection carries HMAC(s, "join"
// address incarnation J A): a recorded Join proves nothing on another connection.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ingrid::member_auth {

inline constexpr std::size_t kNonceBytes = 16;
inline constexpr std::size_t kProofBytes = 32;  // HMAC-SHA256

// kNonceBytes from the operating system's random source (OpenSSL RAND_bytes); in a simulation
// (runtime.h), from the simulated member's generator.
std::string freshNonce();

// The acceptor's proof, for the dialer's nonce and its own, the dialer's claimed id and its own.
std::string acceptorProof(std::string_view secret, std::string_view dialerNonce,
                          std::string_view acceptorNonce, std::uint64_t dialerId,
                          std::uint64_t acceptorId);
// The dialer's proof: the same inputs under another label, so neither proof answers the other.
std::string dialerProof(std::string_view secret, std::string_view dialerNonce,
                        std::string_view acceptorNonce, std::uint64_t dialerId,
                        std::uint64_t acceptorId);
// A thin client's proof of the client secret (NodeOptions::clientSecret), for its nonce and the
// node's, to the member `acceptorId`: a third label, so that no member proof answers it.
std::string clientProof(std::string_view secret, std::string_view clientNonce,
                        std::string_view acceptorNonce, std::uint64_t acceptorId);
// A joining node's proof, for its nonce and the acceptor's (from the Hello on the same
// connection).
std::string joinProof(std::string_view secret, std::string_view address, std::uint64_t incarnation,
                      std::string_view joinerNonce, std::string_view acceptorNonce);

// An operator's proof for a kRecover to member `memberId`: over the encoded recovered topology,
// the Raft term and log index, and `force`. A recorded one replays nothing new: the member then
// holds that topology already and refuses it as not newer.
std::string recoverProof(std::string_view secret, std::uint64_t memberId,
                         std::string_view topologyBytes, std::uint64_t term, std::uint64_t index,
                         bool force);

// Constant-time comparison of two proofs (false on a length mismatch).
bool sameProof(std::string_view a, std::string_view b) noexcept;

}  // namespace ingrid::member_auth
