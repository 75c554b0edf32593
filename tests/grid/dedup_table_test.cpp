// DedupTable (grid/dedup_table.h): the answers a partition keeps for exactly-once retries.
#include "grid/dedup_table.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using ingrid::DedupTable;
using ingrid::Error;
using ingrid::ReplicationOutcome;
using ingrid::RequestId;
using ingrid::Result;
using Kind = DedupTable::Lookup::Kind;

namespace {
const DedupTable::Clock::time_point t0{};
}  // namespace

TEST_CASE("A recorded request is answered again with its result: an unknown one is new",
          "[dedup]") {
  DedupTable t;
  CHECK(t.find({7, 1, 1}, t0).kind == Kind::kNew);
  t.record({7, 1, 1}, "granted 1", nullptr, t0);
  const DedupTable::Lookup again = t.find({7, 1, 1}, t0);
  REQUIRE(again.kind == Kind::kAnswered);
  CHECK(again.result == "granted 1");
  CHECK(t.find({7, 2, 1}, t0).kind == Kind::kNew);  // another number of the same client
  CHECK(t.find({8, 1, 1}, t0).kind == Kind::kNew);  // the same number of another client
  CHECK(t.records() == 1);
  CHECK(t.clients() == 1);
  CHECK_FALSE(RequestId{0, 1, 1}.valid());
  CHECK_FALSE(RequestId{7, 0, 1}.valid());
}

TEST_CASE("doneBelow drops the client's answered records: a copy below it is forgotten",
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
  CHECK(t.find({7, 4, 4}, t0).result == "4");
  // An older mark (a reordered request) moves nothing back.
  CHECK(t.find({7, 5, 2}, t0).kind == Kind::kAnswered);
  CHECK(t.find({7, 3, 2}, t0).kind == Kind::kForgotten);
  CHECK(t.find({9, 1, 1}, t0).result == "other client");  // other clients untouched
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
  CHECK(answered.result == "granted");
  CHECK(t.find({7, 2, 1}, t0).kind == Kind::kFailed);
  // Once known to be acknowledged, the record no longer holds the replication's state.
  CHECK(acked.use_count() == 1);
}

TEST_CASE("A record learnt from a former primary is inherited until a barrier confirms it",
          "[dedup]") {
  DedupTable t;
  t.record({7, 1, 1}, "granted", ReplicationOutcome::inherited(), t0);
  const auto inherited = t.find({7, 1, 1}, t0);
  REQUIRE(inherited.kind == Kind::kInherited);
  CHECK(inherited.result == "granted");  // the answer is known; whether every owner holds it not
  CHECK(t.find({7, 1, 1}, t0).kind == Kind::kInherited);  // and stays so until replaced
  // The promoted primary replaces it with its barrier's outcome: pending, then answered.
  auto barrier = std::make_shared<ReplicationOutcome>();
  t.record({7, 1, 1}, "granted", barrier, t0);
  CHECK(t.records() == 1);
  CHECK(t.find({7, 1, 1}, t0).kind == Kind::kPending);
  barrier->state.store(ReplicationOutcome::kAcknowledged);
  const auto answered = t.find({7, 1, 1}, t0);
  REQUIRE(answered.kind == Kind::kAnswered);
  CHECK(answered.result == "granted");
  // A barrier that fails leaves the record inherited (the request's answer stands), not failed.
  t.record({7, 2, 1}, "granted too", ReplicationOutcome::inherited(), t0);
  auto failedBarrier = std::make_shared<ReplicationOutcome>();
  failedBarrier->barrier = true;
  t.record({7, 2, 1}, "granted too", failedBarrier, t0);
  failedBarrier->state.store(ReplicationOutcome::kFailed);
  CHECK(t.find({7, 2, 1}, t0).kind == Kind::kInherited);
  // The shared inherited outcome has no control block: records copy it without counting.
  CHECK(ReplicationOutcome::inherited().use_count() == 0);
  CHECK(ReplicationOutcome::inherited()->state.load() == ReplicationOutcome::kInherited);
}

TEST_CASE("Copies parked on a pending replication are answered once, in order, when it resolves",
          "[dedup]") {
  using Waiter = ReplicationOutcome::Waiter;
  std::vector<std::string> answers;
  auto collect = [&answers](Result<std::string> r) {
    answers.push_back(r ? *r : "error: " + r.error().message());
  };
  SECTION("acknowledged: each parked copy gets the answer") {
    ReplicationOutcome o;
    for (int i = 0; i < 3; ++i) {
      Waiter w = collect;
      REQUIRE(o.park(w));
    }
    CHECK(answers.empty());
    o.resolve(ReplicationOutcome::kAcknowledged, "granted", Error());
    CHECK(answers == std::vector<std::string>{"granted", "granted", "granted"});
    Waiter late = collect;
    CHECK_FALSE(o.park(late));  // resolved: the caller answers from the state
    CHECK(static_cast<bool>(late));
    CHECK(o.state.load() == ReplicationOutcome::kAcknowledged);
  }
  SECTION("failed: each parked copy gets the failure") {
    ReplicationOutcome o;
    Waiter w = collect;
    REQUIRE(o.park(w));
    o.resolve(ReplicationOutcome::kFailed, {}, Error(ingrid::Errc::indeterminate, "backup silent"));
    REQUIRE(answers.size() == 1);
    CHECK_THAT(answers[0], Catch::Contains("backup silent"));
  }
  SECTION("at most kMaxParked copies wait; the rest are refused at once") {
    ReplicationOutcome o;
    for (std::uint32_t i = 0; i < ReplicationOutcome::kMaxParked; ++i) {
      Waiter w = collect;
      REQUIRE(o.park(w));
    }
    Waiter extra = collect;
    CHECK_FALSE(o.park(extra));
    o.resolve(ReplicationOutcome::kAcknowledged, "ok", Error());
    CHECK(answers.size() == ReplicationOutcome::kMaxParked);
  }
  SECTION("never resolved (the node stopped): parked copies hear shutting_down") {
    {
      ReplicationOutcome o;
      Waiter w = collect;
      REQUIRE(o.park(w));
    }
    REQUIRE(answers.size() == 1);
    CHECK_THAT(answers[0], Catch::Contains("stopped"));
  }
}

TEST_CASE("Parking races with resolving: every copy is answered exactly once", "[dedup]") {
  for (int round = 0; round < 50; ++round) {
    ReplicationOutcome o;
    std::atomic<int> calls{0};
    int refused = 0;
    std::atomic<bool> go{false};
    std::thread resolver([&o, &go] {
      while (!go.load()) std::this_thread::yield();  // starts with the parking below
      o.resolve(ReplicationOutcome::kAcknowledged, "x", Error());
    });
    go.store(true);
    for (std::uint32_t i = 0; i < ReplicationOutcome::kMaxParked; ++i) {
      ReplicationOutcome::Waiter w = [&calls](Result<std::string>) { calls.fetch_add(1); };
      if (!o.park(w)) ++refused;
    }
    resolver.join();
    CHECK(calls.load() + refused == static_cast<int>(ReplicationOutcome::kMaxParked));
  }
}

TEST_CASE("A client silent for the window loses its records: an active one keeps them", "[dedup]") {
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
  t.forEach([&](std::uint64_t client, std::uint64_t, std::uint64_t, std::string_view) {
    CHECK(client == 7);
    ++seen;
  });
  CHECK(seen == n - 10);
}

TEST_CASE(
    "Records arriving out of order stay findable and ordered as a client's count grows past "
    "the inline few and shrinks back",
    "[dedup]") {
  DedupTable t;
  // Arrival order of seqs 1..12 as reordered frames deliver them; 12 is more than kInline.
  const std::vector<std::uint64_t> order = {3, 1, 2, 6, 5, 4, 12, 7, 9, 8, 11, 10};
  std::size_t n = 0;
  for (std::uint64_t seq : order) {
    t.record({7, seq, 1}, "r" + std::to_string(seq), nullptr, t0);
    ++n;
    CHECK(t.records() == n);
    for (std::size_t i = 0; i < n; ++i) {  // every record so far answers with its own result
      const DedupTable::Lookup seen = t.find({7, order[i], 1}, t0);
      REQUIRE(seen.kind == Kind::kAnswered);
      CHECK(seen.result == "r" + std::to_string(order[i]));
    }
  }
  t.record({7, 5, 1}, "replaced", nullptr, t0);  // the same id again replaces, adds nothing
  CHECK(t.records() == 12);
  CHECK(t.find({7, 5, 1}, t0).result == "replaced");
  auto seqs = [&] {
    std::vector<std::uint64_t> out;
    t.forEach([&](std::uint64_t, std::uint64_t, std::uint64_t seq, std::string_view) {
      out.push_back(seq);
    });
    return out;
  };
  CHECK(seqs() == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  CHECK(t.find({7, 13, 10}, t0).kind == Kind::kNew);  // drops 1..9
  CHECK(seqs() == std::vector<std::uint64_t>{10, 11, 12});
  CHECK(t.records() == 3);
  CHECK(t.find({7, 13, 13}, t0).kind == Kind::kNew);  // drops the rest
  CHECK(t.records() == 0);
  // Empty again, the client starts over with a few inline.
  for (std::uint64_t seq : {15, 14, 13}) t.record({7, seq, 13}, "s", nullptr, t0);
  CHECK(seqs() == std::vector<std::uint64_t>{13, 14, 15});
  CHECK(t.find({7, 9, 13}, t0).kind == Kind::kForgotten);
}
