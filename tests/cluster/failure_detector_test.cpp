#include "cluster/failure_detector.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace ingrid;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

namespace {

constexpr nanoseconds kNs{1};
const auto kT0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);

// failure timeout 3000 ms, heartbeat 500 ms, lease 1500 ms: hearing window 1500 ms, judge
// interval 150 ms, unreachable threshold max(1500, 1500 + 500) = 2000 ms.
FailureDetector::Timing timing() {
  return {milliseconds(3000), milliseconds(500), milliseconds(1500)};
}

Topology members(std::vector<MemberId> ids) {
  Topology t;
  t.version = 1;
  for (MemberId id : ids) {
    t.members.push_back(MemberInfo{id, "127.0.0.1:" + std::to_string(7000 + id), id, {}, {}});
  }
  return t;
}

}  // namespace

TEST_CASE("Failure detector: the windows derive from the intervals",
          "[cluster][failure_detector]") {
  const auto t = timing();
  CHECK(t.hearingWindow() == milliseconds(1500));
  CHECK(t.judgeInterval() == milliseconds(150));
  CHECK(t.unreachableThreshold() == milliseconds(2000));
  // Bounds: the hearing window never past the failure timeout, the judge interval at least 10 ms
  // and at most a heartbeat, the threshold never past the failure timeout.
  const FailureDetector::Timing tight{milliseconds(100), milliseconds(50), milliseconds(50)};
  CHECK(tight.hearingWindow() == milliseconds(100));
  CHECK(tight.judgeInterval() == milliseconds(10));
  CHECK(tight.unreachableThreshold() == milliseconds(100));
  const FailureDetector::Timing slowBeat{milliseconds(10000), milliseconds(200),
                                         milliseconds(5000)};
  CHECK(slowBeat.judgeInterval() == milliseconds(200));
}

TEST_CASE("Failure detector: a listed member fails after exactly the failure timeout of silence",
          "[cluster][failure_detector]") {
  FailureDetector d(timing());
  d.listed(2, kT0);
  d.listed(3, kT0 + milliseconds(100));
  CHECK(d.failed(kT0 + milliseconds(3000)).empty());  // silent for the timeout: not past it
  CHECK(d.failed(kT0 + milliseconds(3000) + kNs) == std::vector<MemberId>{2});
  // Listing again keeps the first hearing; an answer restarts the silence.
  d.listed(2, kT0 + milliseconds(2000));
  CHECK(d.failed(kT0 + milliseconds(3000) + kNs) == std::vector<MemberId>{2});
  d.heard(2, kT0 + milliseconds(2000));
  CHECK(d.failed(kT0 + milliseconds(5000)) == std::vector<MemberId>{3});
  CHECK(d.failed(kT0 + milliseconds(5000) + kNs) == (std::vector<MemberId>{2, 3}));
  // An answer from a member never listed is not a hearing.
  d.heard(9, kT0);
  CHECK(!d.hearsFrom(9, kT0));
}

TEST_CASE("Failure detector: hears a member for the hearing window after its answer",
          "[cluster][failure_detector]") {
  FailureDetector d(timing());
  d.listed(2, kT0);
  CHECK(!d.hearsFrom(2, kT0));  // listed, never answered
  d.heard(2, kT0);
  CHECK(d.hearsFrom(2, kT0 + milliseconds(1500) - kNs));
  CHECK(!d.hearsFrom(2, kT0 + milliseconds(1500)));
  CHECK(d.answeredWithin(2, milliseconds(10), kT0 + milliseconds(10) - kNs));
  CHECK(!d.answeredWithin(2, milliseconds(10), kT0 + milliseconds(10)));
}

TEST_CASE("Failure detector: a round watches the ring, the leader and the suspects",
          "[cluster][failure_detector]") {
  FailureDetector d(timing());
  const Topology t = members({1, 2, 3, 4, 5});
  CHECK(d.beginRound(t, {2, 3}, 1, 5, kT0) == (std::vector<MemberId>{2, 3, 5}));
  // The leader is not added twice, nor itself, nor when unlisted.
  CHECK(d.beginRound(t, {2, 5}, 1, 5, kT0) == (std::vector<MemberId>{2, 5}));
  CHECK(d.beginRound(t, {2}, 1, 1, kT0) == (std::vector<MemberId>{2}));
  CHECK(d.beginRound(t, {2}, 1, 7, kT0) == (std::vector<MemberId>{2}));
  // A suspect is watched until two failure timeouts after its suspicion, inclusive.
  d.suspect(4, kT0);
  CHECK(d.watched() == (std::vector<MemberId>{2, 4}));
  CHECK(d.beginRound(t, {2}, 1, 0, kT0 + milliseconds(6000)) == (std::vector<MemberId>{2, 4}));
  CHECK(d.beginRound(t, {2}, 1, 0, kT0 + milliseconds(6000) + kNs) == (std::vector<MemberId>{2}));
  // A member the topology no longer lists is forgotten: not failed, not a suspect.
  d.suspect(3, kT0 + milliseconds(7000));
  d.beginRound(members({1, 2}), {2}, 1, 0, kT0 + milliseconds(7000));
  CHECK(d.watched() == std::vector<MemberId>{2});
  CHECK(d.failed(kT0 + std::chrono::hours(1)) == std::vector<MemberId>{2});
}

TEST_CASE("Failure detector: silence counts from the last answer or the start of the watch",
          "[cluster][failure_detector]") {
  FailureDetector d(timing());
  const Topology t = members({1, 2, 3});
  d.listed(2, kT0);
  d.heard(2, kT0);
  // Watched only from +1 s: silent since then, not since the answer before.
  d.beginRound(t, {2}, 1, 0, kT0 + milliseconds(1000));
  CHECK(d.silentSince(2) == kT0 + milliseconds(1000));
  d.heard(2, kT0 + milliseconds(1500));
  CHECK(d.silentSince(2) == kT0 + milliseconds(1500));
  // A member that stops being watched and is watched again counts from the new watch.
  d.beginRound(t, {3}, 1, 0, kT0 + milliseconds(1600));
  d.beginRound(t, {2}, 1, 0, kT0 + milliseconds(1700));
  CHECK(d.silentSince(2) == kT0 + milliseconds(1700));
  CHECK(d.silentSince(9) == FailureDetector::SteadyTime{});
}

TEST_CASE("Failure detector: a watched member is reported unreachable at its threshold",
          "[cluster][failure_detector]") {
  FailureDetector d(timing());
  const Topology t = members({1, 2, 3, 4});
  d.beginRound(t, {2, 3}, 1, 0, kT0);
  d.heard(2, kT0);
  // 2 answered: reported after the unreachable threshold (2000 ms). 3 never answered: after the
  // failure timeout (it may be a joiner that does not know it was admitted).
  CHECK(d.unreachable(kT0 + milliseconds(2000)).empty());
  CHECK(d.unreachable(kT0 + milliseconds(2000) + kNs) == std::vector<MemberId>{2});
  CHECK(d.unreachable(kT0 + milliseconds(3000)) == std::vector<MemberId>{2});
  CHECK(d.unreachable(kT0 + milliseconds(3000) + kNs) == (std::vector<MemberId>{2, 3}));
  // A suspect held a request up, so it was a member: the shorter threshold, though it never
  // answered a heartbeat; and it is reported only while watched.
  d.suspect(4, kT0);
  CHECK(d.unreachable(kT0 + milliseconds(2000) + kNs) == (std::vector<MemberId>{2, 4}));
  // Members that are listed but not watched are never reported.
  FailureDetector e(timing());
  e.listed(2, kT0);
  CHECK(e.unreachable(kT0 + std::chrono::hours(1)).empty());
}

TEST_CASE("Failure detector: a silent watched member is probed once per failure timeout",
          "[cluster][failure_detector]") {
  FailureDetector d(timing());
  const Topology t = members({1, 2});
  d.beginRound(t, {2}, 1, 0, kT0);
  CHECK(!d.probeDue(2, kT0 + milliseconds(3000)));
  CHECK(d.probeDue(2, kT0 + milliseconds(3000) + kNs));
  CHECK(!d.probeDue(2, kT0 + milliseconds(6000)));  // probed a failure timeout less 1 ns ago
  CHECK(d.probeDue(2, kT0 + milliseconds(6000) + kNs));
  d.heard(2, kT0 + milliseconds(7000));
  CHECK(!d.probeDue(2, kT0 + milliseconds(10000)));  // answered: silent only 3000 ms
}

TEST_CASE("Failure detector: a stall of detection itself is nobody's silence",
          "[cluster][failure_detector]") {
  const milliseconds cadence(500);  // a follower's: the heartbeat interval
  FailureDetector d(timing());
  d.listed(2, kT0);
  d.discountStall(kT0, cadence);  // the first run: nothing to discount
  // A gap of max(heartbeat, 2 cadences) = 1000 ms is no stall.
  d.discountStall(kT0 + milliseconds(1000), cadence);
  CHECK(d.failed(kT0 + milliseconds(3000) + kNs) == std::vector<MemberId>{2});
  // One nanosecond more is: the hearing moves forward by the gap less a cadence.
  FailureDetector e(timing());
  e.listed(2, kT0);
  e.discountStall(kT0, cadence);
  e.discountStall(kT0 + milliseconds(1000) + kNs, cadence);
  CHECK(e.failed(kT0 + milliseconds(3000) + kNs).empty());
  CHECK(e.silentSince(2) == kT0 + milliseconds(500) + kNs);
  // Never past now: a hearing after the stall began stays at most at now.
  FailureDetector f(timing());
  f.discountStall(kT0, cadence);
  f.listed(2, kT0 + milliseconds(9000));
  f.discountStall(kT0 + milliseconds(10000), cadence);
  CHECK(f.silentSince(2) == kT0 + milliseconds(10000));
}

TEST_CASE("Failure detector: a new leader gives the members it did not hear a fresh timeout",
          "[cluster][failure_detector]") {
  FailureDetector d(timing());
  const Topology t = members({1, 2, 3, 4});
  d.beginRound(t, {2}, 1, 0, kT0);  // watches 2 only
  d.heard(2, kT0 + milliseconds(900));
  d.listed(3, kT0);
  d.heard(3, kT0 + milliseconds(900));  // an answer, but 3 was not watched
  d.listed(4, kT0);
  d.startJudging(kT0 + milliseconds(1000));
  CHECK(d.hearsFrom(2, kT0 + milliseconds(1000)));
  CHECK(!d.hearsFrom(3, kT0 + milliseconds(1000)));
  // 2 fails a failure timeout after its answer; 3 and 4 a failure timeout after the leadership
  // began, not after their last answer or listing.
  CHECK(d.failed(kT0 + milliseconds(3900) + kNs) == std::vector<MemberId>{2});
  CHECK(d.failed(kT0 + milliseconds(4000)) == std::vector<MemberId>{2});
  CHECK(d.failed(kT0 + milliseconds(4000) + kNs) == (std::vector<MemberId>{2, 3, 4}));
}
