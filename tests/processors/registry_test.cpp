#include <ingrid/processors/registry.h>

#include <catch2/catch.hpp>

#include <ingrid/processors/counter.h>
#include <ingrid/processors/token_bucket.h>

#include <climits>
#include <string>

using namespace ingrid;

TEST_CASE("The built-in registry holds the built-in processors by stable name",
          "[processors][registry]") {
  const ProcessorRegistry registry = ProcessorRegistry::withBuiltins();
  CHECK(registry.names() == std::vector<std::string>{"ingrid.CompositeBucketAcquire",
                                                     "ingrid.CompositeBucketBatchAcquire",
                                                     "ingrid.ConcurrencyAcquire",
                                                     "ingrid.ConcurrencyBatchAcquire",
                                                     "ingrid.ConcurrencyExtend",
                                                     "ingrid.ConcurrencyRelease",
                                                     "ingrid.FixedWindowAcquire",
                                                     "ingrid.FixedWindowBatchAcquire",
                                                     "ingrid.GcraBatchThrottle",
                                                     "ingrid.GcraThrottle",
                                                     "ingrid.GetCounter",
                                                     "ingrid.GetEntry",
                                                     "ingrid.Increment",
                                                     "ingrid.LeakyMeterAcquire",
                                                     "ingrid.LeakyMeterBatchAcquire",
                                                     "ingrid.LeakyShaperAcquire",
                                                     "ingrid.LeakyShaperBatchAcquire",
                                                     "ingrid.SlidingLogAcquire",
                                                     "ingrid.SlidingLogBatchAcquire",
                                                     "ingrid.SlidingWindowAcquire",
                                                     "ingrid.SlidingWindowBatchAcquire",
                                                     "ingrid.TokenBucketAcquire",
                                                     "ingrid.TokenBucketBatchAcquire",
                                                     "ingrid.TokenBucketBatchReserve",
                                                     "ingrid.TokenBucketReserve",
                                                     "ingrid.WarmupAcquire",
                                                     "ingrid.WarmupBatchAcquire"});
  CHECK(registry.find("nope") == nullptr);
}

TEST_CASE("A name registers once", "[processors][registry]") {
  ProcessorRegistry registry;
  CHECK(registry.add<Increment>());
  CHECK_FALSE(registry.add<Increment>());
}

TEST_CASE("The erased form tells a grant, a denial and a grant near the limit",
          "[processors][registry]") {
  const ProcessorRegistry registry = ProcessorRegistry::withBuiltins();
  const auto [fn, index] = registry.lookup(TokenBucketAcquire::kName);
  REQUIRE(fn != nullptr);
  CHECK(registry.nameAt(index) == TokenBucketAcquire::kName);
  CHECK(registry.indexOf("no.such.Processor") == registry.size());
  const BucketParams bucket = BucketParams::perPeriod(10, 1'000'000'000);
  MutableEntry entry("k", std::nullopt);
  ProcessorVerdict v;
  REQUIRE(fn(encode(TokenBucketAcquire{bucket, 7}), entry, 0, &v).ok());
  CHECK(v.kind == ProcessorVerdict::kGranted);  // 3 of 10 left: 30%
  CHECK_FALSE(v.nearLimit);
  const std::string first(entry.value());
  MutableEntry after("k", EntryView{first, kNever});
  REQUIRE(fn(encode(TokenBucketAcquire{bucket, 2}), after, 0, &v).ok());
  CHECK(v.kind == ProcessorVerdict::kGranted);  // 1 of 10 left: under 20%
  CHECK(v.nearLimit);
  const std::string second(after.value());
  MutableEntry last("k", EntryView{second, kNever});
  REQUIRE(fn(encode(TokenBucketAcquire{bucket, 5}), last, 0, &v).ok());
  CHECK(v.kind == ProcessorVerdict::kDenied);
  CHECK(detail::nearLimit(1, 10));
  CHECK_FALSE(detail::nearLimit(2, 10));
  CHECK(detail::nearLimit(0, 1));
  CHECK(detail::nearLimit(INT64_MAX / 5, INT64_MAX));  // 5 x remaining < limit, no overflow
  CHECK_FALSE(detail::nearLimit(INT64_MAX / 5 + 1, INT64_MAX));
}

TEST_CASE("The erased form decodes, runs, encodes and names failures", "[processors][registry]") {
  const ProcessorRegistry registry = ProcessorRegistry::withBuiltins();
  auto fn = registry.find(Increment::kName);
  REQUIRE(fn != nullptr);
  MutableEntry entry("k", std::nullopt);
  ProcessorVerdict verdict{ProcessorVerdict::kDenied, true};
  auto ok = fn(encode(Increment{5}), entry, 0, &verdict);
  REQUIRE(ok.ok());
  CHECK(verdict.kind == ProcessorVerdict::kAnswered);  // a counter neither grants nor denies
  CHECK(decode<std::int64_t>(*ok) == 5);
  CHECK(entry.change() == MutableEntry::Change::kPut);

  MutableEntry other("k", std::nullopt);
  auto trailing = fn(encode(Increment{5}) + "x", other, 0, nullptr);
  REQUIRE_FALSE(trailing.ok());
  CHECK(trailing.error() == Errc::invalid_argument);
  CHECK_THAT(trailing.error().message(), Catch::Contains("ingrid.Increment"));
}
