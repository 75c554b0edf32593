#include "grid/partition_store.h"

#include <catch2/catch.hpp>

#include <iterator>
#include <map>
#include <random>
#include <string>

using ingrid::Entry;
using ingrid::EntryView;
using ingrid::MutableEntry;
using ingrid::PartitionStore;

TEST_CASE("PartitionStore applies staged changes and counts updates", "[grid][store]") {
  PartitionStore store;
  CHECK_FALSE(store.find("k", 0));
  MutableEntry put("k", std::nullopt);
  put.setValue("v1");
  const std::optional<EntryView> stored = store.apply("k", put, 0);
  REQUIRE(stored);  // what a find would see now
  CHECK(stored->value == "v1");
  CHECK(store.updateSeq() == 1);
  const std::optional<EntryView> e = store.find("k", 0);
  REQUIRE(e);
  CHECK(e->value == "v1");

  MutableEntry untouched("k", e);
  CHECK(store.apply("k", untouched, 0)->value == "v1");
  CHECK(store.updateSeq() == 1);  // nothing changed, nothing counted

  MutableEntry del("k", store.find("k", 0));
  del.remove();
  CHECK_FALSE(store.apply("k", del, 0));
  CHECK_FALSE(store.find("k", 0));
  CHECK(store.updateSeq() == 2);
}

TEST_CASE("A put already expired when applied is gone at once, as find would see it",
          "[grid][store][expiry]") {
  PartitionStore store;
  store.put("k", Entry{"old", ingrid::kNever});
  MutableEntry late("k", store.find("k", 100));
  late.setValue("new");
  late.setExpiresAt(100);  // expiresAt is exclusive: invisible at 100
  CHECK_FALSE(store.apply("k", late, 100));
  CHECK_FALSE(store.find("k", 0));  // erased, not left behind
  CHECK(store.size() == 0);
}

TEST_CASE("Expired entries are invisible and reclaimed", "[grid][store][expiry]") {
  PartitionStore store;
  for (int i = 0; i < 100; ++i) {
    store.put("k" + std::to_string(i), Entry{"v", i < 60 ? 1000 : ingrid::kNever});
  }
  CHECK(store.size() == 100);
  CHECK(store.find("k1", 999));
  CHECK_FALSE(store.find("k1", 1000));  // expiresAt is exclusive: invisible at 1000
  CHECK(store.size() == 99);            // and erased on sight

  // A bounded sweep makes progress; repeated sweeps reclaim everything expired.
  std::size_t reclaimed = 0;
  for (int round = 0; round < 1000 && store.size() > 40; ++round) {
    reclaimed += store.reclaimExpired(1000, 4);
  }
  CHECK(reclaimed == 59);
  CHECK(store.size() == 40);
  std::size_t live = 0;
  store.forEach(1000, [&](std::string_view, EntryView) { ++live; });
  CHECK(live == 40);
}

TEST_CASE("PartitionStore matches a map through random puts, erases, expiries and sweeps",
          "[grid][store][model]") {
  // Keys and values of every size class: inline (key + value <= kInlineBytes), just over it,
  // and far over it (out of line), so overwrites move entries between the two forms.
  std::mt19937_64 rng(20261123);
  std::map<std::string, Entry> model;
  PartitionStore store;
  auto bytes = [&](std::size_t n, char c) { return std::string(n, c); };
  const std::size_t sizes[] = {0, 1, 15, 16, 25, 28, 29, 44, 45, 300};
  auto pick = [&](std::size_t bound) { return static_cast<std::size_t>(rng() % bound); };
  ingrid::Nanos now = 0;
  for (int step = 0; step < 20000; ++step) {
    const std::string key =
        "k" + std::to_string(pick(400)) + bytes(sizes[pick(std::size(sizes))] / 2, 'x');
    switch (pick(6)) {
      case 0:
      case 1:
      case 2: {
        const std::string value =
            bytes(sizes[pick(std::size(sizes))], static_cast<char>('a' + pick(26)));
        const ingrid::Nanos expiry =
            pick(4) == 0 ? now + 1 + static_cast<ingrid::Nanos>(pick(50)) : ingrid::kNever;
        if (pick(2) == 0) {
          store.put(key, value, expiry);
        } else {  // as a processor does: read the entry, then apply a change to it
          MutableEntry change(key, store.find(key, now));
          change.setValue(value);
          change.setExpiresAt(expiry);
          const std::optional<EntryView> after = store.apply(key, change, now);
          REQUIRE(after);
          CHECK(after->value == value);
          CHECK(after->expiresAt == expiry);
        }
        model[key] = Entry{value, expiry};
        break;
      }
      case 3:
        store.erase(key);
        model.erase(key);
        break;
      case 4: {
        const auto got = store.find(key, now);
        const auto it = model.find(key);
        const bool live = it != model.end() &&
                          (it->second.expiresAt == ingrid::kNever || it->second.expiresAt > now);
        REQUIRE(got.has_value() == live);
        if (live) {
          CHECK(got->value == it->second.value);
          CHECK(got->expiresAt == it->second.expiresAt);
        }
        if (it != model.end() && !live) model.erase(it);  // erased on sight
        break;
      }
      case 5:
        now += static_cast<ingrid::Nanos>(pick(5));
        store.reclaimExpired(now, 1 + pick(40));
        break;
    }
  }
  // Everything live in the model is in the store with the same bytes, and nothing else.
  std::map<std::string, Entry> seen;
  store.forEach(now, [&](std::string_view k, EntryView e) {
    seen.emplace(std::string(k), Entry{std::string(e.value), e.expiresAt});
  });
  std::map<std::string, Entry> live;
  for (const auto& [k, e] : model) {
    if (e.expiresAt == ingrid::kNever || e.expiresAt > now) live.emplace(k, e);
  }
  REQUIRE(seen.size() == live.size());
  for (const auto& [k, e] : live) {
    REQUIRE(seen.count(k) == 1);
    CHECK(seen[k].value == e.value);
    CHECK(seen[k].expiresAt == e.expiresAt);
  }
  // A full sweep leaves exactly the live entries; clear() leaves none.
  for (int round = 0; round < 100 && store.size() > live.size(); ++round) {
    store.reclaimExpired(now, 1000);
  }
  CHECK(store.size() == live.size());
  store.clear();
  CHECK(store.size() == 0);
  CHECK_FALSE(store.find(live.empty() ? "k1" : live.begin()->first, now));
}
