#include <ingrid/grid/partition_store.h>

#include <catch2/catch.hpp>

#include <string>

using ingrid::Entry;
using ingrid::MutableEntry;
using ingrid::PartitionStore;

TEST_CASE("PartitionStore applies staged changes and counts updates", "[grid][store]") {
  PartitionStore store;
  CHECK(store.find("k", 0) == nullptr);
  MutableEntry put("k", nullptr);
  put.setValue("v1");
  store.apply("k", put);
  CHECK(store.updateSeq() == 1);
  const Entry* e = store.find("k", 0);
  REQUIRE(e != nullptr);
  CHECK(e->value == "v1");

  MutableEntry untouched("k", e);
  store.apply("k", untouched);
  CHECK(store.updateSeq() == 1);  // nothing changed, nothing counted

  MutableEntry del("k", store.find("k", 0));
  del.remove();
  store.apply("k", del);
  CHECK(store.find("k", 0) == nullptr);
  CHECK(store.updateSeq() == 2);
}

TEST_CASE("Expired entries are invisible and reclaimed", "[grid][store][expiry]") {
  PartitionStore store;
  for (int i = 0; i < 100; ++i) {
    store.put("k" + std::to_string(i), Entry{"v", i < 60 ? 1000 : ingrid::kNever});
  }
  CHECK(store.size() == 100);
  CHECK(store.find("k1", 999) != nullptr);
  CHECK(store.find("k1", 1000) == nullptr);  // expiresAt is exclusive: invisible at 1000
  CHECK(store.size() == 99);                 // and erased on sight

  // A bounded sweep makes progress; repeated sweeps reclaim everything expired.
  std::size_t reclaimed = 0;
  for (int round = 0; round < 1000 && store.size() > 40; ++round) {
    reclaimed += store.reclaimExpired(1000, 4);
  }
  CHECK(reclaimed == 59);
  CHECK(store.size() == 40);
  std::size_t live = 0;
  store.forEach(1000, [&](std::string_view, const Entry&) { ++live; });
  CHECK(live == 40);
}
