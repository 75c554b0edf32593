// TlsOptions: where a node's or a client's TLS certificates come from (cluster/transport/tls.h
// builds the context). A plain struct, apart from tls.h so that options headers need no OpenSSL.
#pragma once

#include <string>

namespace ingrid {

struct TlsOptions {
  // PEM file with this side's certificate, then any intermediate CA certificates. A node needs
  // one (members present it to each other: mutual TLS); a client needs none. Default: empty.
  std::string certificateChainFile = {};
  // PEM file with the private key of that certificate (unencrypted). Default: empty.
  std::string privateKeyFile = {};
  // PEM file with the CA certificate(s) a peer's certificate must chain to. Setting it turns TLS
  // on: every connection is TLS 1.2 or later, the side that dials verifies the certificate of the
  // side it reaches, and a member's link (and a Join) must present one too. Member and client
  // certificates are told apart by their extended key usage, checked by the member that accepts
  // a link or a Join: a member's must name serverAuth (members serve each other) and clientAuth
  // (they dial each other); one that names clientAuth only (a client's), or has no extended key
  // usage, is refused as a member's. The certificate's name is not checked: the CA is the
  // cluster's own.
  // Default: empty (TLS off: plain TCP).
  std::string caFile = {};

  bool enabled() const noexcept { return !caFile.empty(); }
  // Whether any field is set (a certificate without a caFile is a configuration error).
  bool configured() const noexcept {
    return !caFile.empty() || !certificateChainFile.empty() || !privateKeyFile.empty();
  }
};

}  // namespace ingrid
