// DedupTable (grid/dedup_table.h): the answers a partition keeps for exactly-once retries.
#include <ingrid/grid/dedup_table.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>

using namespace std::chrono_literals;
using ingrid::DedupTable;
using ingrid::ReplicationOutcome;
using ingrid::RequestId;
using Kind = DedupTable::Lookup::Kind;

namespace {
const DedupTable::Clock::time_point t0{};
}  // namespace

TEST_CASE("A recorded request is answered again with its result; an unknown one is new",
          "[dedup]") {
  DedupTable t;
  CHECK(t.find({7, 1, 1}, t0).kind == Kind::kNew);
  t.record({7, 1, 1}, "granted 1", nullptr, t0);
  const DedupTable::Lookup again = t.find({7, 1, 1}, t0);
  REQUIRE(again.kind == Kind::kAnswered);
  CHECK(*again.result == "granted 1");
  CHECK(t.find({7, 2, 1}, t0).kind == Kind::kNew);  // another number of the same client
  CHECK(t.find({8, 1, 1}, t0).kind == Kind::kNew);  // the same number of another client
  CHECK(t.records() == 1);
  CHECK(t.clients() == 1);
  CHECK_FALSE(RequestId{0, 1, 1}.valid());
  CHECK_FALSE(RequestId{7, 0, 1}.valid());
}

TEST_CASE("doneBelow drops the client's answered records; a copy below it is forgotten",
          "[dedup]") {
  DedupTable t;
  for (std::uint64_t seq = 1; seq <= 5; ++seq)
    t.record({7, seq, 1}, std::to_string(seq), nullptr, t0);
  t.record({9, 1, 1}, "other client", nullptr, t0);
  CHECK(t.records() == 6);
  // Client 7 has the answers of 1..3: a request of it saying so drops them.
  CHECK(t.find({7, 6, 4}, t0).kind == Kind::kNew);
  CHECK(t.records() == 3);
  CHECK(t.find({7, 2, 4}, t0).kind == Kind::kForgotten);  // a stale copy: never runs again
  CHECK(*t.find({7, 4, 4}, t0).result == "4");
  // An older mark (a reordered request) moves nothing back.
  CHECK(t.find({7, 5, 2}, t0).kind == Kind::kAnswered);
  CHECK(t.find({7, 3, 2}, t0).kind == Kind::kForgotten);
  CHECK(*t.find({9, 1, 1}, t0).result == "other client");  // other clients untouched
  // A record below the mark is not kept.
  t.record({7, 1, 4}, "late", nullptr, t0);
  CHECK(t.records() == 3);
}

TEST_CASE("A request whose update is still replicating is not answered until it is acknowledged",
          "[dedup]") {
  DedupTable t;
  auto acked = std::make_shared<ReplicationOutcome>();
  auto failed = std::make_shared<ReplicationOutcome>();
  t.record({7, 1, 1}, "granted", acked, t0);
  t.record({7, 2, 1}, "granted too", failed, t0);
  CHECK(t.find({7, 1, 1}, t0).kind == Kind::kPending);
  CHECK(t.find({7, 2, 1}, t0).kind == Kind::kPending);
  acked->state.store(ReplicationOutcome::kAcknowledged);
  failed->state.store(ReplicationOutcome::kFailed);
  const auto answered = t.find({7, 1, 1}, t0);
  REQUIRE(answered.kind == Kind::kAnswered);
  CHECK(*answered.result == "granted");
  CHECK(t.find({7, 2, 1}, t0).kind == Kind::kFailed);
  // Once known to be acknowledged, the record no longer holds the replication's state.
  CHECK(acked.use_count() == 1);
}

TEST_CASE("A client silent for the window loses its records; an active one keeps them", "[dedup]") {
  DedupTable t;
  t.record({7, 1, 1}, "a", nullptr, t0);
  t.record({8, 1, 1}, "b", nullptr, t0);
  CHECK(t.find({8, 2, 1}, t0 + 50s).kind == Kind::kNew);  // client 8 speaks at 50 s
  CHECK(t.expireIdle(t0 + 60s, 60s) == 0);                // nobody silent for more than 60 s
  CHECK(t.expireIdle(t0 + 61s, 60s) == 1);                // client 7 was
  CHECK(t.find({7, 1, 1}, t0 + 61s).kind == Kind::kNew);
  CHECK(t.find({8, 1, 1}, t0 + 61s).kind == Kind::kAnswered);
  CHECK(t.records() == 1);
  t.clear();
  CHECK(t.records() == 0);
  CHECK(t.clients() == 0);
}

TEST_CASE("A client that never raises doneBelow gets no more than kMaxRecordsPerClient records",
          "[dedup]") {
  DedupTable t;
  const std::uint64_t n = DedupTable::kMaxRecordsPerClient;
  for (std::uint64_t seq = 1; seq <= n; ++seq) t.record({7, seq, 1}, "x", nullptr, t0);
  CHECK(t.records() == n);
  // Its next new request is refused (not run); every recorded one still answers, none evicted.
  CHECK(t.find({7, n + 1, 1}, t0).kind == Kind::kFull);
  CHECK(t.find({7, 1, 1}, t0).kind == Kind::kAnswered);
  CHECK(t.find({7, n, 1}, t0).kind == Kind::kAnswered);
  CHECK(t.find({8, 1, 1}, t0).kind == Kind::kNew);  // other clients are not held back
  // Once its doneBelow moves, it may go on.
  CHECK(t.find({7, n + 1, 11}, t0).kind == Kind::kNew);
  CHECK(t.records() == n - 10);
  std::size_t seen = 0;
  t.forEach([&](std::uint64_t client, std::uint64_t, std::uint64_t, const std::string&) {
    CHECK(client == 7);
    ++seen;
  });
  CHECK(seen == n - 10);
}
