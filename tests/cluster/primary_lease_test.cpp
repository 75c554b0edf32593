#include "cluster/primary_lease.h"

#include <catch2/catch.hpp>

#include <chrono>

using namespace ingrid;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

namespace {
constexpr nanoseconds kOneNs{1};
const auto kStart = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
}  // namespace

TEST_CASE("Primary lease: valid until one nanosecond before its end", "[cluster][primary_lease]") {
  PrimaryLease lease(PrimaryLease::Mode::kMember);
  CHECK(!lease.validAt(kStart));  // never granted
  CHECK(!lease.everGranted());
  // Granted for a request sent at kStart: runs from the sending, not from the grant's arrival.
  CHECK(lease.extend(kStart, milliseconds(1500), kStart + milliseconds(40)));
  CHECK(lease.validAt(kStart + milliseconds(1500) - kOneNs));
  CHECK(!lease.validAt(kStart + milliseconds(1500)));
  CHECK(lease.leftAt(kStart + milliseconds(1000)) == milliseconds(500));
  CHECK(lease.leftAt(kStart + milliseconds(2000)) == nanoseconds(0));
  CHECK(lease.until() == kStart + milliseconds(1500));
}

TEST_CASE("Primary lease: never shrinks, and counts a lapse only after it ran out",
          "[cluster][primary_lease]") {
  PrimaryLease lease(PrimaryLease::Mode::kMember);
  lease.extend(kStart, milliseconds(1500), kStart);
  CHECK(lease.lapses() == 0);  // the first grant is no lapse
  // An older request's grant arriving late changes nothing.
  CHECK(!lease.extend(kStart - milliseconds(100), milliseconds(1500), kStart + milliseconds(10)));
  CHECK(lease.until() == kStart + milliseconds(1500));
  // Renewed while it runs (at its last nanosecond): no lapse.
  CHECK(lease.extend(kStart + milliseconds(500), milliseconds(1500),
                     kStart + milliseconds(1500) - kOneNs));
  CHECK(lease.lapses() == 0);
  // Renewed at its end (kStart + 2000 ms, from the renewal before): it had run out, writes were
  // refused from then on: a lapse.
  CHECK(!lease.validAt(kStart + milliseconds(2000)));
  CHECK(lease.extend(kStart + milliseconds(1900), milliseconds(1500), kStart + milliseconds(2000)));
  CHECK(lease.lapses() == 1);
  lease.clear();
  CHECK(!lease.validAt(kStart + milliseconds(2000)));
  CHECK(lease.extend(kStart + milliseconds(5000), milliseconds(10), kStart + milliseconds(5000)));
  CHECK(lease.lapses() == 1);  // after clear() the next grant is a first one
}

TEST_CASE("Primary lease: a standalone node may always write", "[cluster][primary_lease]") {
  PrimaryLease lease(PrimaryLease::Mode::kStandalone);
  CHECK(lease.mode() == PrimaryLease::Mode::kStandalone);
  CHECK(lease.validAt(kStart));
  CHECK(lease.validAt(std::chrono::steady_clock::time_point{}));
  CHECK(lease.leftAt(kStart) == nanoseconds(0));  // it holds no lease: it needs none
}
