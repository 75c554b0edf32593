#include "cluster/admission.h"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cluster/transport/messages.h"

using namespace ingrid;

namespace {

const AdmissionPolicy kOpen{};
const AdmissionPolicy kClientSecret{/*clientSecret=*/true, /*clusterSecret=*/true};
const SenderFacts kStranger{};
const SenderFacts kMember3{3, false, false, std::nullopt};

std::string raftFrom(std::uint64_t sender) {
  std::string out(1, '\x01');
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((sender >> (8 * i)) & 0xff));
  return out;
}

Verdict verdict(const SenderFacts& s, MessageType t, const std::string& body, Port port,
                const AdmissionPolicy& policy = kOpen) {
  return admit(s, t, body, port, policy).verdict;
}

}  // namespace

TEST_CASE("Admission: who may send what, on which port", "[cluster][admission]") {
  SECTION("anyone says Hello and Auth on either port; Join only on the member port") {
    for (Port port : {Port::kMember, Port::kShard}) {
      CHECK(verdict(kStranger, MessageType::kHello, {}, port) == Verdict::kAdmit);
      CHECK(verdict(kStranger, MessageType::kAuth, {}, port) == Verdict::kAdmit);
    }
    CHECK(verdict(kStranger, MessageType::kJoin, {}, Port::kMember) == Verdict::kAdmit);
    CHECK(verdict(kStranger, MessageType::kJoin, {}, Port::kShard) == Verdict::kWrongPort);
  }
  SECTION("callers invoke on either port; topology, heartbeat and status on the member port") {
    CHECK(verdict(kStranger, MessageType::kInvoke, {}, Port::kShard) == Verdict::kAdmit);
    CHECK(verdict(kStranger, MessageType::kInvoke, {}, Port::kMember) == Verdict::kAdmit);
    for (MessageType t :
         {MessageType::kGetTopology, MessageType::kHeartbeat, MessageType::kStatus}) {
      CHECK(verdict(kStranger, t, {}, Port::kMember) == Verdict::kAdmit);
      CHECK(verdict(kStranger, t, {}, Port::kShard) == Verdict::kWrongPort);
    }
  }
  SECTION("members' messages only from a member's link") {
    for (MessageType t :
         {MessageType::kTopologyPrepare, MessageType::kReplicate, MessageType::kSnapshot,
          MessageType::kSynced, MessageType::kLeave, MessageType::kRaft, MessageType::kLease}) {
      INFO(messageTypeName(t));
      CHECK(verdict(kStranger, t, {}, Port::kMember) == Verdict::kMembersOnly);
    }
    CHECK(verdict(kMember3, MessageType::kReplicate, {}, Port::kShard) == Verdict::kAdmit);
    CHECK(verdict(kMember3, MessageType::kSnapshot, {}, Port::kShard) == Verdict::kAdmit);
    CHECK(verdict(kMember3, MessageType::kRaft, raftFrom(3), Port::kShard) == Verdict::kWrongPort);
  }
  SECTION("a member's replication comes only on its one path to this member") {
    for (MessageType t : {MessageType::kReplicate, MessageType::kSnapshot}) {
      INFO(messageTypeName(t));
      const SenderFacts viaShards{3, false, false, Port::kShard};
      const SenderFacts viaMember{3, false, false, Port::kMember};
      CHECK(verdict(viaShards, t, {}, Port::kShard) == Verdict::kAdmit);
      CHECK(verdict(viaShards, t, {}, Port::kMember) == Verdict::kWrongPath);
      CHECK(verdict(viaMember, t, {}, Port::kMember) == Verdict::kAdmit);
      CHECK(verdict(viaMember, t, {}, Port::kShard) == Verdict::kWrongPath);
      const std::string why =
          describeRefusal(admit(viaShards, t, {}, Port::kMember, kOpen), t, Port::kMember,
                          viaShards, "127.0.0.3:1", "member 1", kOpen);
      CHECK(why.find("travels on its shard ports") != std::string::npos);
    }
  }
  SECTION("replies are never requests") {
    CHECK(verdict(kMember3, MessageType::kRedirect, {}, Port::kMember) == Verdict::kWrongPort);
  }
}

TEST_CASE("Admission: nobody speaks for another member", "[cluster][admission]") {
  CHECK(verdict(kMember3, MessageType::kRaft, raftFrom(3), Port::kMember) == Verdict::kAdmit);
  const Admission raft = admit(kMember3, MessageType::kRaft, raftFrom(2), Port::kMember, kOpen);
  CHECK(raft.verdict == Verdict::kForgedSender);
  CHECK(raft.claimed == 2);
  CHECK_THAT(describeRefusal(raft, MessageType::kRaft, Port::kMember, kMember3, "10.0.0.9:5000",
                             "member 1", kOpen),
             Catch::Contains("names member 2") && Catch::Contains("proved member 3"));
  // Too short to name a sender: named 0, refused (it would not decode either).
  CHECK(verdict(kMember3, MessageType::kRaft, std::string(3, '\0'), Port::kMember) ==
        Verdict::kForgedSender);

  CHECK(verdict(kMember3, MessageType::kLeave, encode(LeaveBody{3}), Port::kMember) ==
        Verdict::kAdmit);
  CHECK(verdict(kMember3, MessageType::kLeave, encode(LeaveBody{2}), Port::kMember) ==
        Verdict::kForgedSender);
  CHECK(verdict(kMember3, MessageType::kLease, encode(LeaseBody{3, 1, 1, {}}), Port::kMember) ==
        Verdict::kAdmit);
  CHECK(verdict(kMember3, MessageType::kLease, encode(LeaseBody{4, 1, 1, {}}), Port::kMember) ==
        Verdict::kForgedSender);

  // A committed topology comes from the leader it names, on that member's link only.
  auto committedBy = [](MemberId leader) {
    Topology t;
    t.version = 2;
    t.leader = leader;
    t.members = {MemberInfo{2, "127.0.0.2:1", 1, {}}, MemberInfo{3, "127.0.0.3:1", 1, {}}};
    const std::vector<MemberId> ids{2, 3};
    t.table = PartitionTable::balanced(4, ids, 1);
    t.nextMemberId = 4;
    return encode(TopologyBody{t});
  };
  CHECK(verdict(kMember3, MessageType::kTopologyCommit, committedBy(3), Port::kMember) ==
        Verdict::kAdmit);
  CHECK(verdict(kMember3, MessageType::kTopologyCommit, committedBy(2), Port::kMember) ==
        Verdict::kForgedSender);
  CHECK(verdict(kStranger, MessageType::kTopologyCommit, committedBy(3), Port::kMember) ==
        Verdict::kMembersOnly);
  CHECK(verdict(kMember3, MessageType::kTopologyCommit, committedBy(3), Port::kShard) ==
        Verdict::kWrongPort);
}

TEST_CASE("Admission: the client secret and the connection limit close the connection",
          "[cluster][admission]") {
  const SenderFacts unproven{};
  const SenderFacts proven{0, /*clientAuthenticated=*/true, false, std::nullopt};
  CHECK(verdict(unproven, MessageType::kInvoke, {}, Port::kShard, kClientSecret) ==
        Verdict::kUnauthenticated);
  CHECK(verdict(unproven, MessageType::kGetTopology, {}, Port::kMember, kClientSecret) ==
        Verdict::kUnauthenticated);
  CHECK(verdict(unproven, MessageType::kHello, {}, Port::kMember, kClientSecret) ==
        Verdict::kAdmit);
  CHECK(verdict(proven, MessageType::kInvoke, {}, Port::kMember, kClientSecret) == Verdict::kAdmit);
  CHECK(verdict(kMember3, MessageType::kInvoke, {}, Port::kMember, kClientSecret) ==
        Verdict::kAdmit);
  CHECK(closesConnection(Verdict::kUnauthenticated));
  CHECK_FALSE(closesConnection(Verdict::kForgedSender));

  const SenderFacts over{0, false, /*overLimit=*/true, std::nullopt};
  CHECK(verdict(over, MessageType::kInvoke, {}, Port::kMember) == Verdict::kOverLimit);
  const std::string client = encode(HelloBody{HelloBody::kClient, 0, {}, {}, {}});
  const std::string member = encode(HelloBody{HelloBody::kPeer, 5, "127.0.0.1:1", {}, {}});
  const std::string joiner = encode(HelloBody{HelloBody::kPeer, 0, "127.0.0.1:2", {}, {}});
  CHECK(verdict(over, MessageType::kHello, client, Port::kMember) == Verdict::kOverLimit);
  CHECK(verdict(over, MessageType::kHello, member, Port::kMember) == Verdict::kAdmit);
  CHECK(verdict(over, MessageType::kHello, joiner, Port::kMember) == Verdict::kAdmit);
  CHECK(verdict(over, MessageType::kJoin, {}, Port::kMember) == Verdict::kAdmit);
  // What the reserve is not for closes the connection, even what would only be answered an error.
  CHECK(verdict(over, MessageType::kJoin, {}, Port::kShard) == Verdict::kOverLimit);
  CHECK(verdict(over, MessageType::kRedirect, {}, Port::kMember) == Verdict::kOverLimit);
  CHECK(closesConnection(Verdict::kOverLimit));
}
