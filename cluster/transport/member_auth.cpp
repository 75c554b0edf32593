#include "cluster/transport/member_auth.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "cluster/transport/runtime.h"

namespace ingrid::member_auth {
namespace {

void appendU64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Length-prefixed fields, so that no two different inputs give the same message.
void appendField(std::string& out, std::string_view field) {
  appendU64(out, field.size());
  out.append(field);
}

std::string hmac(std::string_view secret, const std::string& message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
           &length) == nullptr ||
      length != kProofBytes) {
    throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  }
  return std::string(reinterpret_cast<const char*>(out), length);
}

std::string handshakeProof(std::string_view label, std::string_view secret,
                           std::string_view dialerNonce, std::string_view acceptorNonce,
                           std::uint64_t dialerId, std::uint64_t acceptorId) {
  std::string message;
  appendField(message, label);
  appendField(message, dialerNonce);
  appendField(message, acceptorNonce);
  appendU64(message, dialerId);
  appendU64(message, acceptorId);
  return hmac(secret, message);
}

}  // namespace

std::string freshNonce() {
  std::string nonce(kNonceBytes, '\0');
  if (SimulatedMember* sim = simulatedMember()) {  // runtime.h: the simulated member's generator
    for (std::size_t i = 0; i < kNonceBytes; i += 8) {
      const std::uint64_t draw = sim->random();
      std::memcpy(nonce.data() + i, &draw, std::min<std::size_t>(8, kNonceBytes - i));
    }
    return nonce;
  }
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(kNonceBytes)) !=
      1) {
    throw std::runtime_error("no random bytes for a nonce (OpenSSL RAND_bytes failed)");
  }
  return nonce;
}

std::string acceptorProof(std::string_view secret, std::string_view dialerNonce,
                          std::string_view acceptorNonce, std::uint64_t dialerId,
                          std::uint64_t acceptorId) {
  return handshakeProof("ingrid/1 accept", secret, dialerNonce, acceptorNonce, dialerId,
                        acceptorId);
}

std::string dialerProof(std::string_view secret, std::string_view dialerNonce,
                        std::string_view acceptorNonce, std::uint64_t dialerId,
                        std::uint64_t acceptorId) {
  return handshakeProof("ingrid/1 dial", secret, dialerNonce, acceptorNonce, dialerId, acceptorId);
}

std::string clientProof(std::string_view secret, std::string_view clientNonce,
                        std::string_view acceptorNonce, std::uint64_t acceptorId) {
  return handshakeProof("ingrid/1 client", secret, clientNonce, acceptorNonce, 0, acceptorId);
}

std::string joinProof(std::string_view secret, std::string_view address, std::uint64_t incarnation,
                      std::string_view joinerNonce, std::string_view acceptorNonce) {
  std::string message;
  appendField(message, "ingrid/2 join");
  appendField(message, address);
  appendU64(message, incarnation);
  appendField(message, joinerNonce);
  appendField(message, acceptorNonce);
  return hmac(secret, message);
}

std::string recoverProof(std::string_view secret, std::uint64_t memberId,
                         std::string_view topologyBytes, std::uint64_t term, std::uint64_t index,
                         bool force) {
  std::string message;
  appendField(message, "ingrid/3 recover");
  appendU64(message, memberId);
  appendField(message, topologyBytes);
  appendU64(message, term);
  appendU64(message, index);
  appendU64(message, force ? 1 : 0);
  return hmac(secret, message);
}

bool sameProof(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ingrid::member_auth
