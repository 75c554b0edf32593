// PendingAuth: what an acceptor keeps between a member's Hello and its Auth
// (Connection::handshake), encoded there by handleHello and read by handleAuth and handleJoin
// (internal to the node). Connection thread.
#pragma once

#include <string>

#include <ingrid/topology.h>

namespace ingrid {

struct PendingAuth {
  MemberId dialerId = 0;
  MemberId acceptorId = 0;
  std::string address;
  std::string dialerNonce;
  std::string acceptorNonce;
  bool joiner = false;  // a joining node's Hello: its Join proves the secret, not an Auth
  template <class A>
  void serialize(A& ar) {
    ar(dialerId, acceptorId, address, dialerNonce, acceptorNonce, joiner);
  }
};

}  // namespace ingrid
