// NodeImpl's side of a connection's handshake: who the other end is (a client, a member, a
// joining node) from its Hello, and the member's or client's proof of the secret (Auth), under
// TLS with the certificate checks.
#include "cluster/node_impl.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "cluster/pending_auth.h"
#include "cluster/transport/member_auth.h"

namespace ingrid {

void NodeImpl::handleHello(const std::shared_ptr<Connection>& conn, Frame frame, bool link) {
  const HelloBody hello = decode<HelloBody>(frame.body);
  HelloBody mine{HelloBody::kPeer, memberId(), selfAddress_, {}, {}};
  if (hello.role == HelloBody::kClient && !options_.clientSecret.empty()) {
    // The client proves the client secret in its Auth (handleAuth), over both nonces.
    mine.nonce = member_auth::freshNonce();
    conn->handshake = encode(PendingAuth{0, mine.memberId, {}, hello.nonce, mine.nonce});
  } else if (hello.role == HelloBody::kPeer && hello.memberId == 0) {
    // A joining node: its Join on this connection proves the cluster secret over both nonces.
    if (!options_.clusterSecret.empty()) {
      mine.nonce = member_auth::freshNonce();
      conn->handshake = encode(
          PendingAuth{0, mine.memberId, hello.address, hello.nonce, mine.nonce, /*joiner=*/true});
    }
  } else if (hello.role == HelloBody::kPeer) {
    if (auto why = memberCertificateRefusal(*conn)) {
      conn->refuse(Error(Errc::unauthenticated, "member " + std::to_string(memberId()) + " (" +
                                                    selfAddress_ + ") refuses " + conn->remote() +
                                                    ", which says it is member " +
                                                    std::to_string(hello.memberId) + ": " + *why));
      return;
    }
    if (options_.clusterSecret.empty()) {
      acceptMember(conn, hello.memberId, hello.address, link);
    } else {
      // Prove ourselves; the dialer proves itself in its Auth, which decides (handleAuth).
      mine.nonce = member_auth::freshNonce();
      mine.proof = member_auth::acceptorProof(options_.clusterSecret, hello.nonce, mine.nonce,
                                              hello.memberId, mine.memberId);
      conn->handshake = encode(
          PendingAuth{hello.memberId, mine.memberId, hello.address, hello.nonce, mine.nonce});
    }
  }
  conn->reply(frame.header, MessageType::kHello, topology()->version, encode(mine));
}

void NodeImpl::acceptMember(const std::shared_ptr<Connection>& conn, MemberId id,
                            const std::string& address, bool link) {
  conn->peerId = id;
  if (!link) return;
  if (auto peer = linkTo(id, address, /*dialedByThem=*/true)) peer->adopt(conn);
}

void NodeImpl::handleAuth(const std::shared_ptr<Connection>& conn, Frame frame, bool link) {
  const std::string who = "member " + std::to_string(memberId()) + " (" + selfAddress_ + ")";
  if (conn->handshake.empty()) {
    conn->refuse(Error(Errc::protocol_error, who + " got an Auth from " + conn->remote() +
                                                 " without a Hello that asked for one"));
    return;
  }
  const PendingAuth pending = decode<PendingAuth>(std::exchange(conn->handshake, {}));
  const AuthBody auth = decode<AuthBody>(frame.body);
  if (pending.joiner) {
    conn->refuse(Error(Errc::protocol_error, who + " got an Auth from " + conn->remote() +
                                                 ", which said Hello as a joining node: it "
                                                 "proves the secret in its Join"));
    return;
  }
  if (pending.dialerId == 0) {  // a client's proof of the client secret
    if (!member_auth::sameProof(
            auth.proof, member_auth::clientProof(options_.clientSecret, pending.dialerNonce,
                                                 pending.acceptorNonce, pending.acceptorId))) {
      conn->refuse(Error(Errc::unauthenticated, who + " refuses the client at " + conn->remote() +
                                                    ": its proof does not match the client secret "
                                                    "(ClientOptions::clientSecret)"));
      return;
    }
    conn->clientAuthenticated = true;
    conn->reply(frame.header, MessageType::kAuth, topology()->version, {});
    return;
  }
  if (!member_auth::sameProof(
          auth.proof,
          member_auth::dialerProof(options_.clusterSecret, pending.dialerNonce,
                                   pending.acceptorNonce, pending.dialerId, pending.acceptorId))) {
    const std::string why = who + " refuses " + conn->remote() + ", which says it is member " +
                            std::to_string(pending.dialerId) +
                            ": its proof does not match the cluster secret";
    log_.warn({.member = knownMember(memberId()), .peer = knownMember(pending.dialerId)}, why);
    conn->refuse(Error(Errc::unauthenticated, why));
    return;
  }
  acceptMember(conn, pending.dialerId, pending.address, link);
  conn->reply(frame.header, MessageType::kAuth, topology()->version, {});
}

std::optional<std::string> NodeImpl::memberCertificateRefusal(const Connection& conn) const {
  if (!options_.tls.enabled() || conn.peerMemberCertificate) return std::nullopt;
  if (!conn.peerCertified) {
    return std::string(
        "under TLS a member must present a certificate that the cluster's CA "
        "signed (TlsOptions::certificateChainFile)");
  }
  return std::string(
      "its certificate is not a member's: under TLS a member's certificate must "
      "name serverAuth in its extended key usage (a client's names clientAuth "
      "only)");
}

}  // namespace ingrid
