#include <ingrid/entry.h>

#include <catch2/catch.hpp>

using ingrid::Entry;
using ingrid::kNever;
using ingrid::MutableEntry;

TEST_CASE("MutableEntry on an absent key stages nothing until set", "[grid][entry]") {
  MutableEntry e("k", std::nullopt);
  CHECK_FALSE(e.exists());
  CHECK(e.change() == MutableEntry::Change::kNone);
  e.setExpiresAt(5);  // nothing to expire
  CHECK(e.change() == MutableEntry::Change::kNone);
  e.remove();
  CHECK(e.change() == MutableEntry::Change::kNone);
  e.setValue("v");
  CHECK(e.exists());
  CHECK(e.value() == "v");
  CHECK(e.expiresAt() == kNever);
  e.setExpiresAt(10);
  Entry out = e.takeEntry();
  CHECK(out.value == "v");
  CHECK(out.expiresAt == 10);
}

TEST_CASE("MutableEntry on a live key keeps its expiry and can delete it", "[grid][entry]") {
  const Entry current{"old", 100};
  SECTION("read only") {
    MutableEntry e("k", current.view());
    CHECK(e.value() == "old");
    CHECK(e.expiresAt() == 100);
    CHECK(e.change() == MutableEntry::Change::kNone);
  }
  SECTION("set value keeps expiry") {
    MutableEntry e("k", current.view());
    e.setValue("new");
    CHECK(e.expiresAt() == 100);
    CHECK(current.value == "old");  // the live entry is untouched until applied
  }
  SECTION("expiry alone is a put of the same value") {
    MutableEntry e("k", current.view());
    e.setExpiresAt(200);
    REQUIRE(e.change() == MutableEntry::Change::kPut);
    Entry out = e.takeEntry();
    CHECK(out.value == "old");
    CHECK(out.expiresAt == 200);
  }
  SECTION("remove then set recreates without the old expiry") {
    MutableEntry e("k", current.view());
    e.remove();
    CHECK_FALSE(e.exists());
    CHECK(e.change() == MutableEntry::Change::kRemove);
    e.setValue("again");
    CHECK(e.expiresAt() == kNever);
  }
}
