// Member authentication (cluster/transport/member_auth.h): with a cluster secret, members prove it
// to each other in Hello and Auth and a joiner proves it in Join; a connection that has not proved
// it is refused control-plane and replication messages, naming why, and the node keeps serving.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/time.h>

#include <asio.hpp>
#include <chrono>
#include <string>

#include <ingrid/node.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/counter.h>

#include "cluster/transport/frame.h"
#include "cluster/transport/member_auth.h"
#include "cluster/transport/messages.h"
#include "cluster/transport/transport.h"

#include "support/test_cluster.h"

using namespace ingrid;
using ingrid::testing::TestCluster;

namespace {

NodeOptions withSecret(const std::string& secret) {
  NodeOptions o = ingrid::testing::smallClusterOptions(nullptr);
  o.clusterSecret = secret;
  return o;
}

// A blocking socket to a node whose reads give up after 5 s (so a missing answer fails the
// test instead of hanging it).
class Raw {
 public:
  explicit Raw(const std::string& address) : socket_(io_) {
    const auto hostPort = parseAddress(address);
    REQUIRE(hostPort);
    socket_.connect({asio::ip::make_address(hostPort->first), hostPort->second});
    timeval limit{5, 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  void sendBytes(const std::string& bytes) { asio::write(socket_, asio::buffer(bytes)); }
  void send(MessageType type, std::uint64_t id, const std::string& body) {
    FrameHeader h;
    h.type = type;
    h.requestId = id;
    h.bodyLength = static_cast<std::uint32_t>(body.size());
    const HeaderBytes b = encodeHeader(h);
    asio::write(socket_, asio::buffer(std::string(b.begin(), b.end()) + body));
  }
  Frame read() {
    HeaderBytes hb;
    asio::read(socket_, asio::buffer(hb));
    Frame f;
    REQUIRE_FALSE(decodeHeader(hb, kDefaultMaxBodyBytes, f.header));
    f.body.assign(f.header.bodyLength, '\0');
    asio::read(socket_, asio::buffer(f.body));
    return f;
  }
  bool closedByPeer() {
    char c;
    std::error_code ec;
    socket_.read_some(asio::buffer(&c, 1), ec);
    return ec == asio::error::eof;
  }

 private:
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

std::int64_t increment(Node& node, const std::string& key) {
  auto r = node.invoke(key, Increment{1});
  REQUIRE(r.ok());
  return *r;
}

}  // namespace

TEST_CASE(
    "Members with a cluster secret form a cluster and replicate: a node without it or "
    "with another one is refused, naming the secret",
    "[cluster][auth]") {
  TestCluster cluster(withSecret("correct horse battery staple"));
  REQUIRE(cluster.start(3));
  // Writes through every member reach their primaries and backups over authenticated links.
  for (int i = 0; i < 30; ++i) {
    CHECK(increment(cluster.at(static_cast<std::size_t>(i % 3)), "k" + std::to_string(i)) == 1);
  }
  for (const std::string secret : {"another secret", ""}) {
    INFO("joining with secret '" << secret << "'");
    NodeOptions o = withSecret(secret);
    o.listenAddress = "127.0.0.1:0";
    o.seeds = {cluster.at(0).listenAddress()};
    Node stranger(o);
    const auto started = stranger.start();
    REQUIRE_FALSE(started.ok());
    CHECK(started.error() == Errc::join_refused);
    CHECK_THAT(started.error().message(),
               Catch::Contains("did not prove that it knows the cluster secret"));
  }
  CHECK(increment(cluster.at(1), "k0") == 2);  // still serving, nothing changed
}

TEST_CASE(
    "A connection that has not proved the secret is refused member messages and a bad "
    "proof: the node keeps serving",
    "[cluster][auth]") {
  TestCluster cluster(withSecret("s3cret"));
  REQUIRE(cluster.start(1));
  Node& node = cluster.at(0);
  const MemberId self = node.memberId();
  Raw raw(node.listenAddress());

  // A Hello that claims to be member 99: the node proves itself, and waits for our proof.
  HelloBody hello{HelloBody::kPeer, 99, "127.0.0.1:1", member_auth::freshNonce(), {}};
  raw.send(MessageType::kHello, 1, encode(hello));
  const HelloBody theirs = decode<HelloBody>(raw.read().body);
  CHECK(theirs.memberId == self);
  CHECK(member_auth::sameProof(
      theirs.proof, member_auth::acceptorProof("s3cret", hello.nonce, theirs.nonce, 99, self)));
  CHECK_FALSE(member_auth::sameProof(
      theirs.proof, member_auth::acceptorProof("guess", hello.nonce, theirs.nonce, 99, self)));

  // Until then, control and replication messages are refused, naming why.
  raw.send(MessageType::kReplicate, 2, "whatever");
  const Frame refused = raw.read();
  CHECK(refused.header.isError());
  const ErrorBody why = decode<ErrorBody>(refused.body);
  CHECK(why.code == static_cast<std::uint16_t>(Errc::unauthenticated));
  CHECK_THAT(why.message, Catch::Contains("Replicate is taken only on a member's link") &&
                              Catch::Contains("proved that it knows the cluster secret"));

  // A proof made with another secret: refused with an error frame of request id 0, then closed.
  raw.send(
      MessageType::kAuth, 3,
      encode(AuthBody{member_auth::dialerProof("guess", hello.nonce, theirs.nonce, 99, self)}));
  const Frame closing = raw.read();
  CHECK(closing.header.requestId == 0);
  const ErrorBody reason = decode<ErrorBody>(closing.body);
  CHECK(reason.code == static_cast<std::uint16_t>(Errc::unauthenticated));
  CHECK_THAT(reason.message, Catch::Contains("which says it is member 99") &&
                                 Catch::Contains("its proof does not match the cluster secret"));
  CHECK(raw.closedByPeer());
  CHECK(increment(node, "still") == 1);
}

TEST_CASE(
    "Past maxConnections only members' links are taken: clients are refused naming the "
    "limit, a member still joins",
    "[cluster][limits]") {
  NodeOptions o = ingrid::testing::smallClusterOptions(nullptr);
  o.maxConnections = 2;
  TestCluster cluster(o);
  REQUIRE(cluster.start(1));
  Node& node = cluster.at(0);
  Raw first(node.listenAddress()), second(node.listenAddress());
  for (Raw* r : {&first, &second}) {
    r->send(MessageType::kGetTopology, 1, {});
    CHECK_FALSE(r->read().header.isError());
  }
  Raw third(node.listenAddress());
  third.send(MessageType::kGetTopology, 1, {});
  const Frame refused = third.read();
  CHECK(refused.header.requestId == 0);
  const ErrorBody why = decode<ErrorBody>(refused.body);
  CHECK(why.code == static_cast<std::uint16_t>(Errc::overloaded));
  CHECK_THAT(why.message, Catch::Contains("2 connections are open, the limit (maxConnections)"));
  CHECK(third.closedByPeer());
  // A second member joins and links up through the members' reserve: the cluster settles.
  REQUIRE(cluster.start(1));
  CHECK(cluster.live().size() == 2);
  CHECK(increment(cluster.at(1), "after") == 1);
}

TEST_CASE(
    "Connections that trickle large frames hold at most maxBufferedBytes in all: past it a frame "
    "is refused naming the limit, and the node serves everyone else",
    "[cluster][limits]") {
  NodeOptions o = ingrid::testing::smallClusterOptions(nullptr);
  o.maxBufferedBytes = std::size_t{1} << 20;
  TestCluster cluster(o);
  REQUIRE(cluster.start(1));
  Node& node = cluster.at(0);
  FrameHeader h;
  h.type = MessageType::kInvoke;
  h.requestId = 5;
  h.bodyLength = 4u << 20;  // announced; only part of it is sent
  const HeaderBytes header = encodeHeader(h);
  // Eight that send 256 KiB of their frame and then nothing: at most 1 MiB held in all.
  std::vector<std::unique_ptr<Raw>> tricklers;
  for (int i = 0; i < 8; ++i) {
    tricklers.push_back(std::make_unique<Raw>(node.listenAddress()));
    tricklers.back()->sendBytes(std::string(header.begin(), header.end()) +
                                std::string(256 * 1024, 'x'));
  }
  // One whose frame needs a 2 MiB buffer is refused whatever the others hold, with a reply that
  // names the limit.
  Raw greedy(node.listenAddress());
  greedy.sendBytes(std::string(header.begin(), header.end()) +
                   std::string((std::size_t{1} << 20) + 1, 'g'));
  const Frame refused = greedy.read();
  CHECK(refused.header.isError());
  CHECK(refused.header.requestId == 5);
  const ErrorBody why = decode<ErrorBody>(refused.body);
  CHECK(why.code == static_cast<std::uint16_t>(Errc::overloaded));
  CHECK_THAT(why.message, Catch::Contains("past the limit of 1048576 (maxBufferedBytes)"));
  CHECK(greedy.closedByPeer());
  // The node serves a client and its own callers meanwhile.
  Raw client(node.listenAddress());
  client.send(MessageType::kGetTopology, 1, {});
  CHECK_FALSE(client.read().header.isError());
  CHECK(increment(node, "served") == 1);
}
