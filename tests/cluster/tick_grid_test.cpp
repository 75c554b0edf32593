// Timer coalescing (cluster/tick_grid.h): the delay until a periodic tick's next slot on the grid.
#include "cluster/tick_grid.h"

#include <catch2/catch.hpp>

#include <chrono>

using namespace std::chrono_literals;
using ingrid::untilGridTick;

namespace {

std::chrono::system_clock::time_point at(std::chrono::nanoseconds sinceEpoch) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(sinceEpoch));
}

}  // namespace

TEST_CASE(
    "A tick on the grid comes at the next multiple of its interval, never later than one "
    "interval from now",
    "[cluster][failure]") {
  CHECK(untilGridTick(500ms, at(1000ms)) == 500ms);  // on a slot: the next one, not now
  CHECK(untilGridTick(500ms, at(1000ms + 1ns)) == 500ms - 1ns);
  CHECK(untilGridTick(500ms, at(1499ms)) == 1ms);
  CHECK(untilGridTick(375ms, at(1000ms)) == 125ms);  // 1125 ms is the next slot
  // Members whose clocks agree tick together, whenever each one last ticked.
  const auto slot = at(1'700'000'000'000ms);
  CHECK(slot.time_since_epoch() % 500ms == 0ns);
  for (const auto from : {1ms, 77ms, 250ms, 499ms}) {
    CHECK(at(1'700'000'000'000ms - from).time_since_epoch() +
              untilGridTick(500ms, at(1'700'000'000'000ms - from)) ==
          slot.time_since_epoch());
  }
  // Before the epoch (a clock set far back) still within (0, interval].
  CHECK(untilGridTick(500ms, at(-100ms)) == 100ms);
  CHECK(untilGridTick(500ms, at(-500ms)) == 500ms);
  // An interval that is not positive (a misconfiguration) gives 1 ms, not a division by zero.
  CHECK(untilGridTick(0ns, at(1000ms)) == 1ms);
  // The wall clock's own now: within (0, interval].
  const auto d = untilGridTick(250ms);
  CHECK(d > 0ns);
  CHECK(d <= 250ms);
}

TEST_CASE("Lease renewals go on the heartbeat's ticks, at least three times per lease",
          "[cluster][failure]") {
  using ingrid::renewalInterval;
  CHECK(renewalInterval(500ms, 1500ms) == 500ms);  // the defaults: every heartbeat tick
  CHECK(renewalInterval(500ms, 1000ms) == 250ms);  // twice per heartbeat: 4 per lease
  CHECK(renewalInterval(100ms, 1000ms) == 100ms);  // a short heartbeat: every tick
  CHECK(renewalInterval(500ms, 500ms) == 125ms);   // a third of the lease is 166 ms: n = 4
  CHECK(renewalInterval(500ms, 700ms) == 125ms);   // 233 ms at most: 166 ms is off the grid
  CHECK(renewalInterval(499ms, 500ms) == 124ms);   // a prime: no divisor near, off the grid
  for (const auto hb : {1ms, 7ms, 50ms, 333ms, 500ms, 1000ms, 2999ms}) {
    for (const auto lease : {3ms, 10ms, 100ms, 999ms, 1500ms, 6000ms}) {
      const auto every = renewalInterval(hb, lease);
      CHECK(every >= 1ms);
      CHECK(every <= std::max(1ms, lease / 3));
      CHECK(every <= hb);
      if (hb == 500ms || hb == 1000ms) CHECK(hb % every == 0ms);  // these have divisors near
    }
  }
  CHECK(renewalInterval(0ms, 0ms) == 1ms);
}
