#include <ingrid/testing/grant_audit.h>

#include <chrono>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include <ingrid/processors/codec.h>

namespace ingrid::testing {
namespace {

using namespace std::chrono_literals;

// A bucket holding `tokens`, as GetEntry reads it.
EntrySnapshot bucketWith(std::int64_t tokens) {
  EntrySnapshot s;
  s.exists = true;
  BucketState state;
  state.tokens = tokens;
  s.value = encode(state);
  return s;
}

struct FakeTime {
  std::chrono::nanoseconds now{0};
};

AcquireAnswer granted() { return AcquireAnswer{true, 0, 0}; }
AcquireAnswer denied() { return AcquireAnswer{false, 0, 1}; }

TEST_CASE("GrantAudit: grants the final state counts, no more than the capacity: ok",
          "[testing][audit]") {
  FakeTime t;
  GrantAudit audit([&] { return t.now; });
  for (int i = 0; i < 3; ++i) audit.end(audit.begin("k", 2, 1, 1s), i < 2 ? granted() : denied());
  CHECK(audit.granted() == 2);
  CHECK(audit.pending() == 0);
  const AuditReport r = audit.check([](const std::string&) { return Result(bucketWith(0)); });
  INFO(r.failures());
  CHECK(r.ok());
  CHECK(r.granted == 2);
  CHECK(r.denied == 1);
  CHECK(r.ackedOn("k") == 2);
}

TEST_CASE("GrantAudit: catches a token granted twice, a lost grant, a phantom, a late answer",
          "[testing][audit]") {
  FakeTime t;
  GrantAudit audit([&] { return t.now; });
  // "doubled": 3 grants acknowledged on a bucket of 2.
  for (int i = 0; i < 3; ++i) audit.end(audit.begin("doubled", 2, 1, 1s), granted());
  // "lost": 2 acknowledged, the final state counts 1.
  for (int i = 0; i < 2; ++i) audit.end(audit.begin("lost", 5, 1, 1s), granted());
  // "phantom": nothing acknowledged, 2 consumed.
  audit.end(audit.begin("phantom", 5, 1, 1s), denied());
  // "late": answered 3 s after its 1 s deadline.
  const auto late = audit.begin("late", 5, 1, 1s);
  t.now += 4s;
  audit.end(late, granted());
  // "pending": never answered.
  audit.begin("pending", 5, 1, 1s);
  const std::map<std::string, std::int64_t> left{
      {"doubled", 0}, {"lost", 4}, {"phantom", 3}, {"late", 4}, {"pending", 5}};
  const AuditReport r = audit.check(
      [&](const std::string& key) -> Result<EntrySnapshot> { return bucketWith(left.at(key)); });
  CHECK_FALSE(r.ok());
  CHECK(r.doubled == 1);
  CHECK(r.lost == 1);
  CHECK(r.phantom == 2);
  CHECK(r.overDeadline == 1);
  CHECK(r.unanswered == 1);
  const std::string why = r.failures();
  CHECK_THAT(why, Catch::Contains("doubled: acknowledged 3 of capacity 2"));
  CHECK_THAT(why, Catch::Contains("1 acknowledged grants lost"));
  CHECK_THAT(why, Catch::Contains("2 consumed unexplained"));
  CHECK_THAT(why, Catch::Contains("1 calls were never answered"));
}

TEST_CASE("GrantAudit: an answer delivered twice fails the check", "[testing][audit]") {
  GrantAudit audit;
  const auto t = audit.begin("k", 2, 1, 1s);
  audit.end(t, granted());
  audit.end(t, granted());
  CHECK(audit.granted() == 1);  // the second answer is not counted as a grant
  const AuditReport r = audit.check([](const std::string&) { return Result(bucketWith(1)); });
  CHECK_FALSE(r.ok());
  CHECK(r.answeredTwice == 1);
  CHECK(r.doubled == 0);
  CHECK_THAT(r.failures(), Catch::Contains("1 answers came for calls already answered"));
  CHECK_THAT(r.summary(), Catch::Contains("answered_twice=1"));
}

TEST_CASE("GrantAudit: a key that cannot be read fails the check, naming it", "[testing][audit]") {
  GrantAudit audit;
  audit.end(audit.begin("k", 1, 1, 1s), granted());
  const AuditReport r = audit.check([](const std::string&) -> Result<EntrySnapshot> {
    return Error(Errc::unavailable, "partition 3 is migrating");
  });
  CHECK_FALSE(r.ok());
  CHECK(r.unreadable == 1);
  CHECK_THAT(r.failures(), Catch::Contains("k: unavailable") || Catch::Contains("migrating"));
}

}  // namespace
}  // namespace ingrid::testing
