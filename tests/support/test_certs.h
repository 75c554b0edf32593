// TestCerts: a throwaway PKI for TLS tests, made at run time with OpenSSL's C API in a fresh
// temporary directory (removed by the destructor): a cluster CA, certificates it signed, and a
// second CA with its own certificate that the cluster does not trust. Nothing is committed.
#pragma once

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "cluster/transport/tls.h"

namespace ingrid::testing {

class TestCerts {
 public:
  TestCerts() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ingrid-tls-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    Issued ca = issue("ingrid test CA", nullptr, true);
    write(ca, "ca");
    write(issue("ingrid member", &ca, false), "member");
    write(issue("ingrid client", &ca, false, "clientAuth"), "client");
    Issued stranger = issue("some other CA", nullptr, true);
    write(stranger, "other-ca");
    write(issue("ingrid impostor", &stranger, false), "impostor");
  }
  ~TestCerts() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  // A member's options: its certificate (signed by the cluster CA) and that CA.
  TlsOptions member() const { return {file("member.crt"), file("member.key"), file("ca.crt")}; }
  // A thin client's: the cluster CA only.
  TlsOptions client() const { return {{}, {}, file("ca.crt")}; }
  // A client's certificate (the cluster CA signed it, for clientAuth only), and that CA.
  TlsOptions clientCertificate() const {
    return {file("client.crt"), file("client.key"), file("ca.crt")};
  }
  // A certificate and CA of another PKI: the cluster trusts neither.
  TlsOptions impostor() const {
    return {file("impostor.crt"), file("impostor.key"), file("other-ca.crt")};
  }
  // The cluster's own certificate, but trusting only the other CA.
  TlsOptions trustingOtherCa() const { return {{}, {}, file("other-ca.crt")}; }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

 private:
  struct Issued {
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key{nullptr, EVP_PKEY_free};
    std::unique_ptr<X509, decltype(&X509_free)> cert{nullptr, X509_free};
  };

  static void check(bool ok, const char* what) {
    if (!ok) throw std::runtime_error(std::string("test certificate: ") + what + " failed");
  }

  // A P-256 key and a certificate for it, signed by `issuer` (self-signed if null).
  static Issued issue(const std::string& name, const Issued* issuer, bool isCa,
                      const char* keyUsage = "serverAuth,clientAuth") {
    Issued out;
    out.key.reset(EVP_EC_gen("P-256"));
    check(out.key != nullptr, "EVP_EC_gen");
    out.cert.reset(X509_new());
    X509* cert = out.cert.get();
    check(X509_set_version(cert, 2) == 1, "X509_set_version");
    static long serial = 1;
    check(ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++) == 1, "serial");
    check(X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != nullptr, "notBefore");
    check(X509_gmtime_adj(X509_getm_notAfter(cert), 7 * 24 * 3600) != nullptr, "notAfter");
    check(X509_set_pubkey(cert, out.key.get()) == 1, "X509_set_pubkey");
    X509_NAME* subject = X509_get_subject_name(cert);
    check(X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                     reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1,
                                     0) == 1,
          "subject");
    X509* signer = issuer ? issuer->cert.get() : cert;
    check(X509_set_issuer_name(cert, X509_get_subject_name(signer)) == 1, "issuer");
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, signer, cert, nullptr, nullptr, 0);
    auto add = [&](int nid, const char* value) {
      X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
      check(ext != nullptr, "extension");
      check(X509_add_ext(cert, ext, -1) == 1, "X509_add_ext");
      X509_EXTENSION_free(ext);
    };
    add(NID_basic_constraints, isCa ? "critical,CA:TRUE" : "critical,CA:FALSE");
    add(NID_key_usage, isCa ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
    if (!isCa) add(NID_ext_key_usage, keyUsage);
    EVP_PKEY* signingKey = issuer ? issuer->key.get() : out.key.get();
    check(X509_sign(cert, signingKey, EVP_sha256()) > 0, "X509_sign");
    return out;
  }

  void write(const Issued& issued, const std::string& name) const {
    auto open = [&](const std::string& suffix) {
      std::FILE* f = std::fopen(file(name + suffix).c_str(), "w");
      check(f != nullptr, "fopen");
      return std::unique_ptr<std::FILE, decltype(&std::fclose)>(f, std::fclose);
    };
    auto crt = open(".crt");
    check(PEM_write_X509(crt.get(), issued.cert.get()) == 1, "PEM_write_X509");
    auto key = open(".key");
    check(PEM_write_PrivateKey(key.get(), issued.key.get(), nullptr, nullptr, 0, nullptr,
                               nullptr) == 1,
          "PEM_write_PrivateKey");
  }

  std::filesystem::path dir_;
};

}  // namespace ingrid::testing
