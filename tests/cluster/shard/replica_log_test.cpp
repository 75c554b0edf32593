// The backup's rule for replicated updates (cluster/shard/replica_log.h), and the epochs the
// control plane stamps on committed topologies (Topology::stampEpochs).
#include "cluster/shard/replica_log.h"

#include <catch2/catch.hpp>

#include <ingrid/topology.h>

#include "cluster/transport/messages.h"

using namespace ingrid;

TEST_CASE("A backup applies the next update of its primary and nothing else",
          "[cluster][replication]") {
  // Backup holds update 10 of epoch 5; its topology gives the partition epoch 5.
  CHECK(judgeUpdate(10, 5, 5, 11, 5, 5) == UpdateVerdict::kApply);
  CHECK(judgeUpdate(10, 5, 5, 10, 5, 5) == UpdateVerdict::kDuplicate);  // a retry
  CHECK(judgeUpdate(10, 5, 5, 3, 5, 5) == UpdateVerdict::kDuplicate);   // an old retry
  CHECK(judgeUpdate(10, 5, 5, 12, 5, 5) == UpdateVerdict::kResync);     // a gap
  // A new primary (epoch 7) continues from the same history.
  CHECK(judgeUpdate(10, 5, 7, 11, 7, 5) == UpdateVerdict::kApply);
  // The backup's topology is older than the primary's: still judged by the history.
  CHECK(judgeUpdate(10, 5, 5, 11, 7, 5) == UpdateVerdict::kApply);
}

TEST_CASE(
    "A backup never acknowledges a deposed primary's update, nor confuses it with the "
    "new primary's",
    "[cluster][replication]") {
  // The deposed primary of epoch 5 applied update 11 locally (never acknowledged); the new
  // primary of epoch 7 made its own update 11. The deposed member, now a backup, holds (11, 5):
  // the new primary's update 11 is not "already applied", it must resync.
  CHECK(judgeUpdate(11, 5, 7, 11, 7, 5) == UpdateVerdict::kResync);
  CHECK(judgeUpdate(11, 5, 7, 12, 7, 7) == UpdateVerdict::kResync);  // prevEpoch differs too
  // A backup that took the new primary's updates refuses the deposed primary's.
  CHECK(judgeUpdate(11, 7, 7, 12, 5, 5) == UpdateVerdict::kStale);
  CHECK(judgeUpdate(11, 7, 7, 11, 5, 5) == UpdateVerdict::kStale);
  // Its topology already names the epoch-7 primary, before any of its updates arrived.
  CHECK(judgeUpdate(10, 5, 7, 11, 5, 5) == UpdateVerdict::kStale);
}

TEST_CASE("A fresh replica starts at epoch 0", "[cluster][replication]") {
  CHECK(judgeUpdate(0, 0, 1, 1, 1, 0) == UpdateVerdict::kApply);
  CHECK(judgeUpdate(0, 0, 0, 1, 0, 0) == UpdateVerdict::kApply);  // unstamped (no cluster)
  CHECK(judgeUpdate(0, 0, 1, 2, 1, 1) == UpdateVerdict::kResync);
}

TEST_CASE("Epochs follow primaries: kept while a primary stays, the version when it changes",
          "[cluster][replication]") {
  Topology t1;
  t1.version = 4;
  t1.table = PartitionTable(3, {{1, 2}, {2, 1}, {1, 2}});
  t1.stampEpochs(nullptr);
  CHECK(t1.epochs == std::vector<std::uint64_t>{4, 4, 4});
  CHECK(t1.primariesChangedAt() == 4);

  Topology t2 = t1;
  t2.version = 5;
  t2.table = PartitionTable(3, {{1, 2, 3}, {2, 1}, {1, 2}});  // a backup added: same primaries
  t2.stampEpochs(&t1);
  CHECK(t2.epochs == std::vector<std::uint64_t>{4, 4, 4});

  Topology t3 = t2;
  t3.version = 6;
  t3.table = PartitionTable(3, {{3, 1}, {2, 1}, {1, 3}});  // partition 0 moves to member 3
  t3.stampEpochs(&t2);
  CHECK(t3.epochs == std::vector<std::uint64_t>{6, 4, 4});
  CHECK(t3.primariesChangedAt() == 6);
  CHECK(t3.epoch(7) == 0);  // out of range: unstamped
}

TEST_CASE("A replication batch joined from updates encoded alone is the list it decodes to",
          "[cluster][replication]") {
  ReplicateBatch batch;
  std::vector<std::string> encoded;  // each update as the primary encodes it, from views
  for (std::uint32_t i = 0; i < 3; ++i) {
    ReplicateBody u;
    u.partition = 7 + i;
    u.seq = 100 + i;
    u.epoch = 5;
    u.prevEpoch = 4;
    u.kind = i == 2 ? ReplicateBody::kRemove : ReplicateBody::kPut;
    u.key = "key-" + std::to_string(i);
    u.value = i == 2 ? "" : std::string(50, 'v');
    u.expiresAt = 1'000 + i;
    u.client = i == 1 ? 0 : 0xc1u;
    u.requestSeq = 9 + i;
    u.doneBelow = 8;
    u.result = i == 1 ? "" : "answer-" + std::to_string(i);
    encoded.push_back(
        encode(ReplicateUpdateView{u.partition, u.seq, u.epoch, u.prevEpoch, u.kind, u.key, u.value,
                                   u.expiresAt, u.client, u.requestSeq, u.doneBelow, u.result}));
    CHECK(encoded.back() == encode(u));  // one update from views encodes as from strings
    // The primary reserves exactly this much for an update's encoding (one allocation).
    CHECK(encoded.back().size() ==
          ReplicateUpdateView::kFixedBytes + u.key.size() + u.value.size() + u.result.size());
    batch.updates.push_back(std::move(u));
  }
  const std::string bytes = joinReplicateBatch(
      encoded.begin(), encoded.end(), [](const std::string& e) { return std::string_view(e); });
  CHECK(bytes == encode(batch));
  CHECK(joinReplicateBatch(encoded.begin(), encoded.begin(), [](const std::string& e) {
          return std::string_view(e);
        }) == encode(ReplicateBatch{}));
  // The backup reads it in place: the same fields, its strings pointing into the body.
  ReplicateBatchIn in;
  decodeInto(bytes, in);
  REQUIRE(in.updates.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    const ReplicateBody& want = batch.updates[i];
    const ReplicateUpdateView& got = in.updates[i];
    CHECK(got.partition == want.partition);
    CHECK(got.seq == want.seq);
    CHECK(got.epoch == want.epoch);
    CHECK(got.prevEpoch == want.prevEpoch);
    CHECK(got.kind == want.kind);
    CHECK(got.key == want.key);
    CHECK(got.value == want.value);
    CHECK(got.expiresAt == want.expiresAt);
    CHECK(got.client == want.client);
    CHECK(got.requestSeq == want.requestSeq);
    CHECK(got.doneBelow == want.doneBelow);
    CHECK(got.result == want.result);
    CHECK((got.key.data() >= bytes.data() && got.key.data() < bytes.data() + bytes.size()));
  }
  const auto back = decode<ReplicateBatch>(bytes);
  REQUIRE(back.updates.size() == 3);
  CHECK(back.updates[1].key == "key-1");

  ReplicateAck ack;
  ack.refused.push_back(UpdateRefusal{2, ErrorBody{static_cast<std::uint16_t>(Errc::unavailable),
                                                   "replica of partition 9 is resyncing"}});
  const auto ackBack = decode<ReplicateAck>(encode(ack));
  REQUIRE(ackBack.refused.size() == 1);
  CHECK(ackBack.refused[0].index == 2);
  const Error why = errorFromBody(ackBack.refused[0].error, "member 3");
  CHECK(why == Errc::unavailable);
  CHECK(why.detail() == "replica of partition 9 is resyncing");

  // A count past the limit is refused before anything is allocated.
  ReplicateBatch tooMany;
  tooMany.updates.resize(ReplicateBatch::kMaxUpdates + 1);
  CHECK_THROWS_WITH(decode<ReplicateBatch>(encode(tooMany)),
                    Catch::Contains("ReplicateBatch.updates has 4097 elements"));
  CHECK_THROWS_WITH(decodeInto(encode(tooMany), in),
                    Catch::Contains("ReplicateBatch.updates has 4097 elements"));
  // A count the bytes cannot hold is refused too, and so is a string longer than what remains.
  std::string truncated = encode(batch);
  truncated.resize(truncated.size() / 2);
  CHECK_THROWS(decode<ReplicateBatch>(truncated));
  CHECK_THROWS(decodeInto(truncated, in));
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    CHECK_THROWS(decodeInto(std::string_view(bytes).substr(0, cut), in));
  }
}
