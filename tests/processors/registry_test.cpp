#include <ingrid/processors/registry.h>

#include <catch2/catch.hpp>

#include <ingrid/processors/counter.h>
#include <ingrid/processors/token_bucket.h>

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

TEST_CASE("The erased form decodes, runs, encodes and names failures", "[processors][registry]") {
  const ProcessorRegistry registry = ProcessorRegistry::withBuiltins();
  auto fn = registry.find(Increment::kName);
  REQUIRE(fn != nullptr);
  MutableEntry entry("k", std::nullopt);
  auto ok = fn(encode(Increment{5}), entry, 0);
  REQUIRE(ok.ok());
  CHECK(decode<std::int64_t>(*ok) == 5);
  CHECK(entry.change() == MutableEntry::Change::kPut);

  MutableEntry other("k", std::nullopt);
  auto trailing = fn(encode(Increment{5}) + "x", other, 0);
  REQUIRE_FALSE(trailing.ok());
  CHECK(trailing.error() == Errc::invalid_argument);
  CHECK_THAT(trailing.error().message(), Catch::Contains("ingrid.Increment"));
}
