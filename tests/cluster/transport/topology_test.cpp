// Topology validation: every decoded topology is checked before a node or client uses it, and a
// replacement must be able to follow the installed one (checked decoding).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include <ingrid/processors/codec.h>
#include <ingrid/topology.h>

#include "cluster/transport/messages.h"

using namespace ingrid;

namespace {

// Three members, 8 partitions, one backup, committed at v5 in term 2.
Topology valid() {
  Topology t;
  t.version = 5;
  t.term = 2;
  t.leader = 1;
  t.members = {
      {1, "127.0.0.1:1", 11, {}}, {2, "127.0.0.1:2", 12, {4000, 4001}}, {3, "127.0.0.1:3", 13, {}}};
  t.nextMemberId = 4;
  const std::vector<MemberId> ids{1, 2, 3};
  t.table = PartitionTable::balanced(8, ids, 1);
  t.stampEpochs(nullptr);
  return t;
}

// What decoding `t` from the wire says: "" if it decodes, else the reason.
std::string decodeFailure(const Topology& t) {
  try {
    (void)decode<TopologyBody>(encode(TopologyBody{t}));
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("A decoded topology is validated before use", "[cluster][topology]") {
  CHECK(decodeFailure(valid()).empty());
  Topology t = valid();
  SECTION("no partitions (a client would divide by zero)") {
    t.table = PartitionTable();
    t.epochs.clear();
    CHECK_THAT(decodeFailure(t), Catch::Contains("topology v5 is invalid: it has no partitions"));
  }
  SECTION("version 2^64-1 blocks every later one") {
    t.version = std::numeric_limits<std::uint64_t>::max();
    CHECK_THAT(decodeFailure(t), Catch::Contains("leaves no room for a later one"));
  }
  SECTION("repeated member ids") {
    t.members[1].id = 1;
    CHECK_THAT(decodeFailure(t), Catch::Contains("member ids not strictly ascending (1 then 1)"));
  }
  SECTION("member id 0") {
    t.members[0].id = 0;
    CHECK_THAT(decodeFailure(t), Catch::Contains("member id 0"));
  }
  SECTION("a member without an address") {
    t.members[2].address.clear();
    CHECK_THAT(decodeFailure(t), Catch::Contains("member 3 has no address"));
  }
  SECTION("an owner that is not a member") {
    t.members.pop_back();
    CHECK_THAT(decodeFailure(t), Catch::Contains("owned by member 3, which is not a member"));
  }
  SECTION("a syncing replica of a partition that does not exist") {
    t.syncing.push_back(SyncingReplica{99, 1, 5, false});
    CHECK_THAT(decodeFailure(t), Catch::Contains("(partition 99, member 1) is not an owner"));
  }
  SECTION("an epoch newer than the version") {
    t.epochs[3] = 6;
    CHECK_THAT(decodeFailure(t),
               Catch::Contains("partition 3 has epoch 6, newer than the version"));
  }
  SECTION("too many backups") {
    t.backups = kMaxOwnersPerPartition;
    CHECK_THAT(decodeFailure(t), Catch::Contains("backups, more than the limit"));
  }
}

TEST_CASE("A topology replaces the installed one only if it can follow it", "[cluster][topology]") {
  const Topology cur = valid();
  Topology next = valid();
  next.version = 6;
  CHECK_FALSE(successorInvalidReason(cur, next));
  next.term = 3;  // a later term is fine
  CHECK_FALSE(successorInvalidReason(cur, next));

  SECTION("not newer") {
    next.version = 5;
    REQUIRE(successorInvalidReason(cur, next));
    CHECK_THAT(*successorInvalidReason(cur, next), Catch::Contains("is not newer than v5"));
  }
  SECTION("an older term") {
    next.term = 1;
    REQUIRE(successorInvalidReason(cur, next));
    CHECK_THAT(*successorInvalidReason(cur, next),
               Catch::Contains("has term 1, older than term 2 of v5"));
  }
  SECTION("another partition count") {
    const std::vector<MemberId> ids{1, 2, 3};
    next.table = PartitionTable::balanced(16, ids, 1);
    REQUIRE(successorInvalidReason(cur, next));
    CHECK_THAT(*successorInvalidReason(cur, next),
               Catch::Contains("has 16 partitions, the cluster has 8"));
  }
}

TEST_CASE("SharedTopology: each load sees the latest store, whichever instance and thread",
          "[cluster][topology]") {
  auto version = [](std::uint64_t v) {
    auto t = std::make_shared<Topology>(valid());
    t->version = v;
    return TopologyPtr(t);
  };
  SharedTopology a;
  SharedTopology b;
  CHECK(a.load() == nullptr);
  a.store(version(1));
  b.store(version(100));
  // One thread reading two instances in turn: each answers with its own (the per-thread copy of
  // one is never taken for the other's).
  for (std::uint64_t v = 2; v < 6; ++v) {
    CHECK(a.load()->version == v - 1);
    CHECK(b.load()->version == 100 + v - 2);
    a.store(version(v));
    b.store(version(100 + v - 1));
    CHECK(a.load()->version == v);
    CHECK(b.load()->version == 100 + v - 1);
  }
  // A store on another thread is seen by the next load here, and a load there sees this
  // thread's store; versions a thread reads never go back.
  std::atomic<bool> stop{false};
  std::atomic<bool> wentBack{false};
  std::thread reader([&] {
    std::uint64_t last = 0;
    for (int i = 0; i < 200000 && !stop.load(); ++i) {
      const std::uint64_t v = a.load()->version;
      if (v < last) wentBack = true;
      last = v;
    }
  });
  for (std::uint64_t v = 6; v < 2000; ++v) a.store(version(v));
  stop = true;
  reader.join();
  CHECK_FALSE(wentBack);
  std::thread([&] { CHECK(a.load()->version == 1999); }).join();
  a.store(version(3000));
  CHECK(a.load()->version == 3000);
}
