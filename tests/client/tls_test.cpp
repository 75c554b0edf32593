// TLS (NodeOptions::tls, ClientOptions::tls): a cluster whose members verify each other's
// certificates, and a thin client that verifies theirs; a peer without TLS, or with a
// certificate the cluster's CA did not sign, is refused with an error that names the reason.
// The certificates are made at run time (support/test_certs.h); no key is in the repository.
#include <ingrid/client.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>

#include <asio/io_context.hpp>

#include <ingrid/node.h>
#include <ingrid/processors/counter.h>

#include "cluster/transport/messages.h"
#include "cluster/transport/tls.h"
#include "cluster/transport/transport.h"

#include "support/test_certs.h"
#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::TestCerts;
using ingrid::testing::TestCluster;

namespace {

NodeOptions withTls(const TestCerts& certs) {
  NodeOptions o = ingrid::testing::smallClusterOptions(nullptr);
  o.tls = certs.member();
  return o;
}

ClientOptions tlsClientOf(TestCluster& cluster, TlsOptions tls) {
  ClientOptions c;
  for (Node* n : cluster.live()) c.seeds.push_back(n->listenAddress());
  c.tls = std::move(tls);
  return c;
}

// Starts a node that joins `cluster` with `tls`; returns why it could not.
std::string joinRefusal(TestCluster& cluster, TlsOptions tls) {
  NodeOptions o = ingrid::testing::smallClusterOptions(nullptr);
  o.tls = std::move(tls);
  o.listenAddress = "127.0.0.1:0";
  o.seeds = {cluster.at(0).listenAddress()};
  o.joinTimeout = 2s;
  Node node(o);
  const auto started = node.start();
  if (started.ok()) return "it joined";
  return started.error().message();
}

}  // namespace

TEST_CASE(
    "With TLS, three members form a cluster, replicate, and serve a thin client: clients and "
    "members without TLS or with an untrusted certificate are refused, naming the reason",
    "[client][tls]") {
  TestCerts certs;
  TestCluster cluster(withTls(certs));
  REQUIRE(cluster.start(3));
  REQUIRE(cluster.live().size() == 3);
  // Writes through every member reach primaries and backups (sync replication) over TLS.
  for (int i = 0; i < 30; ++i) {
    auto r =
        cluster.at(static_cast<std::size_t>(i % 3)).invoke("k" + std::to_string(i), Increment{1});
    REQUIRE(r.ok());
    CHECK(*r == 1);
  }
  Client client(tlsClientOf(cluster, certs.client()));
  REQUIRE(client.start().ok());
  CHECK(client.topology()->members.size() == 3);
  for (int i = 0; i < 30; ++i) {
    auto r = client.invoke("k" + std::to_string(i), Increment{1});
    REQUIRE(r.ok());
    CHECK(*r == 2);
  }

  SECTION("a client without TLS") {
    Client plain(tlsClientOf(cluster, {}));
    const auto started = plain.start();
    REQUIRE_FALSE(started.ok());
    CHECK(started.error() == Errc::unauthenticated);
    CHECK_THAT(started.error().message(),
               Catch::Contains("requires TLS") && Catch::Contains("speaks plain TCP"));
  }
  SECTION("a client that does not trust the members' CA") {
    Client wary(tlsClientOf(cluster, certs.trustingOtherCa()));
    const auto started = wary.start();
    REQUIRE_FALSE(started.ok());
    CHECK(started.error() == Errc::unauthenticated);
    CHECK_THAT(started.error().message(), Catch::Contains("TLS handshake failed") &&
                                              Catch::Contains("certificate verify failed"));
  }
  SECTION("a node with another CA's certificate, or without TLS, cannot join") {
    CHECK_THAT(joinRefusal(cluster, certs.impostor()),
               Catch::Contains("certificate verify failed"));
    CHECK_THAT(joinRefusal(cluster, {}), Catch::Contains("requires TLS"));
  }
  SECTION("a node with a client's certificate (clientAuth only) cannot join as a member") {
    CHECK_THAT(joinRefusal(cluster, certs.clientCertificate()),
               Catch::Contains("not a member's") && Catch::Contains("serverAuth"));
  }
  // The members carry on serving the client.
  auto again = client.invoke("k0", Increment{1});
  REQUIRE(again.ok());
  CHECK(*again == 3);
}

TEST_CASE("A TLS client of a member without TLS is told the member answered in plain TCP",
          "[client][tls]") {
  TestCerts certs;
  TestCluster cluster(ingrid::testing::smallClusterOptions(nullptr));
  REQUIRE(cluster.start(1));
  ClientOptions c = tlsClientOf(cluster, certs.client());
  Client client(c);
  const auto started = client.start();
  REQUIRE_FALSE(started.ok());
  CHECK_THAT(started.error().message(),
             Catch::Contains("TLS handshake failed") && Catch::Contains("plain TCP, not TLS"));
}

TEST_CASE("TLS options that cannot work are refused at start, naming the file and the reason",
          "[client][tls]") {
  TestCerts certs;
  NodeOptions o = ingrid::testing::smallClusterOptions(nullptr);
  o.listenAddress = "127.0.0.1:0";
  SECTION("a member without its certificate") {
    o.tls = certs.client();
    Node node(o);
    const auto started = node.start();
    REQUIRE_FALSE(started.ok());
    CHECK(started.error() == Errc::invalid_configuration);
    CHECK_THAT(started.error().message(), Catch::Contains("a member needs certificateChainFile"));
  }
  SECTION("a CA file that is not there") {
    o.tls = certs.member();
    o.tls.caFile = certs.file("missing.crt");
    Node node(o);
    const auto started = node.start();
    REQUIRE_FALSE(started.ok());
    CHECK(started.error() == Errc::invalid_configuration);
    CHECK_THAT(started.error().message(), Catch::Contains("caFile '" + certs.file("missing.crt")));
  }
  SECTION("a key that is not the certificate's") {
    o.tls = certs.member();
    o.tls.privateKeyFile = certs.file("client.key");
    Node node(o);
    const auto started = node.start();
    REQUIRE_FALSE(started.ok());
    CHECK_THAT(started.error().message(), Catch::Contains("privateKeyFile"));
  }
}

namespace {

class RefuseAll : public ConnectionHandler {
 public:
  void onRequest(const std::shared_ptr<Connection>& conn, Frame frame) override {
    conn->replyError(frame.header, Error(Errc::protocol_error, "a test dialer serves nothing"));
  }
  void onClosed(const std::shared_ptr<Connection>&, const Error&) override {}
};

}  // namespace

TEST_CASE("Under TLS, a Hello as a member without a certificate the CA signed is refused",
          "[client][tls]") {
  TestCerts certs;
  TestCluster cluster(withTls(certs));
  REQUIRE(cluster.start(1));
  asio::io_context io;
  RefuseAll handler;
  TransportOptions topts;
  auto context = makeTlsContext(certs.client(), "test", /*needCertificate=*/false);
  REQUIRE(context.ok());
  topts.tls = context.value();
  Transport transport(io, topts, handler);
  std::optional<Result<Frame>> answer;
  transport.connect(cluster.at(0).listenAddress(), [&](Result<std::shared_ptr<Connection>> c) {
    if (!c) {
      answer = std::move(c).error();
      return;
    }
    CHECK(c.value()->peerCertified);  // the member's certificate was verified
    c.value()->request(MessageType::kHello, 0,
                       encode(HelloBody{HelloBody::kPeer, 99, "127.0.0.1:1", {}, {}}), 5s,
                       [&](Result<Frame> r) { answer = std::move(r); });
  });
  for (int i = 0; i < 2000 && !answer; ++i) io.run_for(5ms);  // at most 10 s
  transport.stop();
  io.run_for(1s);
  REQUIRE(answer.has_value());
  REQUIRE_FALSE(answer->ok());
  CHECK(answer->error() == Errc::unauthenticated);
  CHECK_THAT(answer->error().message(),
             Catch::Contains("which says it is member 99") &&
                 Catch::Contains("must present a certificate that the cluster's CA signed"));
}
