// Timer coalescing across a cluster: the delay until a periodic tick's next slot on a grid of its
// interval on the wall clock. Every member's ticks of one kind (heartbeats, lease renewals, the
// leader's judge) then fall at about the same instant, since hosts' clocks agree to within
// milliseconds, so a member wakes once for its own tick and the messages the others sent at
// theirs rather than once per message (the idle cost of a fleet is mostly wake-ups); and the
// lease renewal interval that falls on the heartbeat's grid. Pure functions: any thread.
#pragma once

#include <algorithm>
#include <chrono>

#include "cluster/transport/runtime.h"

namespace ingrid {

// The delay from `now` until the next multiple of `interval` since the epoch: in (0, interval],
// so a tick on the grid comes no later than one a whole interval after the last (and a clock
// stepped back or forward shifts only the phase). An interval that is not positive: 1 ms. `now`:
// by default the member's wall clock (runtime.h systemNow()).
inline std::chrono::nanoseconds untilGridTick(
    std::chrono::nanoseconds interval, std::chrono::system_clock::time_point now = systemNow()) {
  if (interval <= std::chrono::nanoseconds::zero()) return std::chrono::milliseconds(1);
  const std::chrono::nanoseconds sinceEpoch = now.time_since_epoch();
  std::chrono::nanoseconds into = sinceEpoch % interval;
  if (into < std::chrono::nanoseconds::zero()) into += interval;  // before the epoch
  return interval - into;
}

// How often a member renews its lease: at least three times per lease (a renewal lost to a
// leader's death then leaves two thirds of the lease for an election), and at heartbeat / n for
// a whole n that divides the heartbeat interval, so that on the grid every heartbeat tick is a
// renewal tick too (one wake-up for both): the least such n from the least n that gives the
// first, looked for up to twice that (else that least n, off the heartbeat's grid). At least
// 1 ms.
inline std::chrono::milliseconds renewalInterval(std::chrono::milliseconds heartbeat,
                                                 std::chrono::milliseconds lease) {
  using Rep = std::chrono::milliseconds::rep;
  const Rep hb = std::max<Rep>(1, heartbeat.count());
  const Rep most = std::max<Rep>(1, lease.count() / 3);
  const Rep least = (hb + most - 1) / most;
  for (Rep n = least; n <= 2 * least && n <= hb; ++n) {
    if (hb % n == 0) return std::chrono::milliseconds(hb / n);
  }
  return std::chrono::milliseconds(std::max<Rep>(1, hb / least));
}

}  // namespace ingrid
