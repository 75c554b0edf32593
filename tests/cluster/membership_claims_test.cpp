// Membership on proof, never on a claim: a Join naming a live member's address, a replayed or
// unproven Join, a Raft message or a Leave naming another sender, a member with other timing,
// and a wildcard listen address without an advertised one. Raw frames from a RawClient against
// an in-process cluster.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <ingrid/node.h>

#include "cluster/transport/member_auth.h"
#include "cluster/transport/messages.h"
#include "support/grant_audit.h"
#include "support/raw_client.h"
#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::AuditOptions;
using ingrid::testing::eventually;
using ingrid::testing::GrantAudit;
using ingrid::testing::RawClient;
using ingrid::testing::TestCluster;

namespace {

// The Join a process at `address` with `incarnation` sends, with `o`'s timing.
JoinRequest joinLike(const NodeOptions& o, std::string address, std::uint64_t incarnation) {
  JoinRequest j;
  j.address = std::move(address);
  j.partitions = o.partitions;
  j.backups = o.backups;
  j.processors = ProcessorRegistry::withBuiltins().names();
  j.incarnation = incarnation;
  const auto lease = o.leaseDuration.count() > 0 ? o.leaseDuration : o.failureTimeout / 2;
  j.leaseDurationMs = static_cast<std::uint32_t>(lease.count());
  j.failureTimeoutMs = static_cast<std::uint32_t>(o.failureTimeout.count());
  j.dedupWindowMs = static_cast<std::uint32_t>(o.dedupWindow.count());
  return j;
}

Node& leaderOf(TestCluster& cluster) {
  const TopologyPtr t = cluster.at(0).topology();
  Node* leader = cluster.byId(t->coordinator());
  REQUIRE(leader != nullptr);
  return *leader;
}

// Says Hello on `conn` as member `id` and proves the cluster secret `secret` (Auth).
void proveMember(Connection& conn, MemberId id, const std::string& secret) {
  const HelloBody hello{HelloBody::kPeer, id, "127.0.0.1:1", member_auth::freshNonce(), {}};
  Result<Frame> reply = RawClient::send(conn, MessageType::kHello, 0, encode(hello));
  REQUIRE(reply.ok());
  const HelloBody theirs = decode<HelloBody>(reply->body);
  const AuthBody auth{
      member_auth::dialerProof(secret, hello.nonce, theirs.nonce, id, theirs.memberId)};
  Result<Frame> authed = RawClient::send(conn, MessageType::kAuth, 0, encode(auth));
  INFO((authed.ok() ? std::string() : authed.error().message()));
  REQUIRE(authed.ok());
}

// The first bytes of a Raft message (kind, then the sender's id, little-endian) naming `sender`,
// and a body (the rest is never read: the sender is refused first).
std::string raftBytesFrom(std::uint64_t sender) {
  std::string out(1, '\x01');
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((sender >> (8 * i)) & 0xff));
  out.append(32, '\0');
  return out;
}

}  // namespace

TEST_CASE("A Join naming a live member's address with another incarnation removes no one",
          "[cluster][membership]") {
  // Before, the leader failed the member at that address at once: two primaries for its
  // partitions while it still served, and the real process rejoined under a new id.
  NodeOptions o = ingrid::testing::smallClusterOptions();
  TestCluster cluster(o);
  REQUIRE(cluster.start(3));
  Node& leader = leaderOf(cluster);
  const TopologyPtr before = leader.topology();
  const MemberInfo* victim = nullptr;
  for (const MemberInfo& m : before->members) {
    if (m.id != leader.memberId()) victim = &m;
  }
  REQUIRE(victim != nullptr);

  std::vector<std::string> seeds;
  for (Node* n : cluster.live()) seeds.push_back(n->listenAddress());
  AuditOptions ao;
  ao.prefix = "claims";
  ao.callers = 8;
  GrantAudit audit(seeds, ao);
  REQUIRE(audit.start().empty());
  REQUIRE(audit.waitForGrants(100, 20s));

  RawClient raw;
  for (std::uint64_t i = 1; i <= 20; ++i) {
    auto conn = raw.connect(leader.listenAddress());  // no Hello: as the forged frame was sent
    const JoinRequest forged = joinLike(o, victim->address, victim->incarnation + i);
    Result<Frame> reply = RawClient::send(*conn, MessageType::kJoin, 0, encode(forged));
    REQUIRE_FALSE(reply.ok());
    INFO(reply.error().message());
    CHECK(reply.error() == Errc::unavailable);
    CHECK_THAT(reply.error().message(), Catch::Contains("lease"));
  }
  REQUIRE(audit.waitForGrants(100, 20s));  // load ran after the forged joins

  // The member is still there, the same process, in every member's view; nothing changed.
  for (Node* n : cluster.live()) {
    const TopologyPtr t = n->topology();
    const MemberInfo* still = t->member(victim->id);
    REQUIRE(still != nullptr);
    CHECK(still->incarnation == victim->incarnation);
    CHECK(t->members.size() == 3);
  }
  CHECK(cluster.byId(victim->id) != nullptr);
  const auto result = audit.finish();
  INFO(result.worst());
  CHECK(result.summary.doubled == 0);
  CHECK(result.summary.lost == 0);
}

TEST_CASE("With a cluster secret a Join is proven over a Hello's nonces: a replayed one fails",
          "[cluster][membership]") {
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.clusterSecret = "claims-test-secret";
  TestCluster cluster(o);
  REQUIRE(cluster.start(2));
  Node& leader = leaderOf(cluster);
  const std::uint64_t version = leader.topology()->version;
  RawClient raw;

  // A Hello as a joining node on connection A, whose nonce a proof covers.
  auto a = raw.connect(leader.listenAddress());
  const HelloBody hello{HelloBody::kPeer, 0, "127.0.0.1:9", member_auth::freshNonce(), {}};
  Result<Frame> helloReply = RawClient::send(*a, MessageType::kHello, 0, encode(hello));
  REQUIRE(helloReply.ok());
  JoinRequest join = joinLike(o, "127.0.0.1:9", 77);
  join.proof = member_auth::joinProof(o.clusterSecret, join.address, join.incarnation, hello.nonce,
                                      decode<HelloBody>(helloReply->body).nonce);

  SECTION("without a Hello on its connection") {
    auto b = raw.connect(leader.listenAddress());
    Result<Frame> reply = RawClient::send(*b, MessageType::kJoin, 0, encode(join));
    REQUIRE_FALSE(reply.ok());
    CHECK(reply.error() == Errc::join_refused);
    CHECK_THAT(reply.error().message(), Catch::Contains("nonces of a Hello on this connection"));
  }
  SECTION("on another connection, after that one's own Hello") {
    auto b = raw.connect(leader.listenAddress());
    REQUIRE(RawClient::send(*b, MessageType::kHello, 0, encode(hello)).ok());
    Result<Frame> reply = RawClient::send(*b, MessageType::kJoin, 0, encode(join));
    REQUIRE_FALSE(reply.ok());
    CHECK(reply.error() == Errc::join_refused);
  }
  SECTION("with the old proof, over address and incarnation only") {
    JoinRequest old = join;
    old.proof = member_auth::joinProof(o.clusterSecret, join.address, join.incarnation, "", "");
    Result<Frame> reply = RawClient::send(*a, MessageType::kJoin, 0, encode(old));
    REQUIRE_FALSE(reply.ok());
    CHECK(reply.error() == Errc::join_refused);
  }
  // Nobody was admitted.
  CHECK(leader.topology()->version == version);
  CHECK(leader.topology()->members.size() == 2);
}

TEST_CASE("A Raft message, a Lease or a Leave naming another sender is refused",
          "[cluster][membership]") {
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.clusterSecret = "claims-test-secret";
  TestCluster cluster(o);
  REQUIRE(cluster.start(3));
  Node& leader = leaderOf(cluster);
  MemberId other = 0;
  for (Node* n : cluster.live()) {
    if (n->memberId() != leader.memberId()) other = n->memberId();
  }
  REQUIRE(other != 0);
  const std::uint64_t version = leader.topology()->version;

  // A connection that proved itself as member 99 (it knows the secret) speaks for `other`.
  RawClient raw;
  auto conn = raw.connect(leader.listenAddress());
  proveMember(*conn, 99, o.clusterSecret);

  SECTION("Raft") {
    Result<Frame> reply = RawClient::send(*conn, MessageType::kRaft, version, raftBytesFrom(other));
    REQUIRE_FALSE(reply.ok());
    CHECK(reply.error() == Errc::unauthenticated);
    CHECK_THAT(reply.error().message(), Catch::Contains("names member " + std::to_string(other)) &&
                                            Catch::Contains("proved member 99"));
  }
  SECTION("Leave") {
    Result<Frame> reply =
        RawClient::send(*conn, MessageType::kLeave, version, encode(LeaveBody{other}));
    REQUIRE_FALSE(reply.ok());
    CHECK(reply.error() == Errc::unauthenticated);
    CHECK_THAT(reply.error().message(), Catch::Contains("nobody speaks for another"));
  }
  SECTION("Lease") {
    Result<Frame> reply = RawClient::send(*conn, MessageType::kLease, version,
                                          encode(LeaseBody{other, 1, version, {}}));
    REQUIRE_FALSE(reply.ok());
    CHECK(reply.error() == Errc::unauthenticated);
  }
  // `other` is still a member, in every view.
  for (Node* n : cluster.live()) CHECK(n->topology()->hasMember(other));
  CHECK(leader.topology()->version == version);
}

TEST_CASE("A node whose lease or failure timeout differs from the cluster's is refused at Join",
          "[cluster][membership]") {
  // A member with a longer lease than a new leader waits out could still grant after that
  // leader promoted its backups: every member must share the timing.
  NodeOptions o = ingrid::testing::smallClusterOptions();
  TestCluster cluster(o);
  REQUIRE(cluster.start(1));
  NodeOptions j = o;
  j.listenAddress = "127.0.0.1:0";
  j.seeds = {cluster.at(0).listenAddress()};
  j.leaseDuration = o.failureTimeout / 2 + 1000ms;
  Node joiner(j, ProcessorRegistry::withBuiltins());
  Result<bool> started = joiner.start();
  REQUIRE_FALSE(started.ok());
  INFO(started.error().message());
  CHECK(started.error() == Errc::join_refused);
  CHECK_THAT(started.error().message(), Catch::Contains("timing differs") &&
                                            Catch::Contains("leaseDuration 5000 ms") &&
                                            Catch::Contains("leaseDuration 6000 ms"));
  CHECK(cluster.at(0).topology()->members.size() == 1);
}

TEST_CASE("A wildcard listen address needs an advertised one, which the cluster lists",
          "[cluster][membership]") {
  NodeOptions o = ingrid::testing::smallClusterOptions();
  TestCluster cluster(o);
  REQUIRE(cluster.start(1));
  NodeOptions j = o;
  j.listenAddress = "0.0.0.0:0";
  j.seeds = {cluster.at(0).listenAddress()};
  {
    Node unreachable(j, ProcessorRegistry::withBuiltins());
    Result<bool> started = unreachable.start();
    REQUIRE_FALSE(started.ok());
    CHECK(started.error() == Errc::invalid_configuration);
    CHECK_THAT(started.error().message(), Catch::Contains("advertiseAddress"));
  }
  j.advertiseAddress = "127.0.0.1:0";  // port 0: the port listened on
  Node node(j, ProcessorRegistry::withBuiltins());
  Result<bool> started = node.start();
  INFO((started.ok() ? std::string() : started.error().message()));
  REQUIRE(started.ok());
  const std::string advertised = node.listenAddress();
  CHECK(advertised.rfind("127.0.0.1:", 0) == 0);
  CHECK(advertised != "127.0.0.1:0");
  REQUIRE(eventually([&] {
    const TopologyPtr t = cluster.at(0).topology();
    const MemberInfo* m = t->member(node.memberId());
    return m != nullptr && m->address == advertised && t->syncing.empty();
  }));
  node.stop();
}
