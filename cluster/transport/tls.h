// TLS for member and client connections: the OpenSSL context built from TlsOptions
// (tls_options.h), and the words for a failed handshake. Off unless TlsOptions names a CA file
// (docs/ARCHITECTURE.md, "Untrusted input").
//
// Thread safety: TlsOptions is a value; makeTlsContext and describeTlsFailure are pure. A
// context is shared read-only by the connections of one Transport.
#pragma once

#include <memory>
#include <string>
#include <system_error>

#include <asio/ssl/context.hpp>

#include <ingrid/result.h>
#include <ingrid/tls_options.h>

namespace ingrid {

// The context for `options` (TLS 1.2 or later, peers verified against caFile, this side's
// certificate and key if given, checked to match). `who` names the side in errors ("NodeOptions"
// or "ClientOptions"). Errors: invalid_configuration naming the file and OpenSSL's reason, or a
// certificate without its key (or the reverse); a node (needCertificate) without a certificate.
Result<std::shared_ptr<asio::ssl::context>> makeTlsContext(const TlsOptions& options,
                                                           const std::string& who,
                                                           bool needCertificate);

// A failed TLS handshake in words: OpenSSL's reason, the certificate check's verdict when that
// failed, and a hint when the peer plainly does not speak TLS.
std::string describeTlsFailure(const std::error_code& ec, long verifyResult);

// Whether a failed handshake will fail again however often it is retried: the peer's certificate
// is not trusted, or the peer does not speak TLS. Such a dial fails `unauthenticated`, at once.
bool tlsFailureIsFinal(const std::error_code& ec, long verifyResult);

// The first byte of a TLS connection (a handshake record): what a node that requires TLS looks
// for before it starts one, and what a plain member recognizes as a TLS peer.
inline constexpr unsigned char kTlsHandshakeRecord = 0x16;

}  // namespace ingrid
