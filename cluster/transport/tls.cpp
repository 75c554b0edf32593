#include "cluster/transport/tls.h"

#include <optional>

#include <asio/ssl/error.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace ingrid {
namespace {

// OpenSSL's reason for the last error of this thread (and clears the queue).
std::string lastOpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  const char* reason = ERR_reason_error_string(code);
  return reason != nullptr ? reason : "OpenSSL error " + std::to_string(code);
}

}  // namespace

Result<std::shared_ptr<asio::ssl::context>> makeTlsContext(const TlsOptions& options,
                                                           const std::string& who,
                                                           bool needCertificate) {
  const bool hasCert = !options.certificateChainFile.empty();
  const bool hasKey = !options.privateKeyFile.empty();
  if (!options.enabled()) {  // a certificate or key alone
    return Error(Errc::invalid_configuration,
                 who + ".tls: a certificate or key without a caFile (the caFile turns TLS on)");
  }
  if (hasCert != hasKey) {
    return Error(Errc::invalid_configuration,
                 who + ".tls: " +
                     (hasCert ? "certificateChainFile without privateKeyFile"
                              : "privateKeyFile without certificateChainFile"));
  }
  if (needCertificate && !hasCert) {
    return Error(Errc::invalid_configuration,
                 who +
                     ".tls: a member needs certificateChainFile and privateKeyFile (members "
                     "verify each other's certificates)");
  }
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls);
  SSL_CTX* native = context->native_handle();
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) {
    return Error(Errc::invalid_configuration,
                 who + ".tls: cannot require TLS 1.2 or later: " + lastOpenSslError());
  }
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::single_dh_use);
  // The dialing side fails the handshake on an untrusted certificate; the accepting side asks
  // for one and fails on an untrusted one, but takes a connection without (a thin client): a
  // member's Hello on it is refused later (Connection::peerCertified).
  context->set_verify_mode(asio::ssl::verify_peer);
  auto step = [&](const char* what, const std::string& file, int ok) -> std::optional<Error> {
    if (ok == 1) return std::nullopt;
    return Error(Errc::invalid_configuration,
                 who + ".tls." + what + " '" + file + "': " + lastOpenSslError());
  };
  ERR_clear_error();
  if (auto e = step("caFile", options.caFile,
                    SSL_CTX_load_verify_locations(native, options.caFile.c_str(), nullptr))) {
    return *e;
  }
  if (hasCert) {
    if (auto e = step(
            "certificateChainFile", options.certificateChainFile,
            SSL_CTX_use_certificate_chain_file(native, options.certificateChainFile.c_str()))) {
      return *e;
    }
    if (auto e = step("privateKeyFile", options.privateKeyFile,
                      SSL_CTX_use_PrivateKey_file(native, options.privateKeyFile.c_str(),
                                                  SSL_FILETYPE_PEM))) {
      return *e;
    }
    if (auto e =
            step("privateKeyFile", options.privateKeyFile, SSL_CTX_check_private_key(native))) {
      return *e;
    }
  }
  return context;
}

namespace {

// A TLS record layer that read our plain framing (an error frame, say): the peer is not TLS.
bool plainPeer(const std::error_code& ec) {
  if (ec.category() != asio::error::get_ssl_category()) return false;
  const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
  return reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG;
}

}  // namespace

bool tlsFailureIsFinal(const std::error_code& ec, long verifyResult) {
  return verifyResult != X509_V_OK || plainPeer(ec);
}

std::string describeTlsFailure(const std::error_code& ec, long verifyResult) {
  std::string why = ec.message();
  if (verifyResult != X509_V_OK) {
    why += std::string(" (the peer's certificate: ") + X509_verify_cert_error_string(verifyResult) +
           ")";
  } else if (plainPeer(ec)) {
    why += " (the peer answered in plain TCP, not TLS: is it started without TLS?)";
  } else if (ec == asio::ssl::error::stream_truncated || ec == asio::error::eof) {
    why +=
        " (the peer closed the connection during the handshake: does it speak TLS, and "
        "trust our certificate?)";
  }
  return why;
}

}  // namespace ingrid
